"""The torch engine's decode loop: one loop per batch, whatever prefixes its rows came from.

`Rows` keeps each row's tokens, stop strings and limit, and hands a finished row's result out at
once. Two steppers run the forward passes:
- `DynamicStep`: transformers' DynamicCache; finished rows leave the batch (and the cache) in
  chunks, once a quarter of the batch has finished, so a batch is not copied at every finish;
- `StaticStep`: a preallocated StaticCache and a fixed-shape step, which CUDA can capture
  (torch.compile, mode "reduce-overhead": CUDA graphs). Rows keep their slot to the end of the
  batch (a captured step has one shape); a finished row's result still goes out when it finishes.
"""

from __future__ import annotations

from typing import Any, Callable

from .base import GenResult
from .engine_calls import check_stop

STATIC_ROUND = 256       # StaticCache lengths are rounded up to this, so few shapes are compiled


class Rows:
    """The rows of one batch: tokens produced, finish reasons, results emitted as rows finish."""

    def __init__(self, tok, eos_ids: set[int], limits: list[int], stops: list[list[str]],
                 prompt_tokens: list[int], done: Callable[[int, GenResult], None] | None = None):
        n = len(limits)
        self.tok, self.eos_ids, self.limits, self.stops = tok, eos_ids, limits, stops
        self.prompt_tokens = prompt_tokens
        self.produced: list[list[int]] = [[] for _ in range(n)]
        self.results: list[GenResult | None] = [None] * n
        self.done = done
        self.left = n

    def take(self, alive: list[int], toks: list[int]) -> None:
        """The step's token for each batch row (`alive[r]`: its row); rows already finished skip it."""
        for row, t in zip(alive, toks):
            if self.results[row] is not None:
                continue
            if t in self.eos_ids:
                self._finish(row, "stop")
                continue
            out = self.produced[row]
            out.append(t)
            if self.stops[row]:
                text = self.tok.decode(out, skip_special_tokens=True)
                hit = min((text.find(s) for s in self.stops[row] if s and s in text), default=-1)
                if hit >= 0:
                    self._finish(row, "stop", text[:hit])
                    continue
            if len(out) >= self.limits[row]:
                self._finish(row, "length")

    def finished(self, row: int) -> bool:
        return self.results[row] is not None

    def _finish(self, row: int, reason: str, text: str | None = None) -> None:
        if text is None:
            text = self.tok.decode(self.produced[row], skip_special_tokens=True)
        self.results[row] = GenResult(text=text, prompt_tokens=self.prompt_tokens[row],
                                      completion_tokens=len(self.produced[row]), finish_reason=reason)
        self.left -= 1
        if self.done:
            self.done(row, self.results[row])


class DynamicStep:
    """Decode steps on a DynamicCache; the attention mask is preallocated for every step.

    mask4d: hand the model SDPA's own mask, (rows, 1, 1, keys) with True where a row attends,
    which transformers takes as it is; otherwise it builds that from the 2D mask at every step.
    Only for SDPA on full attention (the caller checks): a one-token query attends to every
    earlier key of its row, so the padding mask is the whole mask."""

    def __init__(self, model, cache_kw: str, cache, mask, next_pos, steps: int, mask4d: bool = False):
        import torch

        self.model, self.cache_kw, self.cache = model, cache_kw, cache
        n, width = mask.shape
        self.width = width
        self.mask4d = mask4d
        self.mask = torch.zeros((n, width + steps), dtype=torch.bool if mask4d else mask.dtype, device=mask.device)
        self.mask[:, :width] = mask
        self.pos = next_pos.clone()
        self.alive = list(range(n))          # the row of each batch row

    def __call__(self, tok):
        self.mask[:, self.width] = 1
        self.width += 1
        mask = self.mask[:, None, None, :self.width] if self.mask4d else self.mask[:, :self.width]
        logits = self.model(input_ids=tok.view(-1, 1), attention_mask=mask,
                            position_ids=self.pos.view(-1, 1), use_cache=True,
                            **{self.cache_kw: self.cache}).logits[:, -1, :]
        self.pos += 1
        return logits

    def prune(self, rows: Rows, tok):
        """Drop finished rows once they are a quarter of the batch (at least one); returns `tok`
        for the rows that stay."""
        import torch

        keep = [r for r, row in enumerate(self.alive) if not rows.finished(row)]
        if len(self.alive) - len(keep) < max(1, len(self.alive) // 4):
            return tok
        sel = torch.tensor(keep, device=tok.device)
        self.cache.batch_select_indices(sel)
        self.mask, self.pos = self.mask[sel], self.pos[sel]
        self.alive = [self.alive[r] for r in keep]
        return tok[sel]


class StaticStep:
    """Decode steps on a StaticCache filled from the prefill's DynamicCache (left untouched, so a
    failed first step can go on dynamically). `compiled` is the model's forward to call (a
    torch.compile of it on CUDA, the model itself elsewhere). `pool` keeps the last StaticCache
    for the next batch of the same shape: its tensors keep their addresses, so CUDA graphs
    captured on them are replayed, not captured again."""

    def __init__(self, model, compiled, cache_kw: str, cache, mask, next_pos, steps: int,
                 pool: dict | None = None):
        import torch
        from transformers import StaticCache
        from transformers.cache_utils import StaticLayer

        n, width = mask.shape
        total = -(-(width + steps) // STATIC_ROUND) * STATIC_ROUND
        shape = (n, total, cache.layers[0].keys.dtype)
        pool = {} if pool is None else pool
        static = pool.pop(shape, None)
        pool.clear()                                     # one kept at a time: the memory of one batch
        if static is None:
            static = StaticCache(config=model.config, max_cache_len=total)
            if len(static.layers) != len(cache.layers) or any(type(x) is not StaticLayer for x in static.layers):
                raise TypeError("not a plain full-attention cache")
        else:
            static.reset()
        pool[shape] = static
        for layer, src in zip(static.layers, cache.layers):
            layer.update(src.keys, src.values)           # allocates, copies the first `width` positions
        self.forward, self.cache_kw, self.cache = compiled, cache_kw, static
        self.width = width
        self.mask = torch.zeros((n, total), dtype=mask.dtype, device=mask.device)
        self.mask[:, :width] = mask
        self.pos = next_pos.clone().view(-1, 1)
        self.alive = list(range(n))
        self.cuda = mask.device.type == "cuda"

    def __call__(self, tok):
        import torch

        self.mask[:, self.width] = 1
        self.width += 1
        if self.cuda and hasattr(torch.compiler, "cudagraph_mark_step_begin"):
            torch.compiler.cudagraph_mark_step_begin()
        logits = self.forward(input_ids=tok.view(-1, 1), attention_mask=self.mask, position_ids=self.pos,
                              use_cache=True, **{self.cache_kw: self.cache}).logits[:, -1, :]
        logits = logits.to(torch.float32, copy=True)     # out of the graph's buffers before the next replay
        self.pos += 1
        return logits

    def prune(self, rows: Rows, tok):
        return tok


def run(step, rows: Rows, logits, pick: Callable[[Any], Any], fallback: Callable[[Exception], Any] | None = None):
    """Pick, record, prune, step, until every row has finished. `fallback(exc)` gives the stepper
    to go on with when `step` fails before its first step returned."""
    stepped = False
    while True:
        check_stop()                                 # a stopped run ends its batch here (loop.py)
        tok = pick(logits)
        rows.take(step.alive, tok.tolist())          # one host sync a step
        if rows.left == 0:
            return step
        tok = step.prune(rows, tok)
        try:
            logits = step(tok)
        except Exception as exc:  # noqa: BLE001 - the static step's first call: go on dynamically
            if stepped or fallback is None:
                raise
            step = fallback(exc)
            logits = step(tok)
        stepped = True
