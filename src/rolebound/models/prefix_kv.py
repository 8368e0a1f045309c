"""The torch engine's KV of shared prefixes, kept across calls within a byte budget.

CHARM asks some 70 questions under each persona and the runner sends them in several batches;
without this, every batch computes the persona again. An entry is the per-layer (keys, values) of
one token sequence. Attention is causal, so the first n positions of an entry are the KV of its
first n tokens: any prompt that shares n >= prefix_min leading tokens with an entry starts from
that slice, and only the rest of its prefix is computed. Least recently used entries go first.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

KV = list  # [(keys, values)] per layer, each (1, heads, tokens, head_dim)


def lcp(a, b, limit: int) -> int:
    """Length of the common prefix of a and b, at most `limit`."""
    n, m = 0, min(limit, len(a), len(b))
    while n < m and a[n] == b[n]:
        n += 1
    return n


def nbytes(kv: KV) -> int:
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in kv)


class PrefixKV:
    def __init__(self, budget_mb: float):
        self.budget = int(float(budget_mb) * (1 << 20))
        self.entries: OrderedDict[tuple[int, tuple[int, ...]], tuple[KV, int]] = OrderedDict()
        self.size = 0

    def best(self, owner: Any, tokens, limit: int | None = None) -> tuple[tuple | None, int]:
        """(key, n) of the entry of `owner` (a model) sharing the most leading tokens with
        `tokens`, n at most `limit`; (None, 0) when none shares any."""
        limit = len(tokens) if limit is None else limit
        found, most = None, 0
        for key in self.entries:
            if key[0] == id(owner):
                n = lcp(key[1], tokens, limit)
                if n > most:
                    found, most = key, n
        return found, most

    def take(self, key: tuple, n: int) -> KV:
        """The first n positions of an entry (views, not copies); marks it recently used."""
        self.entries.move_to_end(key)
        return [(k[:, :, :n], v[:, :, :n]) for k, v in self.entries[key][0]]

    def put(self, owner: Any, tokens, kv: KV) -> None:
        """Keep `kv` of `tokens`; entries it extends are dropped (a slice of it serves them)."""
        size = nbytes(kv)
        if size > self.budget:
            return
        tokens = tuple(tokens)
        for key in [k for k in self.entries if k[0] == id(owner) and tokens[:len(k[1])] == k[1]]:
            self.size -= self.entries.pop(key)[1]
        self.entries[(id(owner), tokens)] = (kv, size)
        self.size += size
        while self.size > self.budget:
            self.size -= self.entries.popitem(last=False)[1][1]

    def clear(self) -> None:
        self.entries.clear()
        self.size = 0
