"""The Beyond One World human labels (annotated_results/) as judge-check rows, on the real files
(skipped when ../shared is absent)."""

from __future__ import annotations

from collections import Counter

import pytest

from conftest import shared_path
from rolebound.suites.multiverse.judgecheck import MODELS, read_release, select


@pytest.fixture(scope="module")
def rows():
    return read_release(shared_path("data", "external", "Beyond_One_World", "annotated_results"))


@pytest.mark.slow
def test_every_reply_of_five_models_with_both_annotators(rows):
    assert Counter(r.group for r in rows) == {m: 624 for m in MODELS}
    assert all(set(r.labels) == {"anno1", "anno2"} for r in rows)     # every row pairs, r1's other order too
    assert len({r.id for r in rows}) == len(rows)
    tasks = Counter(r.context["task"] for r in rows if r.group == "claude")
    assert tasks == {"canon": 288, "dilemma": 224, "knowledge": 56, "quote": 56}


@pytest.mark.slow
def test_scores_where_the_release_has_them(rows):
    for r in rows:
        for a in ("anno1", "anno2"):
            labs = r.labels[a]
            assert all(v is None or v in {0, 1, 2, 3, 4, 5} for v in labs.values())
            if r.context["task"] != "knowledge":
                assert labs["describe"] is None
    # describe only on the knowledge replies, thinking/acting on the others (NaN, null and "" are no label)
    know = [r for r in rows if r.context["task"] == "knowledge" and r.group == "claude"]
    assert sum(r.labels["anno1"]["describe"] is not None for r in know) == 56
    assert all(r.labels["anno1"]["thinking"] is None for r in know)
    both = sum(r.labels["anno1"]["thinking"] is not None and r.labels["anno2"]["thinking"] is not None
               for r in rows if r.group == "claude")
    assert both == 562


def test_first_claude_canon_reply(rows):
    r = next(r for r in rows if r.group == "claude" and r.reply.startswith("*lounges back in the pool chair"))
    assert r.context["character"] == "Tony Stark “Iron Man”"
    assert r.context["lore"] == "MCU: The Heroes, Wreck-It Ralph (Franchise)"
    assert r.labels["anno1"]["thinking"] == 5 and r.labels["anno1"]["acting"] == 5


def test_a_small_limit_covers_every_model(rows):
    picked = select(rows, 10)
    assert Counter(r.group for r in picked) == {m: 2 for m in MODELS}
    assert all(r.context["task"] != "knowledge" for r in picked)      # the judge gives no describe score
    assert select(rows, 10) == picked
