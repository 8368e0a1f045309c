"""The local engines side by side: torch, llamacpp, a bare llama-cpp-python loop, and the openai
backend against llama-cpp-python's OpenAI-compatible server, on the same prompts.

    .venv/bin/python bench/engines.py [--model qwen2.5-coder-1.5b] [--canon 200] [--charm 100]
                                      [--cot 20] [--threads 2] [--only torch,llamacpp,bare,server]
                                      [--workloads canon-gen,charm] [--out F.json] [--merge EARLIER.json]

The prompts are rolebound's own: each workload is first run on `fake:constant` (no model) and the
model calls it records are replayed through every engine, in batches as the runner sends them:
- canon200 (../shared/bench/workload_canon200.jsonl) as `run mcq`, log-likelihood and generation;
- CHARM in the paper's generate protocol (`run charm --strategy independent --protocol paper`);
- multiverse CoT replies (`run multiverse --strategy cot --protocol paper`).
Each engine runs in its own process, so its peak RSS is its own. It prints tokens/s, wall time,
peak RSS, prefill tokens saved and agreement between engines, then each target of issue 21 as
MET or MISSED. Timing on a shared machine is "under load": the load average is printed with it.
Needs `make llamacpp` (and the server extra it installs) for everything but the torch engine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLEBOUND = Path(sys.executable).parent / "rolebound"
SHARED = Path(os.environ.get("ROLEBOUND_SHARED") or next(
    (p / "shared" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared").is_dir()), ROOT.parent / "shared"))
WORKLOAD = SHARED / "bench" / "workload_canon200.jsonl"
CANON_TEMPLATE = ("You are {{name}} from {{source}}. Answer the question as this character.\nQuestion: "
                  "{{question}}\nA. {{options[0]}}\nB. {{options[1]}}\nC. {{options[2]}}\nD. {{options[3]}}\nAnswer:")
TORCH_CHARM_S = 5.7       # issue 21: a CHARM paper-protocol call on Qwen 1.5B, torch engine, today
ENGINES = ("torch", "torch-1", "llamacpp", "llamacpp-1", "bare", "server")


def log(msg: str) -> None:
    print(f"[engines {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


# -- 1. the prompts -------------------------------------------------------------------------------
def capture(scratch: Path, args) -> dict:
    """Run each workload on fake:constant and keep its model calls (prompt, kind, decoding)."""
    tpl = scratch / "canon200.j2"
    tpl.write_text(CANON_TEMPLATE, encoding="utf-8")
    canon = ["mcq", "--data", str(WORKLOAD), "--set", "chat=false", "--set", f"template_file={tpl}",
             "--limit", str(args.canon)]
    runs = {"canon-ll": canon + ["--scoring", "logprob"],
            "canon-gen": canon + ["--scoring", "generate", "--set", "max_tokens=32", "--set", "stop_newline=true"],
            "charm": ["charm", "--strategy", "independent", "--scoring", "generate", "--protocol", "paper",
                      "--limit", str(args.charm)],
            "cot": ["multiverse", "--strategy", "cot", "--protocol", "paper", "--judge", "fake:constant",
                    "--limit", str(args.cot)]}
    out = {}
    for name, cmd in runs.items():
        folder = scratch / f"capture-{name}"
        res = subprocess.run([str(ROLEBOUND), "run", *cmd, "--model", "fake:constant", "--out", str(folder),
                              "--overwrite", "--no-cache", "-q"], capture_output=True, text=True, env=run_env(scratch))
        if res.returncode not in (0, 1):
            raise SystemExit(f"capturing {name} failed: {res.stderr.strip()[-500:]}")
        man = json.loads((folder / "manifest.json").read_text())
        recs = [json.loads(x) for x in (folder / "records.jsonl").read_text().splitlines()]
        calls = [{"prompt": r["prompt"], "kind": r["kind"], "continuations": r.get("continuations"),
                  "id": r["call_id"]} for r in recs if r.get("role", "model") == "model"]
        dec = man["decoding"]
        if name == "canon-gen":
            dec = {**dec, "max_tokens": 32, "stop": ["\n"]}
        out[name] = {"calls": calls, "decoding": dec}
        log(f"captured {name}: {len(calls)} calls, decoding {dec}")
    return out


def run_env(scratch: Path) -> dict:
    from rolebound.store import model_dir

    env = dict(os.environ, ROLEBOUND_MODEL_DIR=str(model_dir()), ROLEBOUND_CACHE_DIR=str(scratch / "cache"),
               HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    return env


# -- 2. one engine, in a child process ------------------------------------------------------------
def requests_of(work: dict):
    from rolebound.models.base import GenRequest, ScoreRequest
    from rolebound.records import Decoding, Message

    def msgs(p):
        return [Message(**m) for m in p] if isinstance(p, list) else None

    dec = Decoding(**{k: v for k, v in work["decoding"].items() if k in Decoding.model_fields})
    reqs = []
    for c in work["calls"]:
        m, text = msgs(c["prompt"]), (c["prompt"] if isinstance(c["prompt"], str) else None)
        if c["kind"] == "score":
            reqs.append(ScoreRequest(messages=m, prompt=text, continuations=c["continuations"]))
        else:
            reqs.append(GenRequest(messages=m, prompt=text, max_tokens=dec.max_tokens, stop=dec.stop))
    return reqs, dec


def make_engine(kind: str, model: str, threads: int):
    from rolebound.models import bundled, install

    if kind in ("torch", "torch-1"):
        from rolebound.models.local import TransformersEngine

        folder = install.require(model) if model in install.PACKS else bundled.converted_dir()
        return TransformersEngine(folder, threads=threads, max_batch=1 if kind == "torch-1" else None)
    from rolebound.models.llamacpp import LlamaCppEngine

    return LlamaCppEngine(bundled.bundled_gguf(model), threads=threads,
                          max_batch=1 if kind == "llamacpp-1" else 8,
                          prefix_min=0 if kind == "llamacpp-1" else 32)


def child(kind: str, model: str, works: dict, threads: int, batch: int) -> dict:
    """Replay every workload through one engine; returns timings, outputs and peak RSS."""
    import resource

    t0 = time.perf_counter()
    if kind == "bare":
        runner = BareLoop(model, threads)
    elif kind == "server":
        runner = ServerRun(model, threads)
    else:
        runner = make_engine(kind, model, threads)
    load_s = time.perf_counter() - t0
    out = {"engine": kind, "load_s": round(load_s, 2), "work": {}}
    for name, work in works.items():
        reqs, dec = requests_of(work)
        if kind == "bare" and name == "canon-ll":
            continue                       # the bare loop generates only (llama_cpp.Llama scores one token at a time)
        if kind == "torch-1" and name != "canon-gen":
            continue                       # only the batching target reads it (CoT one at a time on torch: hours)
        saved0 = dict(getattr(runner, "prefill", {}) or {})
        t = time.perf_counter()
        results = []
        for i in range(0, len(reqs), batch):      # what the runner hands an engine at a time
            part = reqs[i:i + batch]
            results += runner.score(part) if name == "canon-ll" else runner.generate(part, dec)
        wall = time.perf_counter() - t
        row = {"wall_s": round(wall, 2), "calls": len(reqs), "errors": sum(1 for r in results if r.error)}
        if name == "canon-ll":
            row["logprobs"] = [r.logprobs for r in results]
        else:
            row["texts"] = [r.text for r in results]
            row["tokens"] = sum(r.completion_tokens or 0 for r in results)
        prefill = getattr(runner, "prefill", None)
        if prefill:
            row["prefill_saved"] = prefill["saved"] - saved0.get("saved", 0)
        out["work"][name] = row
    if hasattr(runner, "close"):
        runner.close()
    out["peak_rss_mb"] = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out


class BareLoop:
    """llama_cpp.Llama as its README shows it: one prompt at a time, create_completion, greedy."""

    def __init__(self, model: str, threads: int):
        import llama_cpp

        from rolebound.models import bundled
        from rolebound.models.llamacpp import LlamaCppEngine

        path = str(bundled.bundled_gguf(model))
        self.llm = llama_cpp.Llama(path, n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
        self.fmt = LlamaCppEngine(path, threads=1, n_ctx=256, max_batch=1)     # only to render the same text

    def generate(self, reqs, dec):
        from rolebound.models.base import GenResult

        out = []
        for r in reqs:
            text = self.fmt.render(r.messages) if r.messages else r.prompt
            res = self.llm.create_completion(text, max_tokens=r.max_tokens or dec.max_tokens,
                                             temperature=dec.temperature, top_p=dec.top_p, seed=dec.seed,
                                             stop=r.stop or None)
            ch = res["choices"][0]
            out.append(GenResult(text=ch["text"], completion_tokens=res["usage"]["completion_tokens"]))
        return out

    def close(self):
        self.fmt.close()


class ServerRun:
    """The openai backend against llama-cpp-python's server (chat and completions endpoints)."""

    def __init__(self, model: str, threads: int):
        import asyncio

        from rolebound.models import bundled
        from rolebound.models.openai_api import OpenAIBackend

        from rolebound.testing.llama_server import LlamaServer

        os.environ.setdefault("OPENAI_API_KEY", "sk-local")
        self.server = LlamaServer(bundled.bundled_gguf(model), alias="bench", threads=threads).start()
        self.backend = OpenAIBackend("bench", base_url=self.server.url, concurrency=8)
        self.loop = asyncio.new_event_loop()

    def generate(self, reqs, dec):
        return self.loop.run_until_complete(self.backend.generate(reqs, dec))

    def score(self, reqs):
        return self.loop.run_until_complete(self.backend.score(reqs))

    def close(self):
        self.loop.run_until_complete(self.backend.close())
        self.server.stop()


# -- 3. the table and the targets -----------------------------------------------------------------
def agreement(a: dict, b: dict) -> dict:
    """Argmax agreement of log-likelihoods, and near-ties (best two within 0.1 nats in b)."""
    same = ties = n = 0
    for x, y in zip(a["logprobs"], b["logprobs"]):
        if not x or not y:
            continue
        n += 1
        ax, ay = max(range(len(x)), key=x.__getitem__), max(range(len(y)), key=y.__getitem__)
        top = sorted(y, reverse=True)
        if ax == ay:
            same += 1
        elif top[0] - top[1] < 0.1:
            ties += 1
    return {"n": n, "same": same, "near_ties": ties, "other": n - same - ties}


def report(results: dict, args) -> list[tuple[str, bool | None, str]]:
    res = {r["engine"]: r for r in results}
    w = lambda e, k: res.get(e, {}).get("work", {}).get(k)       # noqa: E731
    print(f"\n## engines on {args.model}, {args.threads} threads, load average {loadavg()} "
          f"({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC)")
    print("| engine | load s | peak RSS MB | " + " | ".join(f"{k} wall s (tok/s)" for k in
                                                             ("canon-ll", "canon-gen", "charm", "cot")) + " | prefill saved |")
    print("|---" * 8 + "|")
    for e, r in res.items():
        cells = []
        for k in ("canon-ll", "canon-gen", "charm", "cot"):
            x = w(e, k)
            cells.append("-" if x is None else f"{x['wall_s']}" + (f" ({x['tokens'] / x['wall_s']:.1f})"
                                                                    if x.get("tokens") else ""))
        saved = sum((x or {}).get("prefill_saved", 0) for x in r["work"].values())
        print(f"| {e} | {r['load_s']} | {r['peak_rss_mb']} | " + " | ".join(cells) + f" | {saved} |")
    if w("torch", "canon-ll") and w("llamacpp", "canon-ll"):
        print(f"\ncanon200 log-likelihood, llamacpp vs torch: {agreement(w('llamacpp', 'canon-ll'), w('torch', 'canon-ll'))}")
    for a, b in (("llamacpp", "torch"), ("llamacpp", "llamacpp-1"), ("torch", "torch-1"), ("llamacpp", "bare"),
                 ("server", "llamacpp")):
        for k in ("canon-gen", "charm", "cot"):
            if w(a, k) and w(b, k):
                same = sum(x == y for x, y in zip(w(a, k)["texts"], w(b, k)["texts"]))
                print(f"{k}: {a} and {b} give the same text on {same}/{len(w(a, k)['texts'])}")
    return targets(res, w)


def tps(x) -> float | None:
    return x["tokens"] / x["wall_s"] if x and x.get("tokens") and x["wall_s"] else None


def targets(res, w) -> list[tuple[str, bool | None, str]]:
    out = []

    def add(name, a, b, bar, fmt="{:.2f}"):
        ok = None if a is None or b is None else (a / b >= bar if bar > 0 else a / b <= -bar)
        out.append((name, ok, "not measured" if ok is None else f"{fmt.format(a / b)} (bar {abs(bar)})"))

    single, bare = tps(w("llamacpp-1", "canon-gen")), tps(w("bare", "canon-gen"))
    add("llamacpp engine single stream >= 0.95 x bare loop (canon-gen tok/s)", single, bare, 0.95)
    add("batched 8 >= 2.5 x single stream (llamacpp, canon-gen tok/s)", tps(w("llamacpp", "canon-gen")), single, 2.5)
    add("batched >= 2.5 x single stream (torch, canon-gen tok/s)", tps(w("torch", "canon-gen")),
        tps(w("torch-1", "canon-gen")), 2.5)
    charm = w("llamacpp", "charm")
    per_call = charm["wall_s"] / charm["calls"] if charm else None
    add(f"CHARM paper protocol per call <= half of {TORCH_CHARM_S} s (llamacpp)", per_call, TORCH_CHARM_S, -0.5)
    cl, ct = w("llamacpp", "cot"), w("torch", "cot")
    add("multiverse CoT per reply <= 1/3 of torch's", cl and cl["wall_s"], ct and ct["wall_s"], -1 / 3)
    rl, rt = res.get("llamacpp", {}).get("peak_rss_mb"), res.get("torch", {}).get("peak_rss_mb")
    add("llamacpp peak RSS <= half of torch's", rl, rt, -0.5)
    print("\n## targets (issue 21)")
    for name, ok, text in out:
        print(f"- {'MET' if ok else 'MISSED' if ok is False else 'NOT MEASURED'}: {name}: {text}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b", help="a bundled model (its GGUF and converted folder)")
    ap.add_argument("--canon", type=int, default=200)
    ap.add_argument("--charm", type=int, default=100)
    ap.add_argument("--cot", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16, help="requests handed to an engine at a time")
    ap.add_argument("--only", default=",".join(ENGINES), help="comma-separated subset of " + ", ".join(ENGINES))
    ap.add_argument("--out", type=Path, help="also write the raw results here (JSON)")
    ap.add_argument("--workloads", default="canon-ll,canon-gen,charm,cot",
                    help="comma-separated subset of canon-ll, canon-gen, charm, cot")
    ap.add_argument("--merge", type=Path, action="append", default=[],
                    help="results (--out JSON) of an earlier run on the same prompts (same --model, "
                         "--canon, --charm, --cot): its engines join the table and the targets")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--works", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        works = json.loads(args.works.read_text())
        print("RESULT " + json.dumps(child(args.child, args.model, works, args.threads, args.batch)))
        return
    log(f"load average before: {loadavg()} (figures taken while other work runs are 'under load')")
    with tempfile.TemporaryDirectory(prefix="rolebound-engines-") as tmp:
        scratch = Path(tmp)
        works_file = scratch / "works.json"
        wanted = {w.strip() for w in args.workloads.split(",") if w.strip()}
        works = {k: v for k, v in capture(scratch, args).items() if k in wanted}
        works_file.write_text(json.dumps(works))
        results = []
        for earlier in args.merge:            # engines measured before, on the same captured prompts
            for r in json.loads(earlier.read_text()):
                if r["engine"] not in args.only.split(","):
                    results.append(r)
                    log(f"{r['engine']}: from {earlier}")
        for kind in [k.strip() for k in args.only.split(",") if k.strip()]:
            log(f"{kind}: running (load average {loadavg()})")
            proc = subprocess.run([sys.executable, __file__, "--child", kind, "--model", args.model,
                                   "--works", str(works_file), "--threads", str(args.threads),
                                   "--batch", str(args.batch)], capture_output=True, text=True, env=run_env(scratch))
            line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                log(f"{kind} failed: {proc.stderr.strip()[-800:]}")
                continue
            results.append(json.loads(line[7:]))
        if args.out:
            args.out.write_text(json.dumps(results))
        report(results, args)
    log(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
