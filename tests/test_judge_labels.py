"""The hand-labelled knowledge-errors corpus (issue 39): 60 of Qwen2.5-Coder-1.5B's replies to
RoleKE-Bench queries from the long run, labelled blind to every judge verdict, read as
`rolebound judge-check knowledge-errors --data` reads it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from rolebound.judgecheck.data import read_labelled
from rolebound.judgecheck.run import spec_of

CORPUS = Path(__file__).parent / "data" / "judge_labels" / "knowledge_errors_roleke_qwen.jsonl"


def test_the_corpus_reads_as_judge_check_reads_it_and_is_balanced():
    _, check = spec_of("knowledge-errors")
    rows = read_labelled(CORPUS, check)
    assert len(rows) == 60 and len({r.id for r in rows}) == 60
    # 5 characters x (6 KKE + 6 UKE), as drawn before any verdict existed
    assert Counter(r.context["error_type"] for r in rows) == {"KKE": 30, "UKE": 30}
    assert set(Counter(r.context["character"] for r in rows).values()) == {12}
    assert all(r.reply.strip() and r.source for r in rows)
    # every label is the judge's own yes/no scale
    assert {v["verdict"] for r in rows for v in r.labels.values()} <= {"yes", "no"}


def test_the_self_judges_real_replies_read_as_their_judgment_line():
    """The 60 replies the judge-check got from Qwen judging itself (Tables 14-15 prompt): each
    reads as its own final `judgment:` line, "the judgment is: no" included."""
    import json

    from rolebound.suites.knowledge_errors.prompts import parse_judgment

    rows = [json.loads(line) for line in (CORPUS.parent / "knowledge_errors_roleke_qwen_judge.jsonl").open()]
    assert len(rows) == 60 and all(r["want"] in ("yes", "no") for r in rows)
    assert [parse_judgment(r["response"]) for r in rows] == [r["want"] for r in rows]


def test_the_corpus_clusters_by_memory():
    """The suite clusters its answers by memory (Suite.clusters: memory_id); the corpus rows carry
    the character and correct memory it stands for, so a memory's KKE and UKE replies share a cluster."""
    _, check = spec_of("knowledge-errors")
    rows = read_labelled(CORPUS, check)
    by: dict[str, list] = {}
    for r in rows:
        by.setdefault(check.cluster(r)[0], []).append(r)
    assert len(by) == 51 and all(k.startswith("suite=memory=") for k in by)
    pairs = [c for c in by.values() if len(c) == 2]
    assert len(pairs) == 9 and all({r.context["error_type"] for r in c} == {"KKE", "UKE"} for c in pairs)
    assert all(len({(r.context["character"], r.context["correct_memory"]) for r in c}) == 1 for c in by.values())
    # a row that names its memory_id clusters by it; one with its own cluster field, by that
    named = rows[0].model_copy(update={"context": {**rows[0].context, "memory_id": "m-7"}})
    assert check.cluster(named)[0] == "suite=memory_id=m-7"
    assert check.cluster(named.model_copy(update={"cluster": "x"}))[0] == "cluster=x"
