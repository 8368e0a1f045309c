"""The one bounded call loop (rolebound.runner.bounded)."""

from __future__ import annotations

import asyncio

import pytest

from rolebound.runner import bounded
from rolebound.loop import default_concurrency
from rolebound.models import create_backend


def test_results_keep_the_jobs_order_and_concurrency_is_bounded():
    live, peak = 0, 0

    async def fn(x):
        nonlocal live, peak
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.001 * (10 - x))          # later jobs finish first
        live -= 1
        return x * x

    out = asyncio.run(bounded(list(range(10)), fn, concurrency=3))
    assert out == [x * x for x in range(10)]
    assert peak == 3


def test_an_error_cancels_the_waiting_jobs():
    started = []

    async def fn(x):
        started.append(x)
        if x == 0:
            raise ValueError("boom")
        await asyncio.sleep(0.05)

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(bounded(list(range(20)), fn, concurrency=2))
    assert len(started) < 20


def test_default_concurrency_is_the_one_rule():
    assert default_concurrency(create_backend("fake:random")) == 256      # batching engine
    assert default_concurrency(object()) == 16
