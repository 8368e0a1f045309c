"""Two builds of llama-cpp-python side by side: the portable x86-64-v3 wheel (`make llamacpp`) and the
AVX-512 one (`LLAMACPP_VARIANT=avx512 scripts/llamacpp_wheel.sh`, for CPUs that have it, never AMX).

    python bench/llamacpp_builds.py [--gguf PATH] [--rounds 3] [--threads 2]

Each wheel is unpacked into a scratch folder and timed in its own process, the two taking turns
round by round (so a change in the machine's load hits both): a 501-token prompt prefilled, then
128 tokens decoded greedily, on the Qwen2.5-Coder-1.5B GGUF. Prints tokens/s per build (median of
the rounds), the ratio avx512 / x86-64-v3, and whether both builds decode the same tokens.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEELS = Path.home() / ".cache" / "rolebound" / "wheels"
GGUF = Path.home() / ".cache" / "rolebound" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import llama_cpp
gguf, threads = sys.argv[2], int(sys.argv[3])
llm = llama_cpp.Llama(gguf, n_ctx=1024, n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=False)
words = ("the old lighthouse keeper wrote each evening about ships storms and the slow turn of seasons "
         "while gulls circled the rocks below ").split()
toks = llm.tokenize(" ".join(words * 40).encode())[:501]
llm.reset()
t0 = time.perf_counter(); llm.eval(toks); t1 = time.perf_counter()
out = []
for _ in range(128):
    tok = llm.sample(temp=0.0)
    out.append(int(tok)); llm.eval([tok])
t2 = time.perf_counter()
print(json.dumps({"prefill": len(toks) / (t1 - t0), "decode": 128 / (t2 - t1), "tokens": out}))
"""


def wheel(variant: str) -> Path:
    found = sorted(WHEELS.glob(f"llama_cpp_python-*-{variant}-*/llama_cpp_python-*.whl"))
    if not found:
        sys.exit(f"no {variant} wheel under {WHEELS}: build it with "
                 + ("`make llamacpp`" if variant == "x86-64-v3" else "`LLAMACPP_VARIANT=avx512 scripts/llamacpp_wheel.sh`"))
    return found[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", type=Path, default=GGUF)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    if not args.gguf.exists():
        sys.exit(f"{args.gguf} not found: `rolebound models install qwen2.5-coder-1.5b`")
    variants = ["x86-64-v3", "avx512"]
    with tempfile.TemporaryDirectory() as tmp:
        dirs = {}
        for v in variants:
            dirs[v] = Path(tmp) / v
            zipfile.ZipFile(wheel(v)).extractall(dirs[v])
        runs: dict[str, list[dict]] = {v: [] for v in variants}
        for _ in range(args.rounds):
            for v in variants:
                res = subprocess.run([sys.executable, "-c", CHILD, str(dirs[v]), str(args.gguf), str(args.threads)],
                                     capture_output=True, text=True, check=True)
                runs[v].append(json.loads(res.stdout.strip().splitlines()[-1]))
    med = {v: {k: statistics.median(r[k] for r in runs[v]) for k in ("prefill", "decode")} for v in variants}
    print(f"{args.gguf.name}, {args.threads} threads, {args.rounds} rounds (median tokens/s)")
    for v in variants:
        print(f"  {v:10s} prefill {med[v]['prefill']:7.1f}   decode {med[v]['decode']:6.2f}")
    for k in ("prefill", "decode"):
        print(f"  avx512 / x86-64-v3 {k}: {med['avx512'][k] / med['x86-64-v3'][k]:.2f}")
    same = all(a["tokens"] == b["tokens"] for a, b in zip(runs["x86-64-v3"], runs["avx512"]))
    print(f"  same 128 greedy tokens in every round: {same}")


if __name__ == "__main__":
    main()
