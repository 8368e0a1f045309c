"""rolebound on a shared machine (issue 17): contention and free re-runs, in one command.

    .venv/bin/python bench/shared.py [--rounds N] [--limit 300] [--compare-threads N] [--scratch DIR]

Workload: `rolebound run charm --limit 300 --no-cache --set similarity=false` on the bundled
model, whole-process wall time (start-up and model load included). Conditions, each round:

1. alone;
2. alone, with one unrelated busy process (a pure-Python loop) started first;
3. two such runs started together (each one's wall time);
4. the re-run of a finished run of the whole starter set (`rolebound run charm`, 0 model calls).

It prints each figure, the minimum over rounds, and the issue's bars with PASS/MISS: two together
each within 2.5x of alone, with the busy process within 2.2x, the re-run under 3 s. With
`--compare-threads N` conditions 1-3 are also run with `--threads N` (e.g. 2: every core, no
automatic choice), so the automatic policy can be judged against it on the same machine.

Runs, the derived caches and the registry of engines live in the scratch folder (the default is a
temporary one, removed at the end); the converted bundled model is read from the usual model
folder. OMP_NUM_THREADS and ROLEBOUND_THREADS are removed from the runs' environment, so the
automatic thread policy is what is measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from peers import cpu_busy, loadavg   # bench/ is on sys.path when a script here runs

ROOT = Path(__file__).resolve().parents[1]
ROLEBOUND = Path(sys.executable).parent / "rolebound"
BARS = {"busy": 2.2, "pair": 2.5, "rerun_s": 3.0}


def log(msg: str) -> None:
    print(f"[shared {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def run_env(scratch: Path) -> dict:
    from rolebound.store import model_dir

    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "ROLEBOUND_THREADS")}
    env.update(ROLEBOUND_MODEL_DIR=str(model_dir()), ROLEBOUND_CACHE_DIR=str(scratch / "cache"),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


def charm_cmd(out: Path, limit: int, threads: int | None) -> list[str]:
    cmd = [str(ROLEBOUND), "run", "charm", "--limit", str(limit), "--no-cache", "--set", "similarity=false",
           "--out", str(out), "--overwrite", "-q"]
    return cmd + (["--threads", str(threads)] if threads else [])


def start(cmd: list[str], env: dict, log_path: Path) -> tuple[subprocess.Popen, float, object]:
    fh = open(log_path, "w")
    return subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT), time.perf_counter(), fh


def finish(proc, t0: float, fh, out: Path | None) -> dict:
    rc = proc.wait()
    wall = time.perf_counter() - t0
    fh.close()
    res = {"wall": round(wall, 2), "rc": rc}
    if out is not None and (out / "manifest.json").exists():
        man = json.loads((out / "manifest.json").read_text())
        tp = man.get("model_info", {}).get("thread_policy", {})
        res.update(calls=man.get("counts", {}).get("model_calls"), threads=tp.get("threads"), why=tp.get("why"),
                   changes=[c["threads"] for c in tp.get("changes", [])])
    if rc != 0:
        log(f"  exit code {rc}; see {fh.name}")
    return res


def alone(scratch: Path, env: dict, limit: int, threads: int | None, tag: str) -> dict:
    out = scratch / "runs" / f"alone-{tag}"
    return finish(*start(charm_cmd(out, limit, threads), env, scratch / f"alone-{tag}.log"), out)


def with_busy(scratch: Path, env: dict, limit: int, threads: int | None, tag: str) -> dict:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(1.0)                      # the loop is running before the run starts
        out = scratch / "runs" / f"busy-{tag}"
        return finish(*start(charm_cmd(out, limit, threads), env, scratch / f"busy-{tag}.log"), out)
    finally:
        busy.kill()
        busy.wait()


def pair(scratch: Path, env: dict, limit: int, threads: int | None, tag: str) -> list[dict]:
    outs = [scratch / "runs" / f"pair{k}-{tag}" for k in (1, 2)]
    started = [start(charm_cmd(o, limit, threads), env, scratch / f"{o.name}.log") for o in outs]
    return [finish(*s, o) for s, o in zip(started, outs)]


def rerun(scratch: Path, env: dict) -> dict:
    """The whole starter set (`rolebound run charm`), finished once, then re-run."""
    out = scratch / "runs" / "demo"
    cmd = [str(ROLEBOUND), "run", "charm", "--out", str(out), "-q"]
    if not (out / "metrics.json").exists():
        log("  finishing the demo run once (not timed)")
        first = finish(*start(cmd, env, scratch / "demo-first.log"), out)
        if first["rc"] != 0:
            return first
    before = json.loads((out / "manifest.json").read_text()).get("counts", {}).get("model_calls") or 0
    res = finish(*start(cmd, env, scratch / "demo-rerun.log"), out)
    if res.get("calls") is not None:   # manifest counts add up over a run's invocations: keep the re-run's own
        res["calls"] -= before
    return res


def fmt(r: dict | None) -> str:
    if not r:
        return "-"
    extra = f", {r['threads']} thr" if r.get("threads") else ""
    if r.get("changes") and len(r["changes"]) > 1:
        extra += " (" + "->".join(map(str, r["changes"])) + ")"
    return f"{r['wall']:.1f} s{extra}" + ("" if r.get("rc") == 0 else f" rc={r.get('rc')}")


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--compare-threads", type=int, default=None,
                    help="also run conditions 1-3 with --threads N")
    ap.add_argument("--skip-rerun", action="store_true", help="leave out the demo re-run (condition 4)")
    ap.add_argument("--scratch", type=Path, default=None, help="keep runs and caches here (default: a temp folder)")
    args = ap.parse_args()

    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="rolebound-shared-"))
    scratch.mkdir(parents=True, exist_ok=True)
    env = run_env(scratch)
    from rolebound.models.bundled import converted_dir
    from rolebound.threads import available_cores

    converted_dir()                         # convert the bundled GGUF now if needed, not inside a timing
    date = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    before = (loadavg(), cpu_busy())
    log(f"{date}: {available_cores()} cores, load average {before[0]}, CPUs {before[1]:.0%} busy before")
    if before[1] > 0.15:
        log("WARNING: the machine is not quiet; these figures will not mean much")
    variants = [("auto", None)] + ([(f"threads{args.compare_threads}", args.compare_threads)]
                                   if args.compare_threads else [])
    results: dict[str, dict[str, list]] = {tag: {"alone": [], "busy": [], "pair": []} for tag, _ in variants}
    reruns = []
    try:
        # warm the page cache and the embedder/derived caches once, untimed
        log("warm-up run (not timed)")
        alone(scratch, env, min(args.limit, 30), None, "warmup")
        for rnd in range(1, args.rounds + 1):
            for tag, threads in variants:
                log(f"round {rnd}, {tag}: alone")
                results[tag]["alone"].append(alone(scratch, env, args.limit, threads, tag))
                log(f"  {fmt(results[tag]['alone'][-1])}")
                log(f"round {rnd}, {tag}: with one busy process")
                results[tag]["busy"].append(with_busy(scratch, env, args.limit, threads, tag))
                log(f"  {fmt(results[tag]['busy'][-1])}")
                log(f"round {rnd}, {tag}: two runs together")
                results[tag]["pair"].append(pair(scratch, env, args.limit, threads, tag))
                log("  " + " / ".join(fmt(r) for r in results[tag]["pair"][-1]))
            if not args.skip_rerun:
                log(f"round {rnd}: re-run of a finished demo run")
                reruns.append(rerun(scratch, env))
                log(f"  {fmt(reruns[-1])}, model calls {reruns[-1].get('calls')}")
    finally:
        if args.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)

    after = loadavg()
    print()
    print(f"### Figures, {date} ({available_cores()} cores, load average before {before[0]}, after {after}, "
          f"{args.rounds} round(s), `charm --limit {args.limit} --no-cache --set similarity=false`)")
    print()
    print("| threads | alone | + busy process | ratio (bar 2.2x) | two together (slower) | ratio (bar 2.5x) |")
    print("|---|---|---|---|---|---|")
    for tag, _ in variants:
        r = results[tag]
        a = min(x["wall"] for x in r["alone"])
        b = min(x["wall"] for x in r["busy"])
        p = min(max(x["wall"] for x in two) for two in r["pair"])
        print(f"| {tag} | {a:.1f} s | {b:.1f} s | {b / a:.2f}x {verdict(b / a <= BARS['busy'])} | "
              f"{p:.1f} s | {p / a:.2f}x {verdict(p / a <= BARS['pair'])} |")
    print()
    for tag, _ in variants:
        r = results[tag]
        print(f"- {tag}, every round: alone {', '.join(fmt(x) for x in r['alone'])}; busy "
              f"{', '.join(fmt(x) for x in r['busy'])}; together "
              f"{'; '.join(' / '.join(fmt(x) for x in two) for two in r['pair'])}")
        whys = sorted({x.get("why") or "-" for k in ("alone", "busy") for x in r[k]}
                      | {x.get("why") or "-" for two in r["pair"] for x in two})
        print(f"  - thread choices: {'; '.join(whys)}")
    if reruns:
        best = min(x["wall"] for x in reruns)
        calls = sorted({x.get("calls") for x in reruns}, key=str)
        print(f"- re-run of a finished `rolebound run charm`: {', '.join(fmt(x) for x in reruns)}; "
              f"model calls {calls}; best {best:.1f} s {verdict(best < BARS['rerun_s'] and calls == [0])} "
              f"(bar < {BARS['rerun_s']:.0f} s, 0 calls)")


if __name__ == "__main__":
    main()
