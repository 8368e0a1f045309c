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
