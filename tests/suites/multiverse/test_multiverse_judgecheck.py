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


@pytest.mark.slow
def test_the_five_models_replies_to_one_question_share_a_cluster(rows):
    """A reply's cluster is its task and CID (one character's questions of a task): the five models
    answered the same questions, so each cluster holds the same number of replies of every model,
    and the human ceiling is resampled over those clusters, which the report names and counts."""
    from rolebound.judgecheck.metrics import humans_only
    from rolebound.judgecheck.report import clusters_line, table_rows
    from rolebound.judgecheck.run import spec_of

    check = spec_of("multiverse")[1]
    keys = {r.id: check.cluster(r)[0] for r in rows}
    per: dict[str, Counter] = {}
    for r in rows:
        per.setdefault(keys[r.id], Counter())[r.group] += 1
    assert len(per) == 224            # 56 characters' canon, dilemma, knowledge and quote questions
    assert all(set(c) == set(MODELS) and len(set(c.values())) == 1 for c in per.values())
    pool = next(r for r in rows if r.group == "claude" and r.reply.startswith("*lounges back in the pool chair"))
    assert keys[pool.id] == "suite=canon/cid=148" and per[keys[pool.id]] == {m: 6 for m in MODELS}

    m = humans_only(rows, check, resamples=200)
    assert m["clustered_by"].startswith("task and character")
    thinking = m["scores"]["thinking"]["groups"]
    both = [r for r in rows if all(r.labels[a]["thinking"] is not None for a in ("anno1", "anno2"))]
    labelled = {keys[r.id] for r in both}
    assert thinking["all"]["humans"]["clusters"] == len(labelled) and thinking["all"]["humans"]["n"] == 2813
    # one model: the same clusters, fewer replies in each
    assert thinking["claude"]["humans"]["clusters"] == len({keys[r.id] for r in both if r.group == "claude"})
    # a clustered interval is wider than the pairs' (the design effect of exact agreement above 1)
    assert thinking["all"]["humans"]["exact"]["deff"] > 1
    cols, table = table_rows(m)
    first = table[0]
    assert cols[4] == "clusters" and first[:5] == ["thinking", "all", "humans (ceiling)", "2813", str(len(labelled))]
    assert "[" in first[5]
    assert "clustered by: task and character (the release's CID)" in clusters_line(m)
