"""Why the engine's greedy answers can differ from plain `generate()`'s: logits step by step.

    .venv/bin/python bench/greedy_logits.py [--dtype bf16|fp32] [--n 32] [--max-tokens 32]
                                            [--prefix-min N]

The bundled model answers bench/engine_overhead.py's bundled prompts (the first n of its CHARM
capture) through the engine (`TransformersEngine.generate`, every prompt in one call, prefix reuse
on by default) and through `model.generate()` in length-sorted batches of the engine's row count,
keeping each row's logits at every step. For each prompt whose answers differ it prints the first
step where the greedy picks differ, the top two logits of each way there, and how far the logits
of the prefill step (step 0) are apart; then the largest logit gap over every step before any
divergence: in float32 that gap is rounding (about 1e-4); a wrong mask, position id or reused KV
would move the logits far beyond it. Where answers
differ it also shows, on the first such prompt, that pads in front of a row move its bf16 logits
(so its batch does) while its prefix's KV followed by its tail gives the logits of the whole prompt.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import engine_overhead as eo


def plain_logits(engine, ids: list[list[int]], cap: int) -> tuple[list[list], list[str]]:
    """Per prompt, the float32 logits of each step of model.generate() (batches as
    engine_overhead.run_plain's), and its texts."""
    import torch
    from transformers import GenerationConfig

    tok = engine.tok
    gc = GenerationConfig(max_new_tokens=cap, do_sample=False, eos_token_id=sorted(engine.eos_ids),
                          pad_token_id=tok.pad_token_id, output_logits=True, return_dict_in_generate=True)
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[list] = [[] for _ in ids]
    texts = [""] * len(ids)
    with torch.inference_mode():
        for s in range(0, len(order), engine.max_batch):
            rows = order[s:s + engine.max_batch]
            enc = tok.pad({"input_ids": [ids[i] for i in rows]}, return_tensors="pt").to(engine.device)
            res = engine.model.generate(**enc, generation_config=gc)
            new = res.sequences[:, enc["input_ids"].shape[1]:].tolist()
            for r, i in enumerate(rows):
                end = next((k for k, x in enumerate(new[r]) if x in engine.eos_ids), len(new[r]))
                texts[i] = tok.decode(new[r][:end], skip_special_tokens=True)
                steps = [x[r].float().cpu() for x in res.logits]
                # a row's steps end at its first end-of-turn pick, as the engine's do
                cut = next((k for k, x in enumerate(steps) if int(x.argmax()) in engine.eos_ids), len(steps) - 1)
                out[i] = steps[:cut + 1]
    return out, texts


def engine_logits(engine, prompts, cap: int) -> tuple[list[list], list[str]]:
    """Per prompt, the float32 logits of each step of the engine's loop, and its texts."""
    from rolebound.models import decode
    from rolebound.models.base import GenRequest
    from rolebound.records import Decoding, Message

    steps: dict[tuple[int, int], list] = {}          # (id of the batch's Rows, row) -> logits a step
    owner: dict[tuple[int, int], int] = {}           # (id of Rows, row) -> request
    last: list = []
    finishing: list = [None]
    take, finish, pick = decode.Rows.take, decode.Rows._finish, engine._pick

    def rec_pick(x, *a):
        last[:] = [x.float().cpu()]
        return pick(x, *a)

    def rec_take(self, alive, toks):
        for r, row in enumerate(alive):
            if not self.finished(row):
                steps.setdefault((id(self), row), []).append(last[0][r])
        return take(self, alive, toks)

    def rec_finish(self, row, *a):
        finishing[0] = (id(self), row)
        return finish(self, row, *a)

    def emit(i, _res):
        owner[finishing[0]] = i

    engine._pick = rec_pick
    decode.Rows.take, decode.Rows._finish = rec_take, rec_finish
    try:
        reqs = [GenRequest(messages=[Message(**m) for m in p]) for p in prompts]
        res = engine.generate(reqs, Decoding(temperature=0.0, top_p=1.0, max_tokens=cap), emit=emit)
    finally:
        del engine._pick
        decode.Rows.take, decode.Rows._finish = take, finish
    out: list[list] = [[] for _ in prompts]
    for key, i in owner.items():
        out[i] = steps[key]
    return out, [r.text for r in res]


def padding_check(engine, ids: list[list[int]], i: int) -> None:
    """Prompt i's last logits alone, with k pads in front (a longer row beside it), and from its
    prefix's KV then its tail (the engine's reuse, one row, no pads)."""
    import torch

    def last(rows):
        x, mask, pos = engine._pad(rows)
        return engine.model(input_ids=x, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits[0, -1].float()

    full = ids[i]
    groups, _ = engine._prefix_groups(ids, [len(e) - 1 for e in ids])
    plen = next((n for members, n in groups if i in members), 0)
    with torch.inference_mode():
        ref = last([full])
        print(f"prompt {i} alone: {top2(ref)}")
        for k in (1, 2, 4, 8, 16):
            x = last([full, [engine.tok.pad_token_id] * (len(full) + k)])
            print(f"  with {k:2d} pads in front: max |logit gap| {float((x - ref).abs().max()):.4f}, {top2(x)}")
        if plen:
            logits = engine._prefill([full], [(engine._prefix_cache(full[:plen]), plen)])[0]
            print(f"  its prefix's KV ({plen} tokens), then its tail: max |logit gap| "
                  f"{float((logits[0].float() - ref).abs().max()):.4f}, {top2(logits[0].float())}")


def top2(x) -> str:
    v, i = x.topk(2)
    return " ".join(f"{int(a)}:{float(b):.3f}" for a, b in zip(i, v))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtype", default="auto", help="the engine's dtype (auto: its own choice)")
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--prefix-min", type=int, default=None, help="the engine's prefix_min (0: no prefix reuse)")
    args = ap.parse_args()

    from rolebound.models import bundled
    from rolebound.models.local import TransformersEngine
    from rolebound.records import Message

    with tempfile.TemporaryDirectory(prefix="rb-logits-") as tmp:
        prompts = eo.capture(Path(tmp), max(128, args.n))[:args.n]      # engine_overhead.py's default capture
    opts = {} if args.prefix_min is None else {"prefix_min": args.prefix_min}
    engine = TransformersEngine(bundled.converted_dir(), dtype=args.dtype, device="cpu", **opts)
    eo.log(f"bundled: {len(prompts)} prompts x {args.max_tokens} tokens, {str(engine.dtype).split('.')[-1]}, "
           f"prefix_min {engine.prefix_min}")
    ids = [engine.encode(engine.render([Message(**m) for m in p])) for p in prompts]
    E, texts = engine_logits(engine, prompts, args.max_tokens)
    P, plain_texts = plain_logits(engine, ids, args.max_tokens)
    same = sum(a == b for a, b in zip(texts, plain_texts))
    gap = 0.0
    print(f"\nanswers equal: {same} of {len(prompts)}")
    for i, (p, e) in enumerate(zip(P, E)):
        n = min(len(p), len(e))
        t = next((k for k in range(n) if int(p[k].argmax()) != int(e[k].argmax())), None)
        for k in range(n if t is None else t):
            gap = max(gap, float((p[k] - e[k]).abs().max()))
        if t is not None:
            print(f"prompt {i:3d} ({len(ids[i])} tokens): first different pick at step {t}: "
                  f"plain {top2(p[t])} (picks {int(p[t].argmax())}), engine {top2(e[t])} (picks {int(e[t].argmax())}); "
                  f"step 0 max |logit gap| {float((p[0] - e[0]).abs().max()):.3f}")
    print(f"largest logit gap over every step before the picks differ: {gap:.2e}")
    first = next((i for i, (a, b) in enumerate(zip(texts, plain_texts)) if a != b), None)
    if first is not None:
        print("\nwhere a row sits in its batch moves its logits; reusing a prefix does not:")
        padding_check(engine, ids, first)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
