"""Other orders of a multiple-choice question's options: cyclic shifts (`--set permutations=K`) and
a fixed, seeded permutation that moves given positions (CHARM's override control).

Each returns `order`: order[p] is the index, in the paper's order, of the option shown at
position p (what rolebound.stats.shifted_orders reads back as `meta.order`)."""

from __future__ import annotations

import hashlib
import random
from typing import Sequence, TypeVar

T = TypeVar("T")


def cyclic(n: int, shift: int) -> list[int]:
    """Shift s: the option at position i is shown at position (i + s) mod n."""
    return [(p - shift) % n for p in range(n)]


def moved(key: str, n: int, away_from: Sequence[int], target: int) -> list[int]:
    """A permutation fixed by `key` (no process-dependent hashing) under which option `target`
    (paper-order index) is shown at none of the positions `away_from` (when n allows)."""
    seed = int(hashlib.sha256(key.encode("utf-8")).hexdigest()[:16], 16)
    rng = random.Random(seed)
    free = [p for p in range(n) if p not in set(away_from)] or list(range(n))
    for _ in range(100):
        order = list(range(n))
        rng.shuffle(order)
        if order.index(target) in free:
            return order
    order = list(range(n))                       # n tiny: put the target on the first free position
    order.remove(target)
    order.insert(free[0], target)
    return order


def apply(options: Sequence[T], order: Sequence[int]) -> list[T]:
    return [options[i] for i in order]


def shown_position(order: Sequence[int], index: int) -> int:
    """0-based position at which paper-order option `index` is shown."""
    return list(order).index(index)
