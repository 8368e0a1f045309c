"""Draw issue 51's blind cut replies of charm-official (run once; the labels were added by hand).

    python tests/data/replies/charm_official_cut/draw_blind.py RUN_DIR OUT.txt

RUN_DIR is a charm-official run rebuilt from bench/carried (docs/extraction.md). Of the model replies of
the choice stages (bc, kv, nr, kv~ctl) that the 256-token cap cut (finish_reason "length"), leaving out
the 66 call ids of labels.jsonl, it draws 30 at random (seed 29, from the call ids sorted) and writes
their call ids, one a line. Only ids: the replies hold the CHARM release's text (no licence).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 29
N = 30
STAGES = {"bc", "kv", "nr", "kv~ctl"}


def main(run: str, out: str) -> None:
    have = {json.loads(x)["call_id"] for x in (Path(__file__).parent / "labels.jsonl").read_text().splitlines() if x.strip()}
    pool = []
    for line in (Path(run) / "records.jsonl").read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if (r.get("role") == "model" and r.get("stage") in STAGES and r.get("finish_reason") == "length"
                and r["call_id"] not in have):
            pool.append(r["call_id"])
    drawn = random.Random(SEED).sample(sorted(set(pool)), N)
    head = (f"# blind9 cut replies (issue 51 item 7): draw_blind.py RUN OUT, seed {SEED}, {N} of the {len(set(pool))} "
            "cut choice replies of charm-official outside labels.jsonl; drawn before labelling, unread by the rules\n")
    Path(out).write_text(head + "".join(c + "\n" for c in drawn), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:3])
