"""llama.cpp engine: `--model llamacpp:PATH.gguf`, and the bundled models with `--engine llamacpp`.

It runs the GGUF as it is (no dequantized copy): a third of the torch engine's memory, and
decoding reads 1.1 GB per token instead of 3.1 GB on Qwen 1.5B (../shared/notes/llama-cpp.md).
It uses llama.cpp's batch API directly, not `llama_cpp.Llama`, because `Llama` holds one sequence:
- several sequences in one `llama_decode` (up to max_batch), each with its own seq id, so one
  pass over the weights decodes them all; a finished row's slot goes to the next waiting prompt
  at once (continuous batching);
- one resident prefix (seq 0) kept across calls: the longest prefix the rows of a batch share
  (a persona, a system prompt, a dialogue so far), extended or cut as batches come and shared
  with every row by `llama_memory_seq_cp` (cells are shared, not copied); bounded by prefix_max
  tokens; the prefill tokens it saves are counted for the manifest;
- log-likelihoods from the logits of exactly the positions a continuation needs, in float64;
- the chat template from the GGUF, rendered by transformers' own Jinja renderer with the GGUF's
  special tokens, so the text equals what the torch engine renders for the same model;
- temperature, top_p and seed applied here (numpy), the same rule as the torch engine's sampler.
"""

from __future__ import annotations

import ctypes
import threading
import time
from pathlib import Path
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from ..errors import BackendError
from ..records import Decoding, Message
from ..threads import policy as thread_policy
from ..threads import resolve_override
from . import LLAMACPP_HINT as INSTALL_HINT
from .engine_calls import EngineCalls, check_stop, split_all
from .base import CHAT, CHAT_TEMPLATE, COMPLETE, LOGPROB, Backend, GenResult, ScoreRequest, ScoreResult

ENGINE_REV = 2          # part of every cache key of this engine; bump when answers may change
N_CTX, PREFIX_MAX = 8192, 4096      # default KV cells, and those kept for the resident prefix
PREFIX_SEQ = 0          # the resident prefix lives in this sequence; rows use 1..max_batch


def import_llama_cpp():
    try:
        import llama_cpp
        from llama_cpp import _internals
    except ImportError:
        raise BackendError(INSTALL_HINT) from None
    return llama_cpp, _internals


def flash_attn_setting(value) -> bool | None:
    """--backend-opt flash_attn=true/false (text) or a bool; None: llama.cpp decides (auto)."""
    if value is None or isinstance(value, bool):
        return value
    v = str(value).strip().lower()
    if v in ("auto", ""):
        return None
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise BackendError(f"llamacpp: flash_attn must be true, false or auto, not {value!r}")


def available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None


def _lcp(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    limit = min(limit, len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


def log_softmax_at(logits, tokens: Sequence[int]) -> list[float]:
    """log p(token) for each token, from one position's logits (float64 for exactness)."""
    import numpy as np

    x = logits.astype(np.float64)
    m = x.max()
    lse = m + np.log(np.exp(x - m).sum())
    return [float(x[t] - lse) for t in tokens]


def sample(logits, decoding: Decoding, rng) -> int:
    """Greedy at temperature 0; else softmax(logits / T), cut to the top_p nucleus."""
    import numpy as np

    if decoding.temperature <= 0:
        return int(np.argmax(logits))
    x = logits.astype(np.float64) / decoding.temperature
    p = np.exp(x - x.max())
    p /= p.sum()
    if decoding.top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        sp = p[order]
        keep = (np.cumsum(sp) - sp) <= decoding.top_p        # same cut as the torch engine
        q = np.zeros_like(p)
        q[order[keep]] = sp[keep]
        p = q / q.sum()
    return int(rng.choice(len(p), p=p))


class ChatTemplate:
    """The GGUF's `tokenizer.chat_template`, rendered as transformers renders it (same function,
    same special-token names), so both engines see the same prompt text."""

    def __init__(self, source: str | None, special: dict[str, str]):
        self.source = source
        self.special = special

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        if not self.source:
            text = "".join(f"{m.role}: {m.content}\n" for m in messages)     # as the torch engine
            return text + ("assistant:" if add_generation_prompt else "")
        from transformers.utils.chat_template_utils import render_jinja_template

        msgs = [m.model_dump() if hasattr(m, "model_dump") else dict(m) for m in messages]
        rendered, _ = render_jinja_template(conversations=[msgs], chat_template=self.source,
                                            add_generation_prompt=add_generation_prompt, **self.special)
        return rendered[0]


class LlamaCppEngine:
    """One model and one context; every method is synchronous and runs under one lock."""

    def __init__(self, path: str | Path, *, threads: int | None = None, n_ctx: int = N_CTX,
                 max_batch: int = 8, prefix_min: int = 32, prefix_max: int = PREFIX_MAX, n_batch: int = 512,
                 flash_attn: bool | str | None = None):
        t0 = time.perf_counter()
        lc, internals = import_llama_cpp()
        self.lc = lc
        self.path = str(path)
        if not Path(self.path).is_file():
            raise BackendError(f"llamacpp: no GGUF file at {self.path}")
        self.threads_forced, self.threads_source = resolve_override(threads)
        self.threads, _ = thread_policy().current(self.threads_forced, self.threads_source)
        _quiet(lc)
        lc.llama_backend_init()
        self.model = internals.LlamaModel(path_model=self.path, params=lc.llama_model_default_params(),
                                          verbose=False)
        self.max_batch = max(1, int(max_batch))
        self.n_batch = int(n_batch)
        cp = lc.llama_context_default_params()
        cp.n_ctx = int(n_ctx)
        cp.n_batch = cp.n_ubatch = self.n_batch
        cp.n_seq_max = self.max_batch + 1
        cp.kv_unified = True          # one cell pool: the prefix's cells are shared by every row
        # Flash attention: llama.cpp's auto (on, on CPU) by default. Neither setting keeps a row's
        # logits the same in every batch, but auto changed fewer greedy texts (docs/engines.md,
        # "Continuous batching"); off on request.
        self.flash_attn = flash_attn_setting(flash_attn)
        cp.flash_attn_type = {None: lc.LLAMA_FLASH_ATTN_TYPE_AUTO, True: lc.LLAMA_FLASH_ATTN_TYPE_ENABLED,
                              False: lc.LLAMA_FLASH_ATTN_TYPE_DISABLED}[self.flash_attn]
        cp.n_threads = cp.n_threads_batch = self.threads
        cp.no_perf = True
        self.ctx = internals.LlamaContext(model=self.model, params=cp, verbose=False)
        self.n_ctx = self.ctx.n_ctx()
        self.mem = self.ctx.memory
        self.batch = internals.LlamaBatch(n_tokens=self.n_batch, embd=0, n_seq_max=1, verbose=False)
        self.n_vocab = self.model.n_vocab()
        self.prefix_min = int(prefix_min)
        self.prefix_max = min(int(prefix_max), self.n_ctx // 2)
        self.resident: list[int] = []     # tokens held in PREFIX_SEQ
        self.prefill = {"computed": 0, "saved": 0}
        self.clamped: dict[str, int] = {"calls": 0}      # max_tokens cut to the context's room
        self.lock = threading.Lock()
        self.closing = threading.Event()
        meta = self.model.metadata()
        self.template = ChatTemplate(meta.get("tokenizer.chat_template"), self._special(meta))
        self.load_s = time.perf_counter() - t0

    def _special(self, meta: dict[str, str]) -> dict[str, str]:
        out = {}
        for name, key in (("bos_token", "bos"), ("eos_token", "eos"), ("unk_token", "unknown"),
                          ("pad_token", "padding")):
            tid = meta.get(f"tokenizer.ggml.{key}_token_id")
            if tid is not None and int(tid) >= 0:
                out[name] = self.model.token_get_text(int(tid))
        return out

    def close(self) -> None:
        # A cancelled call (Ctrl-C, SIGTERM) leaves its worker thread inside llama_decode: freeing the
        # context under it crashed the process (exit 139). Ask it to stop, wait for it, then free.
        self.closing.set()
        with self.lock:
            for obj in (self.batch, self.ctx, self.model):
                obj.close()

    # -- text -------------------------------------------------------------------------------
    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        return self.template.render(messages, add_generation_prompt)

    def encode(self, text: str) -> list[int]:
        # special=True: the template's markers (<|im_start|>) are one token each, as in HF
        return self.model.tokenize(text.encode("utf-8"), add_bos=False, special=True) if text else []

    def decode(self, tokens: Sequence[int]) -> str:
        return self.model.detokenize(list(tokens), special=False).decode("utf-8", errors="replace")

    def is_eog(self, token: int) -> bool:
        return bool(self.lc.llama_vocab_is_eog(self.model.vocab, token))

    # -- the KV cache -----------------------------------------------------------------------
    def _logits(self, i: int):
        import numpy as np

        ptr = self.lc.llama_get_logits_ith(self.ctx.ctx, i)
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)),
                                     shape=(self.n_vocab,)).copy()

    def _eval(self, items: list[tuple[int, int, int, bool]], on=None) -> None:
        """items: (seq, pos, token, want logits), decoded in slices of n_batch tokens;
        on(index in items, logits) for each wanted one (read at once: logits are not kept)."""
        b = self.batch.batch
        for start in range(0, len(items), self.n_batch):
            if self.closing.is_set():
                raise BackendError("llamacpp: the engine is closing")
            check_stop()
            part = items[start:start + self.n_batch]
            b.n_tokens = len(part)
            for j, (seq, pos, tok, want) in enumerate(part):
                b.token[j], b.pos[j], b.n_seq_id[j] = tok, pos, 1
                b.seq_id[j][0] = seq
                b.logits[j] = want
            rc = self.lc.llama_decode(self.ctx.ctx, b)
            if rc != 0:
                raise BackendError(f"llamacpp: llama_decode returned {rc} (n_ctx {self.n_ctx} too small?)")
            for j, (_, _, _, want) in enumerate(part):
                if want:
                    on(start + j, self._logits(j))

    def _drop_rows(self, n: int) -> None:
        for s in range(1, n + 1):
            self.lc.llama_memory_seq_rm(self.mem, s, -1, -1)

    def _set_prefix(self, target: list[int]) -> int:
        """Make the resident prefix equal `target`, keeping what it already shares. Returns how
        many of its tokens were resident already."""
        keep = _lcp(self.resident, target, len(target))
        if keep < self.prefix_min:
            keep = 0
        self.lc.llama_memory_seq_rm(self.mem, PREFIX_SEQ, keep, -1)
        new = target[keep:]
        if new:
            self._eval([(PREFIX_SEQ, keep + k, t, False) for k, t in enumerate(new)])
        self.resident = list(target)
        self.prefill["computed"] += len(new)
        return keep

    def _start_rows(self, seqs: list[list[int]], firsts: list[int]) -> int:
        """Share the rows' common prefix (never past a row's first read position) with every
        row through the resident prefix; returns its length (0: no reuse)."""
        plen = min(firsts)
        for s in seqs[1:]:
            plen = _lcp(seqs[0], s, plen)
        plen = min(plen, self.prefix_max)
        if not self.prefix_min or plen < self.prefix_min:
            self.lc.llama_memory_seq_rm(self.mem, PREFIX_SEQ, -1, -1)
            self.resident = []
            return 0
        kept = self._set_prefix(seqs[0][:plen])
        for r in range(len(seqs)):
            self.lc.llama_memory_seq_cp(self.mem, PREFIX_SEQ, r + 1, 0, plen)
        self.prefill["saved"] += len(seqs) * plen - (plen - kept)
        return plen

    def _runs(self, seqs: list[list[int]], firsts: list[int]) -> list[list[int]]:
        """Indices in token order (sharers adjoin), cut into runs that share >= prefix_min
        tokens; a run also ends where the next row would halve what it shares (a persona's
        questions, not every persona under one system prompt)."""
        runs, cur, shared = [], [], 0
        for i in sorted(range(len(seqs)), key=lambda i: seqs[i]):
            if cur:
                s = _lcp(seqs[cur[0]], seqs[i], min(shared, firsts[i]))
                if self.prefix_min and s >= self.prefix_min and (len(cur) < 2 or s >= shared // 2):
                    cur.append(i)
                    shared = s
                    continue
                runs.append(cur)
            cur, shared = [i], firsts[i]
        if cur:
            runs.append(cur)
        return runs

    def _chunks(self, seqs: list[list[int]], firsts: list[int], extra: list[int]) -> list[list[int]]:
        """Rows for one batch each: a run of sharers (split when full or out of KV cells), and
        the rows that share nothing packed together."""
        budget = self.n_ctx - self.prefix_max
        for i, s in enumerate(seqs):
            if len(s) + extra[i] > budget:
                raise BackendError(f"llamacpp: a prompt of {len(s)} tokens plus {extra[i]} new ones does "
                                   f"not fit n_ctx {self.n_ctx} less prefix_max {self.prefix_max} "
                                   "(--backend-opt n_ctx=...)")
        chunks: list[list[int]] = []
        singles: list[int] = []
        for run in self._runs(seqs, firsts):
            if len(run) == 1:
                singles.extend(run)
                continue
            plen = min(firsts[i] for i in run)
            for i in run[1:]:
                plen = _lcp(seqs[run[0]], seqs[i], plen)
            chunks.extend(self._pack(run, seqs, extra, min(plen, self.prefix_max), budget))
        chunks.extend(self._pack(singles, seqs, extra, 0, budget))
        return chunks

    def _pack(self, rows: list[int], seqs, extra, plen: int, budget: int) -> list[list[int]]:
        out, cur, cells = [], [], 0
        for i in rows:
            need = len(seqs[i]) - plen + extra[i]
            if cur and (len(cur) >= self.max_batch or cells + need > budget):
                out.append(cur)
                cur, cells = [], 0
            cur.append(i)
            cells += need
        if cur:
            out.append(cur)
        return out

    # -- scoring ----------------------------------------------------------------------------
    def score(self, requests: Sequence[ScoreRequest], emit=None) -> list[ScoreResult]:
        with self._held():      # tokenizing too: a call queued past close() must not reach the model
            return self._score(requests, emit)

    def _score(self, requests: Sequence[ScoreRequest], emit=None) -> list[ScoreResult]:
        from .local import TransformersEngine

        split_context = TransformersEngine._split_context     # the torch engine's rules; uses render/encode
        out, prepared = split_all(lambda req: split_context(self, req), requests, emit)
        rows: list[tuple[int, int, list[int], int, list[list[int]]]] = []  # request, option, tokens, first, targets
        for i, (ctx, conts) in prepared.items():
            if all(len(c) == 1 for c in conts):          # one row, read at its last position
                rows.append((i, -1, ctx, len(ctx) - 1, [[c[0] for c in conts]]))
            else:                                        # a row per option: ctx + option[:-1]
                rows.extend((i, k, ctx + c[:-1], len(ctx) - 1, [[t] for t in c]) for k, c in enumerate(conts))
        lps: dict[int, list[float]] = {i: [0.0] * len(conts) for i, (_, conts) in prepared.items()}
        left = {i: sum(1 for r in rows if r[0] == i) for i in prepared}
        for chunk in self._chunks([r[2] for r in rows], [r[3] for r in rows], [0] * len(rows)):
            for j, vals in zip(chunk, self._score_chunk([rows[j] for j in chunk])):
                i, k = rows[j][0], rows[j][1]
                if k < 0:
                    lps[i] = vals
                else:
                    lps[i][k] = sum(vals)
                left[i] -= 1
                if left[i] == 0:
                    ctx, conts = prepared[i]
                    out[i] = ScoreResult(logprobs=lps[i], token_counts=[len(c) for c in conts],
                                         prompt_tokens=len(ctx))
                    if emit:
                        emit(i, out[i])
        return out  # type: ignore[return-value]

    def _score_chunk(self, rows) -> list[list[float]]:
        """Log-probs of each row's targets: the tokens read at positions first, first+1, ..."""
        plen = self._start_rows([r[2] for r in rows], [r[3] for r in rows])
        items, reads = [], {}
        for r, (_, _, toks, first, targets) in enumerate(rows):
            for pos in range(plen, len(toks)):
                if pos >= first:
                    reads[len(items)] = (r, targets[pos - first])
                items.append((r + 1, pos, toks[pos], pos >= first))
        self.prefill["computed"] += len(items)
        res: list[list[float]] = [[] for _ in rows]

        def on(k, logits):
            r, targets = reads[k]
            res[r].extend(log_softmax_at(logits, targets))

        try:
            self._eval(items, on)
        finally:
            self._drop_rows(len(rows))
        return res

    # -- generation -------------------------------------------------------------------------
    def generate(self, requests, decoding: Decoding, emit=None) -> list[GenResult]:
        with self._held():
            return self._generate(requests, decoding, emit)

    def _generate(self, requests, decoding: Decoding, emit=None) -> list[GenResult]:
        import numpy as np

        encoded = [self.encode(self.render(r.messages) if r.messages else (r.prompt or "")) for r in requests]
        limits = [self._room(len(e), int(r.max_tokens or decoding.max_tokens)) for e, r in zip(encoded, requests)]
        stops = [r.stop if r.stop is not None else (decoding.stop or []) for r in requests]
        out: list[GenResult | None] = [None] * len(requests)
        rng = np.random.default_rng(int(decoding.seed))
        for i in [i for i, e in enumerate(encoded) if not e]:
            out[i] = GenResult(error="llamacpp: empty prompt")
            if emit:
                emit(i, out[i])
        live = [i for i, e in enumerate(encoded) if e]

        def done(j: int, res: GenResult) -> None:
            out[live[j]] = res
            if emit:
                emit(live[j], res)

        seqs = [encoded[i] for i in live]
        self._stream(seqs, [limits[i] for i in live], [stops[i] for i in live], decoding, rng, done)
        return out  # type: ignore[return-value]

    def _room(self, prompt: int, limit: int) -> int:
        """A cap past the context (RoleCapBench's 32,768 new tokens on an 8,192 context) becomes the
        room the context leaves: no reply can be longer anyway. Counted in info() as a departure."""
        room = self.n_ctx - self.prefix_max - prompt
        if limit <= room or room < 1:
            return limit                # too long a prompt is refused by _chunks, with its numbers
        self.clamped["calls"] += 1
        self.clamped["to_min"] = min(self.clamped.get("to_min", room), room)
        return room

    def _groups(self, seqs, extra) -> list[tuple[list[int], int]]:
        """(rows, shared prefix length) in decoding order: each run of sharers, then the rest
        one by one, each its own prefix (kept resident for a later call that shares it)."""
        firsts = [len(s) - 1 for s in seqs]
        self._chunks(seqs, firsts, extra)          # refuses a prompt that cannot fit, with its numbers
        groups, singles = [], []
        for run in self._runs(seqs, firsts):
            if len(run) == 1:
                plen = min(firsts[run[0]], self.prefix_max)
                singles.append((run, plen if self.prefix_min and plen >= self.prefix_min else 0))
                continue
            plen = min(firsts[i] for i in run)
            for i in run[1:]:
                plen = _lcp(seqs[run[0]], seqs[i], plen)
            groups.append((run, min(plen, self.prefix_max)))
        return groups + singles

    def _stream(self, seqs, limits, stops, decoding: Decoding, rng, done) -> None:
        """Continuous batching: up to max_batch rows decode together, and a row that finishes
        hands its sequence slot to the next waiting prompt at once (its prompt is read before
        the next decode step). A run's shared prefix sits in the resident prefix while its rows start (cells
        copied, not recomputed); rows keep those cells after the prefix moves on. KV cells are
        reserved per row (prompt past the prefix + max new tokens) within n_ctx - prefix_max."""
        groups = self._groups(seqs, limits)
        queue = [(g, r) for g, (rows, _) in enumerate(groups) for r in rows]
        budget = self.n_ctx - self.prefix_max
        free = list(range(self.max_batch, 0, -1))
        rows: dict[int, dict[str, Any]] = {}            # seq id -> the row decoding in it
        live = [0] * len(groups)                        # rows of each group in flight
        held = [0] * len(groups)                        # prefix cells a group's rows hold outside the resident
        resident, used, q = None, 0, 0

        def finish(seq: int, reason: str, text: str | None = None) -> None:
            nonlocal used
            row = rows.pop(seq)
            self.lc.llama_memory_seq_rm(self.mem, seq, -1, -1)
            free.append(seq)
            used -= row["need"]
            g = row["group"]
            live[g] -= 1
            if not live[g]:
                used -= held[g]
                held[g] = 0
            toks = row["out"]
            done(row["r"], GenResult(text=text if text is not None else self.decode(toks),
                                     prompt_tokens=len(seqs[row["r"]]), completion_tokens=len(toks),
                                     finish_reason=reason))

        try:
            while q < len(queue) or rows:
                step, fill = self._sample_rows(rows, seqs, limits, stops, decoding, rng, finish), []
                while q < len(queue) and free:           # start waiting prompts in the free slots
                    g, r = queue[q]
                    plen = groups[g][1]
                    need = len(seqs[r]) - plen + limits[r]
                    moved = groups[resident][1] if plen and g != resident and resident is not None \
                        and live[resident] and not held[resident] else 0
                    if rows and used + need + moved > budget:
                        break
                    if plen and g != resident:
                        if moved:                        # its rows keep the old prefix's cells
                            held[resident] = moved
                            used += moved
                        kept = self._set_prefix(seqs[r][:plen])
                        self.prefill["saved"] -= plen - kept
                        resident = g
                    seq = free.pop()
                    if plen:
                        self.lc.llama_memory_seq_cp(self.mem, PREFIX_SEQ, seq, 0, plen)
                        self.prefill["saved"] += plen
                    s = seqs[r]
                    fill.extend((seq, pos, s[pos], pos == len(s) - 1) for pos in range(plen, len(s)))
                    self.prefill["computed"] += len(s) - plen
                    rows[seq] = {"r": r, "group": g, "need": need, "out": []}
                    live[g] += 1
                    used += need
                    q += 1
                # prompts and decode steps in separate passes: a row's logits must not depend on
                # what shares its pass (the kernels differ for a long batch), or batching would
                # change answers
                for part in (fill, step):
                    if part:
                        self._eval(part, lambda k, v, _p=part: rows[_p[k][0]].__setitem__("logits", v))
        finally:
            self._drop_rows(self.max_batch)

    def _sample_rows(self, rows, seqs, limits, stops, decoding: Decoding, rng, finish) -> list:
        """One token for every row that has logits; finished rows go to `finish`, the others'
        tokens come back as the next decode step's items."""
        step = []
        for seq, row in list(rows.items()):
            r = row["r"]
            t = sample(row.pop("logits"), decoding, rng)
            if self.is_eog(t):
                finish(seq, "stop")
                continue
            row["out"].append(t)
            if stops[r]:
                text = self.decode(row["out"])
                hit = min((text.find(s) for s in stops[r] if s and s in text), default=-1)
                if hit >= 0:
                    finish(seq, "stop", text[:hit])
                    continue
            if len(row["out"]) >= limits[r]:
                finish(seq, "length")
                continue
            step.append((seq, len(seqs[r]) + len(row["out"]) - 1, t, True))
        return step

    @contextmanager
    def _held(self) -> Iterator[None]:
        """The engine for one call. Calls queue on the lock in the executor's threads; one that gets
        it after close() must not touch the freed context."""
        with self.lock:
            if self.closing.is_set():
                raise BackendError("llamacpp: the engine is closing")
            self._tick()
            yield

    def _tick(self) -> None:
        """Before each call: the thread policy's count (only an adaptive one changes)."""
        n, _ = thread_policy().current(self.threads_forced, self.threads_source)
        if n != self.threads:
            self.threads = n
            self.lc.llama_set_n_threads(self.ctx.ctx, n, n)


def _quiet(lc) -> None:
    """llama.cpp logs every load to stderr; keep it for errors only."""
    try:
        from llama_cpp import _logger

        _logger.logger.setLevel(40)
        lc.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))
    except Exception:  # noqa: BLE001 - logging is cosmetic
        pass


class LlamaCppBackend(EngineCalls, Backend):
    """Async face of a LlamaCppEngine (`--model llamacpp:PATH.gguf`): work runs in a worker thread."""

    backend = "llamacpp"
    description = "a local GGUF file on llama.cpp (name: its path; optional extra: `make llamacpp`)"
    capabilities = frozenset({CHAT, COMPLETE, LOGPROB, CHAT_TEMPLATE})
    batching = True
    streams = True
    option_names = frozenset({"threads", "n_ctx", "max_batch", "prefix_min", "prefix_max", "flash_attn", "think_tag"})
    ENGINE_OPTS = ("threads", "n_ctx", "max_batch", "prefix_min", "prefix_max", "flash_attn")

    defer_missing = False       # a bundled model defers it to the first load (BundledLlamaCpp)

    def __init__(self, name: str, decoding: Decoding | None = None, **options: Any):
        self._missing: str | None = getattr(self, "_missing", None)
        try:
            import_llama_cpp()                 # missing extra: one line, before any work
        except BackendError as exc:
            if not self.defer_missing:
                raise
            self._missing = self._missing or str(exc)
        super().__init__(name, decoding, **options)
        self._engine: LlamaCppEngine | None = None
        self._closed_info: dict[str, Any] = {}
        self._engine_lock = threading.Lock()
        flash_attn_setting(self.options.get("flash_attn"))     # a bad value: one line, before any work
        resolve_override(self.options.get("threads"))
        thread_policy().register()

    def context_window(self) -> int:
        # the engine keeps prefix_max cells for the resident prefix (LlamaCppEngine._chunks)
        n_ctx = int(self.options.get("n_ctx") or N_CTX)
        return n_ctx - min(int(self.options.get("prefix_max") or PREFIX_MAX), n_ctx // 2)

    def gguf(self) -> Path:
        path = Path(self.name).expanduser()
        if path.suffix != ".gguf" or not path.is_file():
            raise BackendError(f"llamacpp backend needs a local .gguf file; '{self.name}' is not one")
        return path.resolve()

    @property
    def engine(self) -> LlamaCppEngine:
        with self._engine_lock:
            if self._engine is None:
                if self._missing:
                    raise BackendError(self._missing)
                opts = {k: v for k, v in self.options.items() if k in self.ENGINE_OPTS and v is not None}
                self._engine = LlamaCppEngine(self.gguf(), **opts)
            return self._engine

    def identity(self) -> dict[str, Any]:
        fa = flash_attn_setting(self.options.get("flash_attn"))
        # a set flash_attn may change answers (batch-dependent kernels when off): part of the cache key
        return {"backend": self.backend, "model": self.name,
                "engine": f"llamacpp-{ENGINE_REV}" + ("" if fa is None else f"-fa-{'on' if fa else 'off'}")}

    def info(self) -> dict[str, Any]:
        e = self._engine
        if e is None:
            return dict(self._closed_info)      # the manifest is written after the engine closed
        import llama_cpp

        return {"engine": "llamacpp", "path": e.path, "llama_cpp_python": llama_cpp.__version__,
                "n_ctx": e.n_ctx, "max_batch": e.max_batch, "threads": e.threads,
                "flash_attn": {None: "auto", True: "on", False: "off"}[e.flash_attn],
                "load_s": round(e.load_s, 2),
                "prefix": {"min": e.prefix_min, "max": e.prefix_max},
                "prefill_tokens": dict(e.prefill), "max_tokens_cut_to_context": dict(e.clamped),
                "thread_policy": thread_policy().info()}

    def render_chat(self, messages, add_generation_prompt=True):
        return self.engine.render(messages, add_generation_prompt)

    def chat_template_source(self):
        return self.engine.template.source

    async def close(self) -> None:
        if self._engine is not None:
            self._closed_info = self.info()
            self._engine.close()
            self._engine = None


class BundledLlamaCpp(LlamaCppBackend):
    """A bundled model on the llamacpp engine (`--model bundled:NAME --engine llamacpp`)."""

    backend = "bundled"
    option_names = LlamaCppBackend.option_names
    # the GGUF or llama-cpp-python missing fails at the first load, not here: a run whose every
    # call the response cache answers (replies carried in, bench/carried/) needs neither
    defer_missing = True

    def __init__(self, name: str, decoding: Decoding | None = None, *, gguf: Path | None,
                 missing: str | None = None, **options: Any):
        self._gguf = gguf        # bundled.create checked the name and looked for the file
        self._missing = missing  # why it cannot load (the GGUF's install line), or None
        super().__init__(name, decoding, **options)

    def gguf(self) -> Path:
        return self._gguf
