"""What `rolebound tune` costs on this machine, on the demo's pairs (docs/fix.md).

Runs, each as the installed script in its own process:
1. the demo run (`rolebound run charm --limit 300`, the bundled model), reused if OUT/demo holds it;
2. `rolebound data pairs` from it (30% of each region's characters held out, seed 0);
3. `rolebound tune` on the train split, timed as a whole process, with its peak resident memory
   (the child's ru_maxrss) and the load average before and after.

    .venv/bin/python bench/tune.py                 # about 5 minutes on 2 idle cores
    .venv/bin/python bench/tune.py --out /tmp/tb   # elsewhere (default: a temporary folder)

Nothing is written into the repository. The figures it prints are from one run; rerun it on idle
cores before quoting them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peers import cpu_name   # bench/ is on sys.path when a script here runs

ROLEBOUND = str(Path(sys.executable).with_name("rolebound"))


_PEAK = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
         "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def timed(*args: str) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one rolebound command; a fresh parent process per
    command, so the peak is that command's alone."""
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", _PEAK, ROLEBOUND, *args], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, int(res.stdout.strip().splitlines()[-1]) / 1024.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="working folder (default: a temporary one, removed)")
    ap.add_argument("--limit", type=int, default=300)
    a = ap.parse_args()
    tmp = None if a.out else tempfile.TemporaryDirectory(prefix="rolebound-tune-bench-")
    out = Path(a.out or tmp.name)
    load0 = os.getloadavg()[0]
    run_s, _ = timed("run", "charm", "--limit", str(a.limit), "--out", str(out / "demo"))
    timed("data", "pairs", str(out / "demo"), "--out", str(out / "pairs"), "--heldout", "0.3", "--seed", "0")
    tune_s, peak = timed("tune", str(out / "pairs"), "--model", "bundled", "--out", str(out / "adapter"))
    load1 = os.getloadavg()[0]
    meta = json.loads((out / "adapter" / "tune.json").read_text())
    pairs = json.loads((out / "pairs" / "pairs.json").read_text())
    print(f"machine: {os.cpu_count()} cores, {cpu_name()}; load average {load0:.2f} before, {load1:.2f} after")
    print(f"demo run (--limit {a.limit}): {run_s:.0f} s; pairs: train {pairs['counts']['train']}, "
          f"test {pairs['counts']['test']} ({len(pairs['characters']['test'])} held-out characters)")
    print(f"tune: {tune_s:.0f} s as a process ({meta['wall_s']:.0f} s training), {meta['steps']} steps of "
          f"{meta['settings']['batch_size']} pairs, {meta['threads']} threads, peak RSS {peak:.0f} MiB; "
          f"loss {meta['first_log'].get('loss')} -> {meta['last_log'].get('loss')}, reward accuracy "
          f"{meta['first_log'].get('rewards/accuracies')} -> {meta['last_log'].get('rewards/accuracies')}")
    if tmp:
        tmp.cleanup()


if __name__ == "__main__":
    main()
