"""`rolebound sweep` on one machine: sequential, local --parallel 4 and Ray (issue 25).

    .venv/bin/python bench/sweep.py [--limit 4] [--delay 0.1] [--scratch DIR]

Workload: a 4 models x 4 suites grid (16 runs) of `openai:` models against one fake
OpenAI-compatible server answering after `--delay` seconds (rolebound.testing.fake_server), each
run `--limit` items, no cache, judged by the model itself. Whole-command wall time for:

1. sequential: --executor local (one run at a time, in process);
2. local parallel: --executor local --parallel 4 (4 processes);
3. ray: --executor ray --parallel 4 on a local Ray cluster started first (`ray start --head`),
   so its start-up is not counted; joining it is.

Ray's fixed overhead per run: the driver's submit-to-result time of each task less the run's own
wall time inside its task (index.json: task_s - wall_s), mean over the runs. Bars: Ray at most
1.3x local parallel, overhead under 2 s per run; printed as met/missed with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import cpu_busy, loadavg  # noqa: E402

BIN = Path(sys.executable).parent
BARS = {"ray_vs_local": 1.3, "overhead_s": 2.0}
SUITES = ["charm", "knowledge-errors", "multiverse", "capability"]


def log(msg: str) -> None:
    print(f"[sweep {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def config(path: Path, url: str, limit: int) -> Path:
    import yaml

    from rolebound.models.bundled import converted_dir

    # the bundled model's tokenizer gives the API models a chat template (capability's Injection)
    path.write_text(yaml.safe_dump({"suite": SUITES, "model": [f"openai:m{i}" for i in range(1, 5)],
                                    "limit": limit, "judge": "self", "cache": False,
                                    "backend": {"base_url": url, "concurrency": 16,
                                                "tokenizer": str(converted_dir())}}), encoding="utf-8")
    return path


def timed(args: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([str(BIN / "rolebound"), "sweep", *args, "-q"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"sweep failed ({res.returncode}): {res.stdout[-3000:]} {res.stderr[-2000:]}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--delay", type=float, default=0.1)
    ap.add_argument("--scratch", type=Path, default=None)
    a = ap.parse_args()
    from rolebound.testing.fake_server import FakeServer

    scratch = a.scratch or Path(tempfile.mkdtemp(prefix="rolebound-bench-sweep-"))
    scratch.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ROLEBOUND_CACHE_DIR": str(scratch / "cache")}
    log(f"load before: {loadavg()} (1/5/15 min), CPU busy {100 * cpu_busy():.0f}% of {os.cpu_count()} cores")
    walls: dict[str, float] = {}
    with FakeServer(delay=a.delay, reply="Answer: 1") as srv:
        cfg = config(scratch / "grid.yaml", srv.url + "/v1", a.limit)
        walls["sequential"] = timed([str(cfg), "--out", str(scratch / "seq")], env)
        log(f"sequential: {walls['sequential']:.1f} s")
        walls["local_parallel"] = timed([str(cfg), "--out", str(scratch / "par"), "--parallel", "4"], env)
        log(f"local --parallel 4: {walls['local_parallel']:.1f} s")
        ray_dir = scratch / "ray-tmp"
        subprocess.run([str(BIN / "ray"), "start", "--head", "--include-dashboard=false", f"--temp-dir={ray_dir}",
                        "--object-store-memory", str(200 << 20), "--disable-usage-stats"],
                       check=True, capture_output=True, env=env)
        try:
            walls["ray"] = timed([str(cfg), "--out", str(scratch / "ray"), "--executor", "ray", "--address", "auto",
                                  "--parallel", "4"], env)
        finally:
            subprocess.run([str(BIN / "ray"), "stop", "--force"], capture_output=True, env=env)
        log(f"ray --parallel 4: {walls['ray']:.1f} s")
        requests = srv.stats.requests
    rows = json.loads((scratch / "ray" / "index.json").read_text())["runs"]
    over = [r["task_s"] - r["wall_s"] for r in rows if r.get("task_s") is not None and r.get("wall_s") is not None]
    overhead = sum(over) / len(over) if over else float("nan")
    ratio = walls["ray"] / walls["local_parallel"]
    log(f"load after: {loadavg()}; {requests} requests to the fake server ({a.delay} s each)")
    print(f"16 runs (4 models x 4 suites, --limit {a.limit}): sequential {walls['sequential']:.1f} s, "
          f"local --parallel 4 {walls['local_parallel']:.1f} s, ray {walls['ray']:.1f} s")
    print(f"ray / local parallel: {ratio:.2f} (bar <= {BARS['ray_vs_local']}): "
          f"{'met' if ratio <= BARS['ray_vs_local'] else 'missed'}")
    print(f"ray overhead per run: {overhead:.2f} s (bar < {BARS['overhead_s']} s): "
          f"{'met' if overhead < BARS['overhead_s'] else 'missed'}")
    if over:    # the mean is mostly the first task of each fresh worker (process start): show the spread
        over.sort()
        print(f"  per run: median {over[len(over) // 2]:.2f} s, max {over[-1]:.2f} s")
    print(f"machine load (1/5/15 min) at the end: {loadavg()}")
    if a.scratch is None:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
