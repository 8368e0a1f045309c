"""A transformers engine for local models on CPU or GPU (used by the `bundled` and `hf` backends).

What makes it fast on a small CPU (bench/README.md has the figures):
- requests are sorted by length and packed into batches of 16 rows on the CPU (fewer CPU
  seconds than bigger batches here), under a padded-token budget taken from free memory;
- left padding with explicit position ids (without them the predictions change);
- log-likelihood reads only the positions it needs (`logits_to_keep`), never the whole prompt;
- requests that share a long prefix (>= 64 tokens: a persona and its profile before many
  questions) compute it once and reuse its KV cache, for scoring and for generation;
- its own greedy/sampling loop (models/decode.py), one per batch whatever prefixes its rows
  share: a row's result goes out as soon as it hits end-of-turn, a stop string or its token
  limit, and finished rows leave the batch (and the KV cache) once they are a quarter of it;
- on CUDA, decoding on a static KV cache with a compiled step (CUDA graphs), falling back to the
  dynamic loop if that fails.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any, Sequence

from ..errors import BackendError
from ..records import Decoding, Message
from ..threads import policy as thread_policy
from ..threads import resolve_override
from .engine_calls import EngineCalls, check_stop, split_all
from .prefix_kv import PrefixKV
from .base import (CHAT, CHAT_TEMPLATE, COMPLETE, HIDDEN, LOGPROB, Backend, GenRequest, GenResult,
                   ScoreRequest, ScoreResult)


def cpu_has_bf16() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def pick_dtype(name: str, device: str):
    import torch

    name = (name or "auto").lower()
    if name == "auto":
        if device.startswith("cuda"):
            return torch.bfloat16
        # bf16 is 1.8x faster than fp32 on CPUs with native bf16 (measured here); fp32 elsewhere.
        return torch.bfloat16 if cpu_has_bf16() else torch.float32
    table = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16,
             "float16": torch.float16, "fp32": torch.float32, "float32": torch.float32}
    if name not in table:
        raise BackendError(f"unknown dtype '{name}'; use one of auto, bf16, fp16, fp32")
    return table[name]


def free_memory(device: str) -> int:
    """Bytes free for activations on the device (MemAvailable on the CPU)."""
    import torch

    if device.startswith("cuda"):
        return int(torch.cuda.mem_get_info()[0])
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def auto_batch(model, device: str, dtype) -> tuple[int, int]:
    """(rows, padded tokens) per batch for the memory at hand.

    Rows: 16 on the CPU. On 2 Zen 4 cores a 64-row / 8192-token batch costs 1.4x the CPU time
    of 16-row batches for the same 100 prompts (bench/README.md); 16 is also what lm-eval and
    the plain loop use, so answers match theirs bit for bit. 64 on a GPU.
    Tokens: a quarter of the free memory over a per-token estimate (KV cache of every layer,
    MLP activations, one attention row at 2k context), capped at 64k.
    """
    cfg = model.config
    layers = getattr(cfg, "num_hidden_layers", 32)
    hidden = getattr(cfg, "hidden_size", 4096)
    heads = getattr(cfg, "num_attention_heads", 32)
    kv_heads = getattr(cfg, "num_key_value_heads", heads) or heads
    head_dim = getattr(cfg, "head_dim", None) or hidden // heads
    inter = getattr(cfg, "intermediate_size", 4 * hidden)
    size = dtype.itemsize if hasattr(dtype, "itemsize") else 2
    per_token = 2 * layers * kv_heads * head_dim * size + (4 * hidden + 3 * inter) * size + heads * 2048 * 4
    tokens = max(2048, min(65536, free_memory(device) // 4 // per_token))
    return (64 if device.startswith("cuda") else 16), int(tokens)


# Part of every cache key of this engine. bf16 results depend slightly on batch make-up and on
# prefix reuse, so when those change, bump this: otherwise a run would mix cached answers of the
# old engine with new ones and differ from a fresh run of the same command.
ENGINE_REV = 7       # 3: option log-likelihoods in float32; 4: bf16 pass, float32 re-score of close calls;
                     # 5: float32 alone where it costs no more than the two passes; 6: prefix KV kept
                     # across calls (models/prefix_kv.py); 7: one decode loop a batch across prefix
                     # groups (models/decode.py)
# A request whose best two options lie within this many nats (summed, or per token) is scored
# again by the float32 copy. bf16 trunk noise moved log-likelihoods by about 0.05 between batch
# make-ups (0.13 on one Xeon); four times that leaves every answer the bf16 pass keeps decided
# the same way.
RESCORE_MARGIN = 0.5


def _close(res: ScoreResult) -> bool:
    """The best two options are within RESCORE_MARGIN, summed or per token (suites read either)."""
    lps = list(res.logprobs or [])
    if len(lps) < 2:
        return False
    counts = [max(int(c or 1), 1) for c in (res.token_counts or [1] * len(lps))]
    for vals in (lps, [lp / n for lp, n in zip(lps, counts)]):
        a, b = sorted(vals, reverse=True)[:2]
        if a - b < RESCORE_MARGIN:
            return True
    return False


def _flag(value) -> bool:
    """A boolean option given as a bool or as text (--backend-opt static_decode=false)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise BackendError(f"static_decode must be true or false, not '{value}'")


class TransformersEngine:
    """Holds one model and tokenizer; every method is synchronous and runs under one lock."""

    def __init__(self, path: str | Path, *, dtype: str = "auto", device: str | None = None,
                 threads: int | None = None, max_batch: int | None = None,
                 batch_tokens: int | None = None, prefix_min: int = 64, prefix_cache_mb: float = 256,
                 static_decode: bool | None = None, adapter: str | None = None):
        t0 = time.perf_counter()
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
        except ImportError as exc:  # pragma: no cover - core dependency
            raise BackendError(f"transformers/torch missing ({exc}); run `make test` or "
                               "`pip install torch==2.13.0 transformers`") from None
        # --threads > ROLEBOUND_THREADS > OMP_NUM_THREADS > automatic (rolebound/threads.py)
        self.threads_forced, self.threads_source = resolve_override(threads)
        self.tick()
        self.torch = torch
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.dtype = pick_dtype(dtype, self.device)
        # Scoring on the CPU runs a float32 copy when bf16 was only chosen for speed ("auto"): bf16
        # kernels round differently with the batch's row count, which moved log-likelihoods by
        # ~0.05 and flipped answers between runs of different size.
        self.score_fp32 = (dtype or "auto").lower() == "auto" and not self.device.startswith("cuda")
        self._fp32_model = None
        self._score_pass = None            # "bf16": the fast first pass of score(); None: _scoring_model decides
        self.rescored = [0, 0, 0]          # [re-scored in float32, scored, scored by float32 alone]
        self._fp32_cost = None             # CPU time of a float32 GEMM over a bf16 one (_measure_fp32_cost)
        self.score_plan = None             # None: by cost; "float32" or "two-pass" pins it (tests)
        self.path = str(path)
        self.tok = AutoTokenizer.from_pretrained(self.path)
        self.tok.padding_side = "left"
        if self.tok.pad_token_id is None:
            self.tok.pad_token = self.tok.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=self.dtype).to(self.device)
        if adapter:     # `rolebound tune`'s LoRA adapter, merged: decoding as fast as the base model
            from .adapter import merge_adapter

            self.model = merge_adapter(self.model, adapter)
        self.model.eval()
        rows, tokens = auto_batch(self.model, self.device, self.dtype)
        self.max_batch = int(max_batch or rows)
        self.batch_tokens = int(batch_tokens or tokens)
        self.prefix_min = int(prefix_min) if self._prefix_ok() else 0
        # shared prefixes' KV across calls (0: within one call only); prefill tokens counted
        self.prefix_cache_mb = float(prefix_cache_mb)
        self.kv = PrefixKV(self.prefix_cache_mb) if self.prefix_min and self.prefix_cache_mb > 0 else None
        self.prefill = {"computed": 0, "saved": 0}
        self.lock = threading.Lock()
        self.load_s = time.perf_counter() - t0
        eos = set()
        gen_eos = getattr(self.model.generation_config, "eos_token_id", None)
        for e in (gen_eos if isinstance(gen_eos, list) else [gen_eos]) + [self.tok.eos_token_id]:
            if e is not None:
                eos.add(int(e))
        self.eos_ids = eos
        self.has_template = bool(getattr(self.tok, "chat_template", None))
        # transformers renamed `past_key_values` to `cache` (5.2x); accept both.
        import inspect

        params = inspect.signature(self.model.forward).parameters
        self.cache_kw = "cache" if "cache" in params else "past_key_values"
        base = getattr(self.model, self.model.base_model_prefix, None)
        bparams = inspect.signature(base.forward).parameters if base is not None else params
        self._base_cache_kw = "cache" if "cache" in bparams else "past_key_values"
        self._head_fp32 = None
        # CUDA: decode on a StaticCache with a compiled step (CUDA graphs); None = on CUDA only.
        # Turned off for the engine's life if it fails (static_error says why).
        self.static_decode = self.device.startswith("cuda") if static_decode is None else _flag(static_decode)
        # decode steps hand SDPA its mask ready-made (models/decode.py): SDPA on full attention only
        cfg = self.model.config
        self._mask4d = (getattr(cfg, "_attn_implementation", None) == "sdpa" and self._prefix_ok()
                        and all(t == "full_attention" for t in (getattr(cfg, "layer_types", None) or ["full_attention"])))
        self.static_error: str | None = None
        self._compiled = None
        self._static_pool: dict = {}

    def tick(self) -> None:
        """Before each batch: this thread's torch thread count (only an adaptive one changes);
        a stopped run ends here."""
        check_stop()
        thread_policy().apply(self.threads_forced, self.threads_source)

    def _prefix_ok(self) -> bool:
        """Prefix KV reuse assumes a plain full-attention cache (no sliding windows)."""
        cfg = self.model.config
        return not (getattr(cfg, "sliding_window", None) and getattr(cfg, "use_sliding_window", True))

    # -- text -------------------------------------------------------------------------------
    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        if not self.has_template:
            # No template: plain role-tagged text, so base models still work.
            text = "".join(f"{m.role}: {m.content}\n" for m in messages)
            return text + ("assistant:" if add_generation_prompt else "")
        msgs = [m.model_dump() for m in messages]
        return self.tok.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt,
                                            tokenize=False)

    def encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def _request_text(self, messages, prompt) -> str:
        return self.render(messages) if messages else (prompt or "")

    # -- batching ---------------------------------------------------------------------------
    def _batches(self, lengths: list[int], extra: int = 0) -> list[list[int]]:
        """Indices sorted longest first, packed so rows * (longest + extra) stays in budget."""
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches, cur, cur_max = [], [], 0
        for i in order:
            new_max = max(cur_max, lengths[i] + extra)
            if cur and (len(cur) + 1 > self.max_batch or (len(cur) + 1) * new_max > self.batch_tokens):
                batches.append(cur)
                cur, new_max = [], lengths[i] + extra
            cur.append(i)
            cur_max = new_max
        if cur:
            batches.append(cur)
        return batches

    def _pad(self, seqs: list[list[int]]):
        torch = self.torch
        width = max(len(s) for s in seqs)
        pad = self.tok.pad_token_id
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for r, s in enumerate(seqs):
            if s:
                ids[r, width - len(s):] = torch.tensor(s, dtype=torch.long)
                mask[r, width - len(s):] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        return ids.to(self.device), mask.to(self.device), pos.to(self.device)

    # -- scoring ----------------------------------------------------------------------------
    def _split_context(self, req: ScoreRequest) -> tuple[list[int], list[list[int]]]:
        if req.messages:
            context = self.render(req.messages) + req.assistant_prefix
        else:
            context = (req.prompt or "") + req.assistant_prefix
        conts = list(req.continuations)
        # lm-eval convention: trailing whitespace of the context belongs to the continuation.
        stripped = context.rstrip(" ")
        if stripped != context:
            moved = context[len(stripped):]
            context, conts = stripped, [moved + c for c in conts]
        ctx = self.encode(context)
        cont_ids = [self.encode(c) for c in conts]
        # Fold a shared first token (" 1".." 5" all start with " ") into the context, so
        # single-token options need one forward pass and the last position only.
        while all(len(c) > 1 for c in cont_ids) and len({c[0] for c in cont_ids}) == 1:
            ctx.append(cont_ids[0][0])
            cont_ids = [c[1:] for c in cont_ids]
        if any(len(c) == 0 for c in cont_ids):
            raise ValueError("a continuation tokenises to nothing")
        return ctx, cont_ids

    def score(self, requests: Sequence[ScoreRequest], emit=None) -> list[ScoreResult]:
        """emit(i, result), if given, is called (from this thread) as soon as request i is done,
        so the runner can record it while later batches run.

        With a float32 scoring copy (bf16 on the CPU) the answers are float32's; how they are
        reached is picked by cost (`_fp32_alone`). Either the float32 copy scores every request,
        or the bf16 model (float32 head) scores every request first and the requests whose best two
        options lie within RESCORE_MARGIN are scored again in float32 and only then emitted. An
        answer is thus never decided by bf16 rounding, and runs of different sizes agree."""
        if not self.score_fp32 or self.dtype == self.torch.float32:
            return self._score_once(requests, emit)
        if self._fp32_alone():
            out = self._score_once(requests, emit)
            self.rescored[2] += len(requests)
            return out
        close: list[int] = []

        def first(i, res):
            if res.error is None and _close(res):
                close.append(i)
            elif emit:
                emit(i, res)

        self._score_pass = "bf16"
        try:
            out = self._score_once(requests, first)
        finally:
            self._score_pass = None
        if close:
            again = self._score_once([requests[i] for i in close])
            for i, res in zip(close, again):
                out[i] = res
                if emit:
                    emit(i, res)
        self.rescored[0] += len(close)
        self.rescored[1] += len(requests)
        return out

    def _fp32_alone(self) -> bool:
        """Score with the float32 copy alone when that costs no more than the two passes.

        With r = float32 cost / bf16 cost and f = the share of requests re-scored so far, the two
        passes cost 1 + f*r and float32 alone r. r is measured here, not assumed: on a Xeon
        without AMX bf16 GEMMs ran 1.6x slower than float32 ones (r < 1: float32 always wins),
        elsewhere bf16 was 1.8-3x faster (the two passes win while few calls are close).
        Answers are float32's either way; only the time changes."""
        if self.score_plan:
            return self.score_plan == "float32"
        if self._fp32_cost is None:
            with self.lock:
                self._fp32_cost = self._measure_fp32_cost()
        r = self._fp32_cost
        # f is read only after enough requests: a handful of close calls says little
        f = self.rescored[0] / self.rescored[1] if self.rescored[1] >= 64 else 0.0
        return r <= 1.0 + f * r

    def _measure_fp32_cost(self, rows: int = 1024, reps: int = 4) -> float:
        """CPU time of the trunk's largest projection in float32 over the same in bf16 (best of
        `reps`, alternating, after one warm-up each), on `rows` tokens: GEMMs are most of a
        scoring forward (80% in bf16, 70% in float32, profiled on the CHARM workload)."""
        torch = self.torch
        head = self.model.get_output_embeddings()
        linears = [m for m in self.model.modules() if isinstance(m, torch.nn.Linear) and m is not head]
        if not linears:
            return 1.0
        w16 = max(linears, key=lambda m: m.weight.numel()).weight.detach()
        w32 = w16.float()
        x32 = torch.randn((rows, w16.shape[1]), generator=torch.Generator().manual_seed(0)).to(self.device)
        pairs = ((x32.to(w16.dtype), w16), (x32, w32))
        best = [float("inf"), float("inf")]
        self.tick()
        with torch.inference_mode():
            for x, w in pairs:
                torch.nn.functional.linear(x, w)
            for _ in range(reps):
                for k, (x, w) in enumerate(pairs):
                    t = time.process_time()
                    torch.nn.functional.linear(x, w)
                    best[k] = min(best[k], time.process_time() - t)
        return best[1] / max(best[0], 1e-9)

    def _score_once(self, requests: Sequence[ScoreRequest], emit=None) -> list[ScoreResult]:
        torch = self.torch
        out, prepared = split_all(self._split_context, requests, emit)
        singles, multis = [], []
        for i, (ctx, conts) in prepared.items():
            (singles if all(len(c) == 1 for c in conts) else multis).append(i)
        with self.lock, torch.inference_mode():
            if singles:
                # one forward per request, read at its last position
                seqs = [prepared[i][0] for i in singles]
                wants = [[(len(s) - 1, c[0]) for c in prepared[i][1]] for i, s in zip(singles, seqs)]

                def single_done(j, vals):
                    i = singles[j]
                    ctx, conts = prepared[i]
                    out[i] = ScoreResult(logprobs=vals, token_counts=[1] * len(conts), prompt_tokens=len(ctx))
                    if emit:
                        emit(i, out[i])

                self._logprobs(seqs, wants, done=single_done)
            if multis:
                # one row per (request, continuation): context + continuation; the t-th
                # continuation token is predicted by the position before it
                rows = [(i, k) for i in multis for k in range(len(prepared[i][1]))]
                left = {i: len(prepared[i][1]) for i in multis}
                seqs, wants = [], []
                for i, k in rows:
                    ctx, cont = prepared[i][0], prepared[i][1][k]
                    seqs.append(ctx + cont)
                    wants.append([(len(ctx) - 1 + t, tok) for t, tok in enumerate(cont)])

                def multi_done(j, vals):
                    i, k = rows[j]
                    ctx, conts = prepared[i]
                    res = out[i] or ScoreResult(logprobs=[0.0] * len(conts), token_counts=[0] * len(conts),
                                                prompt_tokens=len(ctx))
                    res.logprobs[k], res.token_counts[k] = sum(vals), len(vals)
                    out[i] = res
                    left[i] -= 1
                    if emit and left[i] == 0:
                        emit(i, res)

                self._logprobs(seqs, wants, done=multi_done)
        return out  # type: ignore[return-value]

    def _logprobs(self, seqs: list[list[int]], wants: list[list[tuple[int, int]]],
                  done=None) -> list[list[float]]:
        """log p(token | seq[:pos+1]) for each (pos, token) in wants[j], for every sequence j.

        Sequences that share a long prefix (a persona and profile before many questions) reuse
        its KV cache; the others go through length-sorted, left-padded batches.
        """
        out: list[list[float] | None] = [None] * len(seqs)
        firsts = [min(p for p, _ in w) for w in wants]
        groups, rest = self._with_cached(seqs, firsts, *self._prefix_groups(seqs, firsts), self._scoring_model())
        for members, plen in groups:
            self._score_shared(seqs, wants, firsts, members, plen, out, done)
        self.prefill["computed"] += sum(len(seqs[j]) for j in rest)
        for b in self._batches([len(seqs[j]) for j in rest]):
            idx = [rest[j] for j in b]
            ids, mask, pos = self._pad([seqs[j] for j in idx])
            self._read(idx, seqs, wants, firsts, out, done, input_ids=ids, attention_mask=mask, position_ids=pos,
                       use_cache=False)
        return out  # type: ignore[return-value]

    def _read(self, idx, seqs, wants, firsts, out, done, **inputs) -> None:
        """One forward over a batch (rows right-aligned); log-softmax of the last positions only."""
        self.tick()
        keep = max(len(seqs[j]) - firsts[j] for j in idx)
        lp = self._logsoftmax32(inputs, keep)
        for r, j in enumerate(idx):
            n = len(seqs[j])
            out[j] = [float(lp[r, keep - (n - p), t]) for p, t in wants[j]]
            if done:
                done(j, out[j])

    def _logsoftmax32(self, inputs: dict, keep: int):
        """log-softmax over the vocabulary at the last `keep` positions, with the final projection
        and the softmax in float32 from the trunk's last hidden state. bf16 logits step by 0.125
        near the top, so options tied exactly (12% of the demo's answers) and which one won
        depended on the batch."""
        torch = self.torch
        model = self._scoring_model()
        base = getattr(model, model.base_model_prefix, None)
        head = model.get_output_embeddings()
        if base is None or head is None:       # an unusual architecture: its own logits, upcast
            return torch.log_softmax(model(**inputs, logits_to_keep=keep).logits.float(), dim=-1)
        if self._base_cache_kw != self.cache_kw and self.cache_kw in inputs:
            inputs = dict(inputs)
            inputs[self._base_cache_kw] = inputs.pop(self.cache_kw)
        hidden = base(**inputs).last_hidden_state[:, -keep:, :].float()
        w, b = self._head32(head)
        logits = torch.nn.functional.linear(hidden, w, b)
        cfg = model.config
        if getattr(cfg, "logit_scale", None):                 # Cohere
            logits = logits * float(cfg.logit_scale)
        cap = getattr(cfg, "final_logit_softcapping", None)   # Gemma 2/3
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return torch.log_softmax(logits, dim=-1)

    def _scoring_model(self):
        if not self.score_fp32 or self.dtype == self.torch.float32 or self._score_pass == "bf16":
            return self.model
        if self._fp32_model is None:
            import copy

            self._fp32_model = copy.deepcopy(self.model).float().eval()
        return self._fp32_model

    def _head32(self, head):
        """The output projection in float32 (a copy kept once if the model is in bf16/fp16)."""
        if self._head_fp32 is None or self._head_fp32[2] is not head:
            w = head.weight if head.weight.dtype == self.torch.float32 else head.weight.detach().float()
            b = getattr(head, "bias", None)
            self._head_fp32 = (w, None if b is None else b.detach().float(), head)
        return self._head_fp32[:2]

    # -- shared prefixes --------------------------------------------------------------------
    def _prefix_groups(self, seqs: list[list[int]], firsts: list[int]) -> tuple[list[tuple[list[int], int]], list[int]]:
        """Groups of >= 2 sequences sharing >= prefix_min leading tokens, and the other indices.

        A prefix stops before the first position a member reads. The rest keep their request
        order, so without groups the batches are exactly the plain length-sorted ones.
        """
        if not self.prefix_min or len(seqs) < 2:
            return [], list(range(len(seqs)))
        order = sorted(range(len(seqs)), key=lambda j: seqs[j])      # lexicographic: sharers adjoin
        groups: list[tuple[list[int], int]] = []
        rest: list[int] = []
        cur: list[int] = []
        shared = 0

        def close():
            if len(cur) >= 2 and shared >= self.prefix_min:
                groups.append((list(cur), shared))
            else:
                rest.extend(cur)

        for j in order:
            if cur:
                head, s, n = seqs[cur[0]], seqs[j], 0
                limit = min(shared, firsts[j], len(s), len(head))
                while n < limit and head[n] == s[n]:
                    n += 1
                if n >= self.prefix_min:
                    cur.append(j)
                    shared = n
                    continue
                close()
            cur, shared = [j], firsts[j]
        close()
        rest.sort()
        return groups, rest

    def _prefix_cache(self, prefix: list[int], model=None):
        """Per-layer (keys, values) of one prefix (by `model`, default the engine's): from the
        kept KV where an entry shares it, computing only what no entry holds."""
        from transformers import DynamicCache

        model = model or self.model
        key, keep = self.kv.best(model, prefix) if self.kv and self.prefix_min else (None, 0)
        if keep < self.prefix_min:
            key, keep = None, 0
        if keep == len(prefix):
            self.prefill["saved"] += keep
            return self.kv.take(key, keep)
        self.tick()
        cache = DynamicCache()
        for layer, (k, v) in enumerate(self.kv.take(key, keep) if keep else []):
            cache.update(k, v, layer)
        ids = self.torch.tensor([prefix[keep:]], dtype=self.torch.long, device=self.device)
        pos = self.torch.arange(keep, len(prefix), device=self.device).view(1, -1)
        model(input_ids=ids, position_ids=pos, use_cache=True, logits_to_keep=1, **{self.cache_kw: cache})
        kv = [(layer[0], layer[1]) for layer in cache]
        self.prefill["computed"] += len(prefix) - keep
        self.prefill["saved"] += keep
        if self.kv:
            self.kv.put(model, prefix, kv)
        return kv

    def _with_cached(self, seqs, firsts, groups, rest, model):
        """Sequences left alone by _prefix_groups that share >= prefix_min tokens with a kept
        prefix become groups on it (by the entry they share most with); the others stay."""
        if not self.kv or not self.prefix_min or not rest:         # prefix_min 0: no reuse at all
            return groups, rest
        by_entry: dict[tuple, list[tuple[int, int]]] = {}
        alone = []
        for j in rest:
            key, n = self.kv.best(model, seqs[j], firsts[j])
            if key is not None and n >= self.prefix_min:
                by_entry.setdefault(key, []).append((j, n))
            else:
                alone.append(j)
        for hits in by_entry.values():
            groups.append(([j for j, _ in hits], min(n for _, n in hits)))
        return groups, alone

    def _expand(self, kv, rows: int):
        from transformers import DynamicCache

        cache = DynamicCache()
        for layer, (k, v) in enumerate(kv):
            cache.update(k.expand(rows, -1, -1, -1), v.expand(rows, -1, -1, -1), layer)
        return cache

    def _score_shared(self, seqs, wants, firsts, members: list[int], plen: int, out, done=None) -> None:
        torch = self.torch
        kv = self._prefix_cache(seqs[members[0]][:plen], self._scoring_model())
        tails = [seqs[j][plen:] for j in members]
        self.prefill["saved"] += (len(members) - 1) * plen
        self.prefill["computed"] += sum(len(t) for t in tails)
        for b in self._batches([len(t) for t in tails]):
            idx = [members[j] for j in b]
            ids, mask, pos = self._pad([tails[j] for j in b])
            ones = torch.ones((len(b), plen), dtype=mask.dtype, device=mask.device)
            self._read(idx, seqs, wants, firsts, out, done, input_ids=ids,
                       attention_mask=torch.cat([ones, mask], 1),
                       position_ids=pos + plen, use_cache=True, **{self.cache_kw: self._expand(kv, len(b))})

    # -- generation -------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenRequest], decoding: Decoding, emit=None) -> list[GenResult]:
        """Batches are packed over every request, longest first, whatever prefix a request
        shares: a batch computes the prefixes it needs that are not kept (one forward), prefills
        every row's tail on its prefix's KV (one forward) and decodes all its rows in one loop.
        A row's result is emitted as soon as it finishes."""
        torch = self.torch
        texts = [self._request_text(r.messages, r.prompt) for r in requests]
        encoded = [self.encode(t) for t in texts]
        out: list[GenResult | None] = [None] * len(requests)
        limits = [r.max_tokens or decoding.max_tokens for r in requests]
        stops = [r.stop if r.stop is not None else (decoding.stop or []) for r in requests]
        extra = min(max(limits), 64)
        with self.lock, torch.inference_mode():
            gen = None
            if decoding.temperature > 0:
                gen = torch.Generator(device=self.device)
                gen.manual_seed(int(decoding.seed))
            # Prompts sharing a long prefix start from one copy of its KV cache; the last
            # prompt token stays in the tail, since its logits start the decoding.
            firsts = [len(e) - 1 for e in encoded]
            groups, rest = self._with_cached(encoded, firsts, *self._prefix_groups(encoded, firsts), self.model)
            group_of: list[int | None] = [None] * len(requests)
            plens = [0] * len(requests)
            for g, (members, plen) in enumerate(groups):
                for i in members:
                    group_of[i], plens[i] = g, plen
            # packed by tail length: a batch's prefill runs every row to its longest tail, so rows
            # on a kept prefix batch together; the budget counts the longest prefix on every row
            batches = self._batches([len(e) - p for e, p in zip(encoded, plens)], extra=extra + max(plens))
            left = [0] * len(groups)                   # batches still to use each prefix
            for b in batches:
                for g in {group_of[i] for i in b} - {None}:
                    left[g] += 1
            kvs: dict[int, Any] = {}
            for b in batches:
                need = {g: encoded[groups[g][0][0]][:groups[g][1]]
                        for g in dict.fromkeys(group_of[i] for i in b) if g is not None and g not in kvs}
                within = self._prefixes_within(need, [len(encoded[i]) for i in b], [plens[i] for i in b],
                                               [group_of[i] for i in b])
                made = self._prefix_kvs({g: p for g, p in need.items() if g not in within})
                kvs.update(made)
                prefixes = [None if group_of[i] is None or group_of[i] in within else (kvs[group_of[i]], plens[i])
                            for i in b]
                # prefill tokens: a row on a prefix saves it, less each prefix made here (counted
                # by _prefix_kvs as computed, or saved where it was kept)
                for i, p in zip(b, prefixes):
                    self.prefill["computed"] += len(encoded[i]) - (p[1] if p else 0)
                    self.prefill["saved"] += p[1] if p else 0
                self.prefill["saved"] -= sum(len(need[g]) for g in made)
                # a prefix computed inside this batch's own prefill is kept from its first row
                harvest = {}
                for r, i in enumerate(b):
                    if group_of[i] in within and group_of[i] not in harvest.values():
                        harvest[r] = group_of[i]

                def done(r, res, b=b):
                    out[b[r]] = res
                    if emit:
                        emit(b[r], res)

                def kept(r, kv, harvest=harvest):
                    g = harvest[r]
                    kvs[g] = kv
                    if self.kv:
                        self.kv.put(self.model, need[g], kv)

                self._decode_batch([encoded[i] for i in b], [limits[i] for i in b], [stops[i] for i in b],
                                   decoding, gen, prefixes=prefixes, done=done,
                                   keep=({r: plens[b[r]] for r in harvest}, kept))
                for g in {group_of[i] for i in b} - {None}:
                    left[g] -= 1
                    if not left[g]:
                        del kvs[g]                     # the kept copy (PrefixKV) stays
        return out  # type: ignore[return-value]

    def _prefill(self, seqs, prefixes):
        """One forward over the batch's tails, each row on its prefix's KV (left padded into one
        cache: [pad | prefix | pad | tail], the pads masked). prefixes[r]: (KV, length) or None.
        Returns (last logits, cache, mask, next positions)."""
        torch = self.torch
        from transformers import DynamicCache

        self.tick()
        n = len(seqs)
        plens = [p[1] if p else 0 for p in prefixes]
        ids, mask, pos = self._pad([s[k:] for s, k in zip(seqs, plens)])
        cache = DynamicCache()
        width = max(plens)
        if width:
            by_kv: dict[int, list[int]] = {}
            for r, p in enumerate(prefixes):
                if p:
                    by_kv.setdefault(id(p[0]), []).append(r)
            pmask = torch.zeros((n, width), dtype=mask.dtype, device=mask.device)
            layers = [[None, None] for _ in next(p for p in prefixes if p)[0]]
            for rows in by_kv.values():
                kv, plen = prefixes[rows[0]]
                sel = torch.tensor(rows, device=self.device)
                pmask[sel, width - plen:] = 1
                for pair, (k, v) in zip(layers, kv):
                    for j, x in enumerate((k, v)):
                        if pair[j] is None:
                            pair[j] = x.new_zeros((n, x.shape[1], width, x.shape[3]))
                        pair[j][sel, :, width - plen:] = x[:, :, :plen]
            for layer, (k, v) in enumerate(layers):
                cache.update(k, v, layer)
            mask = torch.cat([pmask, mask], 1)
            pos = pos + torch.tensor(plens, device=self.device).view(-1, 1)
        logits = self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True,
                            logits_to_keep=1, **{self.cache_kw: cache}).logits[:, -1, :]
        need = max(len(x) for x in seqs)
        if mask.shape[1] > need:
            # a prefix region and a tail region made it wider than its longest row: each row's
            # tokens right-aligned into `need` columns, so no decode step attends over the gap
            idx = torch.sort(mask, dim=1, stable=True).indices[:, -need:]
            mask = mask.gather(1, idx)
            for layer in cache.layers:
                at = idx[:, None, :, None].expand(-1, layer.keys.shape[1], -1, layer.keys.shape[3])
                layer.keys, layer.values = layer.keys.gather(2, at), layer.values.gather(2, at)
        return logits, cache, mask, pos[:, -1] + 1

    def _prefixes_within(self, need: dict[int, list[int]], lengths: list[int], plens: list[int],
                        gs: list[int | None]) -> set[int]:
        """The prefixes in `need` (not kept) that this batch computes within its own prefill, when
        computing them apart would not make the prefill shorter. Costs in token rows: apart, the
        prefixes (padded to the longest) and every row to the longest tail; within, every row to
        the longest row not on a kept prefix."""
        new = {g for g, p in need.items() if not (self.kv and self.kv.best(self.model, p)[1] >= self.prefix_min)}
        if not new:
            return set()
        apart = len(new) * max(len(need[g]) for g in new) + len(lengths) * max(n - k for n, k in zip(lengths, plens))
        within = len(lengths) * max(n - (0 if g in new else k) for n, k, g in zip(lengths, plens, gs))
        return new if within <= apart else set()

    def _prefix_kvs(self, need: dict[int, list[int]]) -> dict[int, Any]:
        """KV of each prefix in `need` (key -> tokens): from the kept KV where it holds some,
        the others computed together in one forward (left padded)."""
        from transformers import DynamicCache

        out, fresh = {}, {}
        for g, p in need.items():
            keep = self.kv.best(self.model, p)[1] if self.kv else 0
            (out if keep >= self.prefix_min or len(need) == 1 else fresh)[g] = p
        for g, p in out.items():
            out[g] = self._prefix_cache(p)
        if fresh:
            self.tick()
            ids, mask, pos = self._pad(list(fresh.values()))
            cache = DynamicCache()
            self.model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1,
                       **{self.cache_kw: cache})
            width = ids.shape[1]
            for j, (g, p) in enumerate(fresh.items()):
                kv = [(layer.keys[j:j + 1, :, width - len(p):].clone(), layer.values[j:j + 1, :, width - len(p):].clone())
                      for layer in cache.layers]
                self.prefill["computed"] += len(p)
                if self.kv:
                    self.kv.put(self.model, p, kv)
                out[g] = kv
        return out

    def _decode_batch(self, seqs, limits, stops, decoding: Decoding, gen, prefixes=None, done=None,
                      keep=None) -> list[GenResult]:
        """Prefill and decode one batch in one loop. prefixes[r]: (prefix KV, its length) of row r,
        or None; done(r, result) is called as each row finishes. keep: ({row: n}, kept): kept(row,
        KV of its first n tokens) is called after the prefill, for rows without a prefix."""
        from . import decode

        prefixes = prefixes or [None] * len(seqs)
        logits, cache, mask, next_pos = self._prefill(seqs, prefixes)
        if keep:
            width = mask.shape[1]
            for r, n in keep[0].items():
                at = width - len(seqs[r])
                keep[1](r, [(layer.keys[r:r + 1, :, at:at + n].clone(), layer.values[r:r + 1, :, at:at + n].clone())
                            for layer in cache.layers])
        rows = decode.Rows(self.tok, self.eos_ids, limits, stops, [len(s) for s in seqs], done)
        steps = max(limits)

        def dynamic():
            return decode.DynamicStep(self.model, self.cache_kw, cache, mask, next_pos, steps, mask4d=self._mask4d)

        step = None
        if self.static_decode:
            try:
                step = decode.StaticStep(self.model, self._decode_forward(), self.cache_kw, cache, mask,
                                         next_pos, steps, pool=self._static_pool)
            except Exception as exc:  # noqa: BLE001 - e.g. a cache layout StaticCache does not fit
                self._static_off(exc)
        decode.run(step or dynamic(), rows, logits, lambda x: self._pick(x, decoding, gen),
                   fallback=(lambda exc: self._static_off(exc) or dynamic()) if step else None)
        return rows.results  # type: ignore[return-value]

    def _decode_forward(self):
        """The model's forward for StaticStep: compiled on CUDA (CUDA graphs), eager elsewhere."""
        if self._compiled is None:
            self._compiled = self.model
            if self.device.startswith("cuda"):
                self._compiled = self.torch.compile(self.model, mode="reduce-overhead", fullgraph=False,
                                                    dynamic=False)
        return self._compiled

    def _static_off(self, exc) -> None:
        """The static/compiled step failed: this engine decodes dynamically from now on."""
        self.static_decode = False
        self._static_pool.clear()
        msg = str(exc).strip().splitlines()
        self.static_error = f"{type(exc).__name__}: {msg[0]}" if msg else type(exc).__name__

    def _pick(self, logits, decoding: Decoding, gen):
        torch = self.torch
        if decoding.temperature <= 0:
            return logits.float().argmax(-1)       # float32, as generate() does: bf16 argmax is slow on a CPU
        probs = torch.softmax(logits.float() / decoding.temperature, dim=-1)
        if decoding.top_p < 1.0:
            sp, si = probs.sort(dim=-1, descending=True)
            cum = sp.cumsum(-1)
            sp[(cum - sp) > decoding.top_p] = 0
            probs = torch.zeros_like(probs).scatter_(-1, si, sp)
            probs = probs / probs.sum(-1, keepdim=True)
        return torch.multinomial(probs, 1, generator=gen).view(-1)

    # -- hidden states ----------------------------------------------------------------------
    def hidden_states(self, texts: Sequence[str]):
        torch = self.torch
        import numpy as np

        encoded = [self.encode(t) for t in texts]
        out = [None] * len(texts)
        with self.lock, torch.inference_mode():
            for b in self._batches([len(e) for e in encoded]):
                self.tick()
                ids, mask, pos = self._pad([encoded[i] for i in b])
                res = self.model(input_ids=ids, attention_mask=mask, position_ids=pos,
                                 use_cache=False, output_hidden_states=True, logits_to_keep=1)
                top = res.hidden_states[-1][:, -1, :].float().cpu().numpy()
                for r, i in enumerate(b):
                    out[i] = top[r]
        return np.stack(out)


_ENGINES: dict[tuple, "TransformersEngine"] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(path: Path | str, **opts: Any) -> tuple["TransformersEngine", bool]:
    """One engine per model folder and options in a process (the engine serialises its calls under
    its own lock): the card's next suite, a re-judge or the next test reuses the loaded weights.
    Returns (engine, loaded now)."""
    key = (str(Path(path).resolve()), tuple(sorted(opts.items())))
    with _ENGINES_LOCK:
        if key in _ENGINES:
            return _ENGINES[key], False
        _ENGINES[key] = TransformersEngine(path, **opts)
        return _ENGINES[key], True


ENGINE_OPTIONS = ("dtype", "device", "threads", "max_batch", "batch_tokens", "prefix_min", "prefix_cache_mb",
                  "static_decode", "adapter")


class LocalBackend(EngineCalls, Backend):
    """Async face of a TransformersEngine: work runs in a worker thread, one batch at a time."""

    capabilities = frozenset({CHAT, COMPLETE, LOGPROB, CHAT_TEMPLATE, HIDDEN})
    batching = True
    streams = True          # generate/score take emit(i, result): results reach the runner per batch
    option_names = frozenset({"dtype", "device", "threads", "max_batch", "batch_tokens", "prefix_min",
                              "prefix_cache_mb", "static_decode", "think_tag", "adapter"})

    def __init__(self, name: str, decoding: Decoding | None = None, **options: Any):
        super().__init__(name, decoding, **options)
        self._engine: TransformersEngine | None = None
        self._engine_lock = threading.Lock()
        self._loaded_here = False
        self._rescored0 = (0, 0, 0)       # the shared engine's counters when this backend took it
        self._prefill0 = {"computed": 0, "saved": 0}
        self._folder: str | None = None
        resolve_override(self.options.get("threads"))    # a bad ROLEBOUND_THREADS fails here, before any work
        if self.options.get("static_decode") is not None:
            _flag(self.options["static_decode"])            # a bad value fails here too
        thread_policy().register()                       # other rolebound engines share the cores with us
        self._adapter: dict | None = None
        if self.options.get("adapter"):                 # a missing or foreign adapter fails here
            from .adapter import check_adapter

            self._adapter = check_adapter(self.options["adapter"], self.model_path())

    @property
    def adapter(self) -> dict | None:
        """The tuned adapter this backend merges into its model (path, sha), if any."""
        return self._adapter

    def model_path(self) -> Path:
        raise NotImplementedError

    @property
    def engine(self) -> TransformersEngine:
        with self._engine_lock:
            if self._engine is None:
                opts = {k: v for k, v in self.options.items()
                        if k in ENGINE_OPTIONS and v is not None}
                self._engine, self._loaded_here = shared_engine(self.model_path(), **opts)
                self._rescored0 = tuple(self._engine.rescored)
                self._prefill0 = dict(self._engine.prefill)
            return self._engine

    def identity(self) -> dict[str, Any]:
        ident = {"backend": self.backend, "model": self.name, "engine": ENGINE_REV,
                 "dtype": str(self.options.get("dtype") or "auto")}
        if self._adapter:       # a tuned model's replies are never the base model's cached ones
            ident["adapter"] = self._adapter["sha"]
        return ident

    def info(self) -> dict[str, Any]:
        e = self._engine
        if e is None:
            return {}
        import torch
        import transformers

        score_dtype = (f"float32 answers: float32 alone, or a bfloat16 first pass and a float32 re-score "
                       f"within {RESCORE_MARGIN} nats, whichever costs less here"
                       if e.score_fp32 and e.dtype != torch.float32 else
                       "float32" if e.score_fp32 else str(e.dtype).replace("torch.", ""))
        # threads: what the engine's worker thread last used (OpenMP keeps the count per thread)
        tp = thread_policy().info()
        return {"path": e.path, "dtype": str(e.dtype).replace("torch.", ""), "score_dtype": score_dtype,
                "rescored": {"float32": e.rescored[0] - self._rescored0[0],
                             "scored": e.rescored[1] - self._rescored0[1],
                             "float32_alone": e.rescored[2] - self._rescored0[2],
                             "fp32_cost": None if e._fp32_cost is None else round(e._fp32_cost, 2)},
                "device": e.device,
                "decode": ("static cache, compiled step" if e.static_decode and e.device.startswith("cuda") else
                           "static cache" if e.static_decode else "dynamic cache")
                + (f" (static step off: {e.static_error})" if e.static_error else ""),
                "prefix": {"min": e.prefix_min, "cache_mb": e.prefix_cache_mb if e.kv else 0},
                "prefill_tokens": {k: e.prefill[k] - self._prefill0.get(k, 0) for k in e.prefill},
                "load_s": round(e.load_s, 2) if self._loaded_here else 0.0, "torch": torch.__version__,
                "transformers": transformers.__version__, "threads": tp.get("threads") or torch.get_num_threads(),
                "thread_policy": tp}

    async def hidden_states(self, texts):
        return await asyncio.to_thread(self.engine.hidden_states, texts)

    def render_chat(self, messages, add_generation_prompt=True):
        """The chat template's text, cached on disk by the model folder and the messages: a
        resumed run re-renders prompts whose answers it already has without loading the model."""
        from ..store import cached_json, folder_identity

        if self._folder is None:
            self._folder = str(self.model_path())
        msgs = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages]
        return cached_json("chat-render", [folder_identity(self._folder), msgs, bool(add_generation_prompt)],
                           lambda: self.engine.render(messages, add_generation_prompt))

    def chat_template_source(self):
        """Cached on disk by the model folder, like render_chat: a finished re-run loads no model."""
        from ..store import cached_json, folder_identity

        if self._folder is None:
            self._folder = str(self.model_path())
        return cached_json("chat-template", [folder_identity(self._folder)],
                           lambda: getattr(self.engine.tok, "chat_template", None))
