"""rolebound vs lm-evaluation-harness vs inspect_ai vs a plain transformers loop, side by side.

    .venv/bin/python bench/peers.py [--scratch DIR] [--rounds N]

Same machine, same model folder (rolebound's converted bf16 copy of the bundled GGUF), same 200
MCQs and the same prompt text (../shared/bench/workload_canon200.jsonl). Each round runs, one
after the other: plain loop LL, rolebound LL, lm-eval LL, plain loop gen, rolebound gen, lm-eval
gen, inspect gen. The table keeps the minimum over rounds (the machine is noisy) and prints the
target ratios of issue 7 with PASS/MISS, and which answers differ from the plain loop's.

The peers' own scripts live beside the repo in ../shared/bench/peer (timing wrappers, task files,
the reference loop); this script sets up their scratch venvs, renders their task files with this
machine's paths and calls them unchanged.
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import glob
import importlib.metadata as md
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "bench"
PEER = SHARED / "peer"
WORKLOAD = SHARED / "workload_canon200.jsonl"
TORCH_PIN = "torch==2.13.0"
LMEVAL = "lm-eval[hf]==0.4.13"
INSPECT = "inspect-ai==0.3.285"
OFFLINE = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
LETTERS = "ABCD"

# (tag, harness, mode) in the order of one round; mode "ll" = log-likelihood, "gen" = generation
CONFIGS = [
    ("ref-ll", "ref", "ll"), ("rolebound-ll", "rolebound", "ll"), ("lmeval-ll", "lmeval", "ll"),
    ("ref-gen", "ref", "gen"), ("rolebound-gen", "rolebound", "gen"), ("lmeval-gen", "lmeval", "gen"),
    ("inspect-gen", "inspect", "gen"),
]
LABELS = {
    "ref-ll": "plain loop: log-likelihood, length-sorted, batch 16",
    "rolebound-ll": "rolebound: `run mcq --scoring logprob`",
    "lmeval-ll": "lm-eval: multiple_choice, batch 16",
    "ref-gen": "plain loop: greedy 32, stop \\n, length-sorted, batch 16",
    "rolebound-gen": "rolebound: `run mcq --scoring generate`",
    "lmeval-gen": "lm-eval: generate_until, batch 16",
    "inspect-gen": "inspect_ai: generate(), max-connections 16",
}


def log(msg: str) -> None:
    print(f"[peers {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def sh(cmd: list, **kw) -> None:
    log("$ " + " ".join(str(c) for c in cmd))
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cpu_busy(seconds: float = 3.0) -> float:
    """Share of all CPUs busy over a short window (between our runs: other people's work)."""
    def snap():
        vals = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return vals[3] + vals[4], sum(vals)

    try:
        i0, t0 = snap()
        time.sleep(seconds)
        i1, t1 = snap()
    except (OSError, ValueError, IndexError):
        return 0.0
    return 1 - (i1 - i0) / max(1, t1 - t0)


def wait_quiet(limit_s: float, threshold: float = 0.15) -> float:
    """On a shared machine, start a measurement only when the others leave the CPUs idle."""
    start = time.time()
    while True:
        busy = cpu_busy()
        if busy <= threshold or time.time() - start >= limit_s:
            return busy
        log(f"  CPUs {busy:.0%} busy with other work; waiting (up to {limit_s:.0f} s)")
        time.sleep(10)


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


# -- set-up -----------------------------------------------------------------------------------
def ensure_venv(path: Path, packages: list[str]) -> Path:
    """A scratch venv with torch pinned first (unpinned, pip pulls GBs of CUDA wheels)."""
    spec = json.dumps([TORCH_PIN] + packages)
    marker = path / ".peers-installed"
    if marker.exists() and marker.read_text() == spec:
        return path / "bin" / "python"
    log(f"creating {path} ({', '.join(packages)})")
    sh([sys.executable, "-m", "venv", "--clear", path])
    pip = path / "bin" / "pip"
    sh([pip, "install", "-q", TORCH_PIN])
    sh([pip, "install", "-q", *packages])
    marker.write_text(spec)
    return path / "bin" / "python"


def same_stack() -> list[str]:
    """Pin the peers to the transformers stack rolebound runs on, so only the harness differs."""
    return [f"{p}=={md.version(p)}" for p in ("transformers", "tokenizers", "accelerate")]


def setup(scratch: Path) -> dict:
    from rolebound.models.bundled import converted_dir

    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "out").mkdir(exist_ok=True)
    model = converted_dir()            # converts the bundled GGUF on first use (about 20 s)
    link = scratch / "smollm2-hf"      # the name the shared reference loop expects
    if link.is_symlink() or link.exists():
        if not (link.is_symlink() and link.resolve() == model.resolve()):
            shutil.rmtree(link) if link.is_dir() and not link.is_symlink() else link.unlink()
    if not link.exists():
        link.symlink_to(model, target_is_directory=True)
    stack = same_stack()
    py_lmeval = ensure_venv(scratch / "venv-lmeval", [LMEVAL, *stack])
    py_inspect = ensure_venv(scratch / "venv-inspect", [INSPECT, *stack])
    # lm-eval task files and the inspect task + model config, with this machine's paths
    tasks = scratch / "lmeval-tasks"
    tasks.mkdir(exist_ok=True)
    for name in ("canon200_mc", "canon200_gen"):
        text = (PEER / f"{name}.yaml").read_text(encoding="utf-8").replace("@WORKLOAD@", str(WORKLOAD))
        (tasks / f"{name}.yaml").write_text(text, encoding="utf-8")
    task = scratch / "task"
    task.mkdir(exist_ok=True)
    shutil.copy(PEER / "canon200_inspect.py", task / "canon200_inspect.py")
    cfg = (PEER / "inspect_model_raw.yaml").read_text(encoding="utf-8").replace("@MODEL@", str(link))
    (task / "model.yaml").write_text(cfg, encoding="utf-8")
    # rolebound's template: lm-eval's doc_to_text verbatim (no trailing newline: the suite keeps it)
    import yaml

    doc_to_text = yaml.safe_load((tasks / "canon200_mc.yaml").read_text(encoding="utf-8"))["doc_to_text"]
    template = scratch / "canon200.j2"
    template.write_text(doc_to_text, encoding="utf-8")
    return {"model": link, "lmeval": py_lmeval, "inspect": py_inspect, "tasks": tasks, "task": task,
            "template": template, "doc_to_text": doc_to_text}


# -- one run each -----------------------------------------------------------------------------
def timed(cmd: list, log_path: Path, cwd: Path | None = None, env: dict | None = None) -> tuple[float, float, int]:
    """Run a command with its output to a file; returns (wall s, end epoch, exit code)."""
    full_env = {**os.environ, **OFFLINE, **(env or {})}
    with open(log_path, "w", encoding="utf-8") as f:
        s = time.perf_counter()
        rc = subprocess.run([str(c) for c in cmd], stdout=f, stderr=subprocess.STDOUT, cwd=cwd,
                            env=full_env).returncode
        wall = time.perf_counter() - s
    end = time.time()
    if rc != 0:
        tail = "".join(open(log_path, encoding="utf-8", errors="replace").readlines()[-15:])
        log(f"FAILED (exit {rc}): {' '.join(map(str, cmd))}\n{tail}")
    return wall, end, rc


def marks(log_path: Path) -> dict:
    """LOADTIME / ENDTIME / RESULT json lines printed by the shared wrappers and reference loop."""
    out = {}
    for line in open(log_path, encoding="utf-8", errors="replace"):
        for key in ("LOADTIME", "ENDTIME", "RESULT"):
            if line.startswith(key + " "):
                out[key] = json.loads(line[len(key) + 1:])
    return out


def run_ref(ctx: dict, mode: str, tag: str) -> dict:
    args = ["ll", "16", "--sort"] if mode == "ll" else ["gen", "16", "--sort", "--stop-nl"]
    logp = ctx["out"] / f"{tag}.log"
    wall, _, rc = timed([sys.executable, PEER / "ref_loop.py", *args], logp, env={"SCRATCH": str(ctx["scratch"])})
    res = {"wall": wall, "rc": rc}
    if rc == 0:
        r = marks(logp)["RESULT"]
        res.update(load=r["load_s"], post=r["eval_s"])
        name = "ref_ll_sorted_b16_preds.jsonl" if mode == "ll" else "ref_gen_sorted_stopnl_b16_preds.jsonl"
        rows = [json.loads(x) for x in open(ctx["scratch"] / "out" / name, encoding="utf-8")]
        res["preds"] = {x["id"]: x["pred"] for x in rows}
        res["extra"] = {x["id"]: x["extra"] for x in rows}
    return res


def run_rolebound(ctx: dict, mode: str, tag: str) -> dict:
    out = ctx["out"] / tag
    shutil.rmtree(out, ignore_errors=True)
    cmd = [Path(sys.executable).parent / "rolebound", "run", "mcq", "--data", WORKLOAD,
           "--set", "chat=false", "--set", f"template_file={ctx['template']}", "--no-cache", "-q",
           "--out", out]
    cmd += ["--scoring", "logprob"] if mode == "ll" else \
        ["--scoring", "generate", "--set", "max_tokens=32", "--set", "stop_newline=true"]
    wall, end, rc = timed(cmd, ctx["out"] / f"{tag}.log")
    res = {"wall": wall, "rc": rc}
    if rc == 0:
        man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
        res.update(load=man["model_info"]["load_s"], post=end - man["timing"]["loaded"])
        recs = [json.loads(x) for x in open(out / "records.jsonl", encoding="utf-8")]
        res["preds"] = {r["item_id"]: (r["parsed"] if r["parsed"] in LETTERS else None) for r in recs}
        res["extra"] = {r["item_id"]: r.get("logprobs") if mode == "ll" else r["response"] for r in recs}
        res["prompts"] = {r["item_id"]: r["prompt"] for r in recs}
    return res


def run_lmeval(ctx: dict, mode: str, tag: str) -> dict:
    out = ctx["out"] / tag
    shutil.rmtree(out, ignore_errors=True)
    task = "canon200_mc" if mode == "ll" else "canon200_gen"
    logp = ctx["out"] / f"{tag}.log"
    cmd = [ctx["lmeval"], PEER / "lmeval_timed.py", "--model", "hf", "--model_args",
           f"pretrained={ctx['model']},dtype=bfloat16", "--include_path", ctx["tasks"], "--tasks", task,
           "--batch_size", "16", "--output_path", out, "--log_samples"]
    wall, _, rc = timed(cmd, logp, cwd=ctx["scratch"])
    res = {"wall": wall, "rc": rc}
    if rc == 0:
        m = marks(logp)
        res.update(load=m["LOADTIME"]["load_s"],
                   post=m["ENDTIME"]["since_start_s"] - m["LOADTIME"]["since_start_s"])
        files = glob.glob(str(out / "**" / f"samples_{task}_*.jsonl"), recursive=True)
        preds, extra, prompts = {}, {}, {}
        for line in open(sorted(files)[-1], encoding="utf-8"):
            s = json.loads(line)
            iid = s["doc"]["id"]
            if mode == "ll":
                lls = [float(x[0]) for x in s["filtered_resps"]]
                preds[iid] = LETTERS[max(range(4), key=lambda i: lls[i])]
                extra[iid] = lls
            else:
                got = s["filtered_resps"][0]
                preds[iid] = got if got in LETTERS else None
                extra[iid] = s["resps"][0][0]
            prompts[iid] = s["arguments"]["gen_args_0"]["arg_0"]
        res.update(preds=preds, extra=extra, prompts=prompts)
    return res


def run_inspect(ctx: dict, mode: str, tag: str) -> dict:
    out = ctx["out"] / tag
    shutil.rmtree(out, ignore_errors=True)
    logp = ctx["out"] / f"{tag}.log"
    # relative task path: inspect 0.3.285 on Python 3.11 rejects an absolute one
    cmd = [ctx["inspect"], PEER / "inspect_timed.py", "eval", "canon200_inspect.py", "--model", "hf/local",
           "--model-config", ctx["task"] / "model.yaml", "--max-connections", "16", "--max-tokens", "32",
           "--log-dir", out, "--log-format", "json", "--display", "plain"]
    wall, _, rc = timed(cmd, logp, cwd=ctx["task"], env={"CANON200_WORKLOAD": str(WORKLOAD)})
    res = {"wall": wall, "rc": rc}
    if rc == 0:
        m = marks(logp)
        res.update(load=m["LOADTIME"]["load_s"],
                   post=m["ENDTIME"]["since_start_s"] - m["LOADTIME"]["since_start_s"])
        data = json.loads(Path(sorted(glob.glob(str(out / "*.json")))[-1]).read_text(encoding="utf-8"))
        preds, extra = {}, {}
        for s in data["samples"]:
            text = s["output"]["completion"]
            hit = re.search(r"\b([ABCD])\b", text)
            preds[s["id"]], extra[s["id"]] = (hit.group(1) if hit else None), text
        res.update(preds=preds, extra=extra)
    return res


RUNNERS = {"ref": run_ref, "rolebound": run_rolebound, "lmeval": run_lmeval, "inspect": run_inspect}


# -- checks and the table ---------------------------------------------------------------------
def plain_loop_prompts() -> dict[str, str]:
    """The prompt text exactly as the shared reference loop builds it (its PROMPT constant)."""
    tree = ast.parse((PEER / "ref_loop.py").read_text(encoding="utf-8"))
    prompt = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                  and any(getattr(t, "id", None) == "PROMPT" for t in n.targets))
    out = {}
    for line in open(WORKLOAD, encoding="utf-8"):
        it = json.loads(line)
        o = it["options"]
        out[it["id"]] = prompt.format(name=it["name"], source=it["source"], question=it["question"],
                                      o1=o[0], o2=o[1], o3=o[2], o4=o[3])
    return out


def prompt_check(results: dict) -> list[str]:
    ref = plain_loop_prompts()
    lines = []
    for tag in ("rolebound-ll", "rolebound-gen", "lmeval-ll", "lmeval-gen"):
        prompts = next((r["prompts"] for r in results.get(tag, []) if r.get("prompts")), None)
        if prompts is None:
            continue
        same = sum(prompts.get(i) == p for i, p in ref.items())
        lines.append(f"{tag}: {same}/{len(ref)} prompts byte-identical to the plain loop's")
    return lines


def agreement(a: dict, b: dict) -> tuple[int, list[str]]:
    diff = sorted(i for i in b if a.get(i) != b[i])
    return len(b) - len(diff), diff


def summarise(results: dict) -> dict:
    best = {}
    for tag, runs in results.items():
        ok = [r for r in runs if r["rc"] == 0]
        if not ok:
            best[tag] = None
            continue
        b = min(ok, key=lambda r: r["wall"])
        best[tag] = {**b, "walls": [round(r["wall"], 2) for r in runs],
                     "post_min": min(r["post"] for r in ok), "load_min": min(r["load"] for r in ok)}
    return best


def acc(preds: dict, gold: dict) -> float:
    return sum(preds.get(i) == g for i, g in gold.items()) / len(gold)


def table(best: dict, gold: dict) -> list[str]:
    lines = ["| configuration | wall s (min; all rounds) | load s | post-load s | items/s after load | "
             "items/s e2e | acc | same answer as plain loop |", "|---|---|---|---|---|---|---|---|"]
    for tag, _, mode in CONFIGS:
        b = best.get(tag)
        if b is None:
            lines.append(f"| {LABELS[tag]} | failed | | | | | | |")
            continue
        ref = best.get(f"ref-{mode}")
        agree = "-" if tag.startswith("ref") or ref is None else f"{agreement(ref['preds'], b['preds'])[0]}/{len(gold)}"
        walls = ", ".join(f"{w:.1f}" for w in b["walls"])
        lines.append(f"| {LABELS[tag]} | **{b['wall']:.1f}** ({walls}) | {b['load_min']:.2f} | {b['post_min']:.1f} | "
                     f"{len(gold) / b['post_min']:.2f} | {len(gold) / b['wall']:.2f} | {acc(b['preds'], gold):.3f} | {agree} |")
    return lines


def targets(best: dict, gold: dict) -> list[str]:
    def ratio(a, b, key_a="wall", key_b="wall"):
        if not best.get(a) or not best.get(b):
            return None
        va = best[a]["post_min"] if key_a == "post" else best[a]["wall"]
        vb = best[b]["post_min"] if key_b == "post" else best[b]["wall"]
        return va / vb

    rows = [("log-likelihood: rolebound wall / lm-eval wall", ratio("rolebound-ll", "lmeval-ll"), 0.70),
            ("log-likelihood: rolebound post-load / plain loop post-load",
             ratio("rolebound-ll", "ref-ll", "post", "post"), 1.10),
            ("generation: rolebound wall / lm-eval wall", ratio("rolebound-gen", "lmeval-gen"), 0.85),
            ("generation: rolebound wall / inspect_ai wall", ratio("rolebound-gen", "inspect-gen"), 0.60)]
    lines = ["| target | ratio | bar | |", "|---|---|---|---|"]
    for name, r, bar in rows:
        lines.append(f"| {name} | {'-' if r is None else f'{r:.2f}'} | <= {bar:.2f} | "
                     f"{'-' if r is None else ('PASS' if r <= bar else 'MISS')} |")
    for mode in ("ll", "gen"):
        a, b = best.get(f"ref-{mode}"), best.get(f"rolebound-{mode}")
        if a and b:
            n, diff = agreement(a["preds"], b["preds"])
            shown = ", ".join(f"{i} (plain {a['preds'][i]!s} vs rolebound {b['preds'].get(i)!s})" for i in diff[:10])
            lines.append(f"| {mode}: same answer as the plain loop | {n}/{len(gold)} | >= 198 | "
                         f"{'PASS' if n >= 198 else 'MISS'} |" + (f" differ: {shown}" if diff else ""))
    return lines


def main() -> int:
    from rolebound.store import cache_dir

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scratch", type=Path, default=cache_dir() / "peers",
                    help="venvs, task files and outputs (default: <rolebound cache>/peers)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds over all configurations (min is kept)")
    ap.add_argument("--only", default="", help="comma-separated tags to run (default: all); e.g. rolebound-ll,ref-ll")
    ap.add_argument("--setup-only", action="store_true", help="create the venvs and task files, run nothing")
    ap.add_argument("--wait-quiet", type=float, default=0, metavar="S",
                    help="before each run wait up to S seconds for the CPUs to be idle (shared machines)")
    args = ap.parse_args()
    if not WORKLOAD.exists():
        print(f"workload not found: {WORKLOAD} (bench/peers.py expects ../shared beside the repo)", file=sys.stderr)
        return 2
    scratch = args.scratch.resolve()
    ctx = setup(scratch)
    ctx.update(scratch=scratch, out=scratch / "out")
    if args.setup_only:
        return 0
    chosen = [c for c in CONFIGS if not args.only or c[0] in args.only.split(",")]
    gold = {json.loads(x)["id"]: json.loads(x)["answer"] for x in open(WORKLOAD, encoding="utf-8")}
    started = dt.datetime.now().astimezone()
    load_before = loadavg()
    results: dict[str, list] = {}
    for rnd in range(1, args.rounds + 1):
        for tag, harness, mode in chosen:
            busy = wait_quiet(args.wait_quiet) if args.wait_quiet else None
            log(f"round {rnd}: {tag} (load {loadavg()}" + (f", CPUs {busy:.0%} busy before" if busy is not None else "") + ")")
            res = RUNNERS[harness](ctx, mode, tag)
            res["load_avg"], res["busy_before"] = loadavg(), busy
            log(f"  wall {res['wall']:.2f} s" + (f", post-load {res['post']:.2f} s" if "post" in res else ""))
            results.setdefault(tag, []).append(res)
    best = summarise(results)
    lines = [f"## Peers run {started:%Y-%m-%d %H:%M %Z}: {args.rounds} round(s), 200 items, "
             f"{os.cpu_count()} CPUs ({cpu_name()}), load average before {load_before}, after {loadavg()}", ""]
    lines += table(best, gold) + [""] + targets(best, gold) + [""] + prompt_check(results)
    text = "\n".join(lines)
    print("\n" + text)
    stamp = started.strftime("%Y%m%d-%H%M%S")
    (ctx["out"] / f"peers-{stamp}.md").write_text(text + "\n", encoding="utf-8")
    dump = {tag: [{k: v for k, v in r.items() if k != "prompts"} for r in runs] for tag, runs in results.items()}
    (ctx["out"] / f"peers-{stamp}.json").write_text(json.dumps(dump, indent=1), encoding="utf-8")
    log(f"written {ctx['out'] / f'peers-{stamp}.md'} and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
