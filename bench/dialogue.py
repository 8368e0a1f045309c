"""What the dialogue strategy's sharing saves, measured in one run (docs/dialogue.md).

1. Shared dialogues: probes whose plans agree (same role, same warm-up) branch off one dialogue,
   so its turns are generated once. Printed: warm-up turns generated vs the turns one dialogue per
   probe and depth would need.
2. Prefix reuse in the local engine: probes of one role at one depth share the dialogue as a
   prefix, and the torch engine decodes a batch's shared prefix once (`prefix_min`, default 64
   tokens). The same run with `--backend-opt prefix_min=0` (off) and with the default, each from
   an empty response cache: wall time of each and their ratio, and whether the answers agree.

    .venv/bin/python bench/dialogue.py                       # bundled SmolLM2-135M, a few minutes on 2 cores
    .venv/bin/python bench/dialogue.py --model bundled:qwen2.5-coder-1.5b --limit 6

Timings taken while other work runs on the machine are "under load": the ratio of two runs made
back to back is the figure to read, not the seconds. Writes nothing into the repository.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path


def one(model: str, limit: int, depths: str, prefix_min: int | None, root: Path, tag: str):
    from rolebound import api
    from rolebound.store import load_records

    os.environ["ROLEBOUND_CACHE_DIR"] = str(root / f"cache-{tag}")
    bopts = {} if prefix_min is None else {"prefix_min": prefix_min}
    t0 = time.perf_counter()
    res = api.run("charm", model=model, strategies="dialogue", limit=limit, out=root / tag, progress=False,
                  options={"depths": depths, "warmup": "scripted", "similarity": False}, backend_options=bopts,
                  use_cache=False, report=False)
    wall = time.perf_counter() - t0
    return res, wall, load_records(root / tag)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="bundled")
    ap.add_argument("--limit", type=int, default=12, help="CHARM probes (BA and BC)")
    ap.add_argument("--depths", default="0,4,8")
    a = ap.parse_args(argv)
    from rolebound.dialogue import metrics as dm

    from rolebound.store import model_dir

    load = os.getloadavg()[0]
    # the converted models stay where they are; only the response cache moves to the temp folder
    os.environ.setdefault("ROLEBOUND_MODEL_DIR", str(model_dir()))
    with tempfile.TemporaryDirectory(prefix="rb-dialogue-bench-") as tmp:
        root = Path(tmp)
        off, t_off, recs_off = one(a.model, a.limit, a.depths, 0, root, "prefix-off")
        on, t_on, recs_on = one(a.model, a.limit, a.depths, None, root, "prefix-on")
    probes = dm.probe_records(recs_on)
    turns = [r for r in recs_on if r.stage.startswith("turn@")]
    naive = sum(int(r.meta["depth"]) for r in probes)       # one dialogue per probe and depth
    answers = lambda recs: {r.call_id: r.response for r in dm.probe_records(recs)}   # noqa: E731
    same = sum(1 for k, v in answers(recs_on).items() if answers(recs_off).get(k) == v)
    print(f"model {a.model}, CHARM dialogue, depths {a.depths}, {len(probes)} probe answers; "
          f"load average at start {load:.2f} ({os.cpu_count()} cores)")
    print("| measure | value |\n|---|---|")
    print(f"| warm-up turns generated (shared dialogues) | {len(turns)} |")
    print(f"| turns one dialogue per probe and depth would need | {naive} |")
    print(f"| turns saved by sharing | {1 - len(turns) / naive:.0%} |" if naive else "| turns saved | - |")
    print(f"| model calls, prefix reuse off / on | {off.counts.calls} / {on.counts.calls} |")
    print(f"| wall s, prefix reuse off (prefix_min=0) | {t_off:.1f} |")
    print(f"| wall s, prefix reuse on (default prefix_min) | {t_on:.1f} |")
    print(f"| ratio on / off | {t_on / t_off:.2f} |")
    print(f"| probe answers identical on and off | {same} of {len(probes)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
