"""The llamacpp engine at one sequence against llama-cpp-python's own `Llama` loop, and which of the
engine's context settings explains the gap (issue 21: single stream >= 0.95 of the bare loop).

    python bench/llamacpp_single.py [--gguf PATH] [--rounds 3] [--tokens 48] [--prompts 4]

One process, every variant loaded side by side (the GGUF is mmapped once), taking turns prompt by
prompt in each round so that a change in the machine's load hits all of them. Each call is timed
twice: max_tokens 1 (prefill and one token) and max_tokens 1 + --tokens; the difference is the
decode. The bare loop is `Llama.create_completion` with `reset()` before each call (no prompt
cache), as llama-cpp-python's README uses it. Prints tokens/s per variant (median over rounds),
the ratio to the bare loop, and whether each variant decodes the bare loop's text.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
GGUF = Path.home() / ".cache" / "rolebound" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

PERSONA = ("You are Sherlock Holmes, the consulting detective of 221B Baker Street, London, in the year "
           "1891. You know only what Holmes could know in 1891: chemistry, criminal records, tobacco ash, "
           "the London streets, the habits of cab drivers and the tides of the Thames. Stay in character, "
           "never mention anything later than 1891, and answer in two or three sentences. ") * 3
QUESTIONS = ["Who is your closest friend?", "What do you make of a smartphone?",
             "Describe the room you live in.", "How do you tell a sailor from a clerk?",
             "What is your opinion of Scotland Yard?", "Name a case that puzzled you."]


def engine_variant(gguf: Path, threads: int, **opts):
    """A LlamaCppEngine at one sequence and no prefix reuse, with engine options `opts`."""
    from rolebound.models.llamacpp import LlamaCppEngine

    return LlamaCppEngine(gguf, threads=threads, max_batch=1, prefix_min=0, **opts)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", type=Path, default=GGUF)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if not a.gguf.exists():
        sys.exit(f"no GGUF at {a.gguf}: `make qwen` assembles it")
    import llama_cpp

    from rolebound.models.base import GenRequest
    from rolebound.records import Decoding, Message

    bare = llama_cpp.Llama(str(a.gguf), n_ctx=4096, n_threads=a.threads, n_threads_batch=a.threads,
                           n_batch=512, verbose=False)
    variants = {
        "engine (as shipped: n_ctx 8192, unified KV, flash attention auto = on)": engine_variant(a.gguf, a.threads),
        "engine, flash_attn=false": engine_variant(a.gguf, a.threads, flash_attn=False),
        "engine, flash_attn=false, n_ctx 4096": engine_variant(a.gguf, a.threads, flash_attn=False, n_ctx=4096),
    }
    first = next(iter(variants.values()))
    chats = [[Message(role="system", content=PERSONA), Message(role="user", content=q)]
             for q in QUESTIONS[:a.prompts]]
    texts = [first.render(c) for c in chats]
    n_prompt = [len(first.encode(t)) for t in texts]
    print(f"{len(texts)} prompts of {min(n_prompt)}-{max(n_prompt)} tokens, {a.tokens} decoded tokens each, "
          f"{a.threads} threads, {a.rounds} rounds")

    def run_bare(text, n):
        bare.reset()
        t0 = time.perf_counter()
        out = bare.create_completion(text, max_tokens=n, temperature=0.0, top_k=1)
        return time.perf_counter() - t0, out["choices"][0]["text"], out["usage"]["completion_tokens"]

    def run_engine(eng):
        def go(text, n):
            chat = chats[texts.index(text)]
            t0 = time.perf_counter()
            r = eng.generate([GenRequest(messages=chat)], Decoding(temperature=0, max_tokens=n))[0]
            return time.perf_counter() - t0, r.text, r.completion_tokens
        return go

    runners = {"bare loop (Llama.create_completion)": run_bare, **{k: run_engine(v) for k, v in variants.items()}}
    # per variant and prompt: the times of the 1-token and the (1 + tokens)-token calls, per round
    short = {k: [[] for _ in texts] for k in runners}
    full = {k: [[] for _ in texts] for k in runners}
    made = {k: [0] * len(texts) for k in runners}
    same = {k: 0 for k in runners}
    for _ in range(a.rounds):
        for j, text in enumerate(texts):
            ref = None
            for name, go in runners.items():
                short[name][j].append(go(text, 1)[0])
                tn, out, k = go(text, 1 + a.tokens)
                full[name][j].append(tn)
                made[name][j] = k
                ref = out if ref is None else ref
                same[name] += out == ref
    med = statistics.median
    rates = {}
    for name in runners:      # sums over prompts of the per-prompt medians: a noisy round drops out
        t1 = sum(med(x) for x in short[name])
        tn = sum(med(x) for x in full[name])
        rates[name] = (sum(n_prompt) / t1, sum(k - 1 for k in made[name]) / (tn - t1) if tn > t1 else float("nan"))
    base_p, base_d = rates["bare loop (Llama.create_completion)"]
    calls = a.rounds * len(texts)
    print("| variant | prefill tok/s | decode tok/s | prefill / bare | decode / bare | same text as bare |")
    print("|---|---|---|---|---|---|")
    for name, (p, d) in rates.items():
        print(f"| {name} | {p:.1f} | {d:.2f} | {p / base_p:.2f} | {d / base_d:.2f} | {same[name]}/{calls} |")


if __name__ == "__main__":
    main()
