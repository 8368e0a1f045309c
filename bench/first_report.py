"""`make demo` from a fresh clone (issue 53.4): where the time goes, before and after, in one run.

    python3 bench/first_report.py [--before a38d783] [--after HEAD] [--rounds 1] [--scratch DIR]
    python3 bench/first_report.py --only after --limit 20      # a quick look at the plumbing

For each revision (taking turns, round by round) it clones this repository into a scratch folder,
checks the revision out and runs `make demo` there as a new user would, with every cache rolebound
or uv keeps empty: the response cache, the derived caches and the converted bundled model
(ROLEBOUND_CACHE_DIR), uv's package cache (UV_CACHE_DIR) and the pinned uv itself
(ROLEBOUND_TOOLS). `--warm-model` keeps the converted bundled model of ~/.cache/rolebound/models
instead (a machine that ran rolebound before; the conversion takes about 15-20 s once per
machine). pip's own cache (~/.cache/pip) is left as it is, which favours the pip install
of the "before" side; `--cold-pip` turns it off for both (PIP_NO_CACHE_DIR: every package
downloaded again). OMP_NUM_THREADS and ROLEBOUND_THREADS are removed, so the automatic thread
policy chooses as it would for a user.

Phases, all from the one `make demo` process tree, in seconds from its start:
- install: until .venv/.rolebound-installed is written (venv, the lock, the editable checkout);
  after issue 53, scripts/install_venv.py also times its own steps (.venv/.rolebound-setup.json);
- start-up: from there to the run's start (Python, imports, the CLI, the data);
- model load: the run's start to the model loaded (manifest timing: the bf16 conversion of the
  bundled GGUF on a fresh machine, then the load);
- questions: model loaded to the last question answered (the option-similarity table, then every
  question);
- control + report: to the line that prints the report's path (the override-control calls, the
  records, metrics and report);
- first report: when that line is printed. The bar: 100 s on 2 idle cores.

After each run the clone's lock test (tests/test_lock.py: .venv equals requirements.lock) is run
and its result printed. Needs git, make and the machine's python3; nothing in this checkout is
written. Check the load average it prints: on a busy machine the figures mean little.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import cpu_busy, loadavg  # noqa: E402  (bench/ scripts share these)

ROOT = Path(__file__).resolve().parents[1]
BAR_S = 100.0
REPORT_LINE = re.compile(r"report: .*report\.html")
PHASES = ["install", "start-up", "model load", "questions", "control + report", "first report", "make exit"]


def log(msg: str) -> None:
    print(f"[first-report {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def clone(rev: str, dest: Path) -> str:
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", f"{rev}^{{commit}}"], check=True,
                         capture_output=True, text=True).stdout.strip()
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", sha], check=True)
    return subprocess.run(["git", "-C", str(dest), "rev-parse", "--short", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def user_model_dir() -> Path:
    """Where rolebound keeps converted models by default (store.model_dir without the variables)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rolebound" / "models"


def demo_env(scratch: Path, cold_pip: bool, warm_model: bool) -> dict:
    drop = ("OMP_NUM_THREADS", "ROLEBOUND_THREADS", "ROLEBOUND_UV", "ROLEBOUND_INSTALLER", "ROLEBOUND_MODEL_DIR",
            "ROLEBOUND_DERIVED_DIR", "VIRTUAL_ENV", "PYTHONPATH", "UV_CACHE_DIR", "MAKEFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(ROLEBOUND_CACHE_DIR=str(scratch / "rolebound-cache"), UV_CACHE_DIR=str(scratch / "uv-cache"),
               ROLEBOUND_TOOLS=str(scratch / "tools"))
    if cold_pip:
        env["PIP_NO_CACHE_DIR"] = "1"
    if warm_model:
        env["ROLEBOUND_MODEL_DIR"] = str(user_model_dir())
    return env


def one(rev: str, scratch: Path, cold_pip: bool, warm_model: bool, limit: int | None) -> dict:
    scratch.mkdir(parents=True)
    repo = scratch / "clone"
    sha = clone(rev, repo)
    env = demo_env(scratch, cold_pip, warm_model)
    log_path = scratch / "make-demo.log"
    t0 = time.time()
    report_at = None
    with open(log_path, "w") as fh:
        make = ["make", "demo"] + ([f"DEMO_LIMIT={limit}"] if limit else [])
        proc = subprocess.Popen(make, cwd=repo, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in proc.stdout:
            fh.write(line)
            if report_at is None and REPORT_LINE.search(line):
                report_at = time.time() - t0
        rc = proc.wait()
    end = time.time() - t0
    res: dict = {"rev": rev, "sha": sha, "rc": rc, "log": str(log_path), "make exit": end, "first report": report_at}
    stamp = repo / ".venv" / ".rolebound-installed"
    if stamp.exists():
        res["install"] = stamp.stat().st_mtime - t0
    setup = repo / ".venv" / ".rolebound-setup.json"
    if setup.exists():
        res["setup"] = json.loads(setup.read_text())
    man_path = repo / "runs" / "charm-demo" / "manifest.json"
    if man_path.exists():
        man = json.loads(man_path.read_text())
        t = man.get("timing") or {}
        if {"start", "loaded", "items_done"} <= t.keys() and "install" in res:
            res["start-up"] = t["start"] - t0 - res["install"]
            res["model load"] = t["loaded"] - t["start"]
            res["questions"] = t["items_done"] - t["loaded"]
            if report_at is not None:
                res["control + report"] = report_at - (t["items_done"] - t0)
        res["calls"] = (man.get("counts") or {}).get("model_calls")
        res["threads"] = ((man.get("model_info") or {}).get("thread_policy") or {}).get("threads")
    if rc == 0:
        lock = subprocess.run([str(repo / ".venv" / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "tests/test_lock.py"], cwd=repo, env=env, capture_output=True, text=True)
        res["lock test"] = "PASS" if lock.returncode == 0 else "FAIL"
        if lock.returncode != 0:
            log(f"  lock test failed:\n{lock.stdout[-2000:]}")
    else:
        log(f"  make demo exited {rc}; see {log_path}")
    return res


def cell(r: dict, key: str) -> str:
    v = r.get(key)
    return "-" if v is None else f"{v:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="a38d783", help="revision before (default: the one issue 53 measured)")
    ap.add_argument("--after", default="HEAD", help="revision after (default: HEAD of this checkout)")
    ap.add_argument("--only", choices=["before", "after"], help="time one side only")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--limit", type=int, default=None, help="DEMO_LIMIT for make (default: the Makefile's 300)")
    ap.add_argument("--cold-pip", action="store_true", help="pip's cache off too (PIP_NO_CACHE_DIR=1)")
    ap.add_argument("--warm-model", action="store_true",
                    help="use the converted bundled model in ~/.cache/rolebound/models (a machine that ran rolebound "
                         "before: no conversion); it is converted there first if missing")
    ap.add_argument("--scratch", type=Path, default=None, help="keep clones and logs here (default: a temp folder)")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = ap.parse_args()

    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="rolebound-first-report-"))
    scratch.mkdir(parents=True, exist_ok=True)
    sides = [s for s in ("before", "after") if args.only in (None, s)]
    revs = {"before": args.before, "after": args.after}
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load0, busy0 = loadavg(), cpu_busy()
    log(f"{date}: {os.cpu_count()} CPUs, load average {load0}, CPUs {busy0:.0%} busy before")
    if busy0 > 0.15:
        log("WARNING: the machine is not quiet; these figures will not mean much")
    if shutil.which("uv"):
        log(f"note: uv on PATH ({shutil.which('uv')}): the after side uses it instead of fetching the pinned one")
    if args.warm_model and not any(user_model_dir().glob("SmolLM2-135M-Instruct*/rolebound.json")):
        log(f"--warm-model: no converted bundled model in {user_model_dir()}; the first run converts it there")
    results: dict[str, list[dict]] = {s: [] for s in sides}
    try:
        for rnd in range(args.rounds):
            order = sides if rnd % 2 == 0 else sides[::-1]
            for side in order:
                log(f"round {rnd + 1}, {side} ({revs[side]}): make demo in a fresh clone")
                r = one(revs[side], scratch / f"{side}-{rnd + 1}", args.cold_pip, args.warm_model, args.limit)
                results[side].append(r)
                log("  " + ", ".join(f"{k} {cell(r, k)} s" for k in PHASES) + f", lock test {r.get('lock test', '-')}")
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)
    load1 = loadavg()

    print()
    print(f"### `make demo` from a fresh clone, {date} ({os.cpu_count()} CPUs, load average before {load0}, "
          f"after {load1}; {args.rounds} round(s){'; pip cache off' if args.cold_pip else ''}"
          f"{f'; DEMO_LIMIT={args.limit}' if args.limit else ''}"
          f"{'; converted model kept from earlier (--warm-model)' if args.warm_model else '; every cache empty'})")
    print()
    print("| side | rev | " + " | ".join(f"{p} s" for p in PHASES) + " | calls | threads | lock test |")
    print("|---|---|" + "---|" * (len(PHASES) + 3))
    for side in sides:
        for r in results[side]:
            print(f"| {side} | {r['sha']} | " + " | ".join(cell(r, p) for p in PHASES)
                  + f" | {r.get('calls', '-')} | {r.get('threads', '-')} | {r.get('lock test', '-')} |")
    for side in sides:
        for r in results[side]:
            if r.get("setup"):
                s = r["setup"]
                steps = ", ".join(f"{k} {v:.1f} s" for k, v in s.get("steps", {}).items())
                print(f"\n- {side} {r['sha']} install by {s.get('installer')}: {steps}")
    if len(sides) == 2 and all(results[s] for s in sides):
        print("\n| phase | before (best) s | after (best) s | after / before |")
        print("|---|---|---|---|")
        for p in PHASES:
            b = [r[p] for r in results["before"] if r.get(p) is not None]
            a = [r[p] for r in results["after"] if r.get(p) is not None]
            if a and b:
                print(f"| {p} | {min(b):.1f} | {min(a):.1f} | {min(a) / min(b):.2f} |")
    for side in sides:
        got = [r["first report"] for r in results[side] if r.get("first report") is not None]
        if got:
            best = min(got)
            print(f"\n{side}: first report in {best:.1f} s (best of {len(got)}): "
                  f"{'PASS' if best <= BAR_S else 'MISS'} (bar {BAR_S:.0f} s on 2 idle cores)")
    if args.json:
        args.json.write_text(json.dumps({"date": date, "load_before": load0, "load_after": load1,
                                         "results": results}, indent=1))


if __name__ == "__main__":
    main()
