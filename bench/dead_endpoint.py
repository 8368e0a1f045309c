"""How long a run takes to stop on a dead endpoint (issue 23), in one command.

    .venv/bin/python bench/dead_endpoint.py [--timeout 2] [--concurrency 4] [--items 41]

Two fake servers (rolebound.testing.fake_server, in this process, on 127.0.0.1): one that
accepts connections and never answers (`--mode hang`), one that answers 500 to everything
(`--mode 500`). For each, `rolebound run mcq --model openai:test-model --timeout T -c C` runs
through the installed script at the backend's defaults (retries, backoff, down_after), and the
script prints: exit code, the stderr line, requests the server saw, most in flight at once,
seconds from the first failed request to the process's exit, and that time as a fraction of the
target max(3 x T, 30 s) (PASS under 1). The first failure is the first 500 answer, or for the
hang, the first request's arrival plus T. Nothing is written into the repository: the runs and
the response cache live in a temporary folder, removed at the end.
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

from rolebound.testing.fake_server import MODES, FakeServer

ROLEBOUND = Path(sys.executable).parent / "rolebound"


def one(mode: str, args, tmp: Path) -> dict:
    data = tmp / "q.jsonl"
    with data.open("w", encoding="utf-8") as fh:
        for i in range(args.items):
            fh.write(json.dumps({"id": f"q{i}", "question": f"Question {i}?", "options": ["w", "x", "y", "z"],
                                 "answer": "ABCD"[i % 4]}) + "\n")
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES[mode])
        cmd = [str(ROLEBOUND), "run", "mcq", "--model", "openai:test-model", "--base-url", srv.url + "/v1",
               "--data", str(data), "--scoring", "generate", "--out", str(tmp / mode), "--quiet", "--no-cache",
               "--timeout", f"{args.timeout:g}", "-c", str(args.concurrency)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                             env={**os.environ, "ROLEBOUND_CACHE_DIR": str(tmp / "cache")})
        end = time.monotonic()
        arrivals = srv.stats.arrivals
        if mode == "hang":
            first = arrivals[0]["t"] + args.timeout if arrivals else end
        else:
            first = next((a["t"] for a in arrivals if a["status"] == 500), end)
        target = max(3 * args.timeout, 30.0)
        stop = end - first
        return {"mode": mode, "exit": res.returncode, "line": res.stderr.strip().splitlines()[-1:],
                "requests": srv.stats.requests, "max_in_flight": srv.stats.max_in_flight,
                "stop_s": round(stop, 2), "target_s": target, "ratio": round(stop / target, 3),
                "verdict": "PASS" if stop < target and res.returncode == 3 else "MISS"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--items", type=int, default=41)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        for mode in ("hang", "500"):
            print(json.dumps(one(mode, args, Path(d))), flush=True)


if __name__ == "__main__":
    main()
