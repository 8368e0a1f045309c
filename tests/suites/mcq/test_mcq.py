"""The mcq suite: items (answers as letter, index or text), the template, metrics and the report."""

from __future__ import annotations

import json

import pytest

from rolebound.records import INVALID
from rolebound.errors import InputError
from rolebound.records import Record
from rolebound.suites.mcq.data import MCQItem, load_items
from rolebound.suites.mcq.metrics import compute
from rolebound.suites.mcq.prompts import DEFAULT_TEMPLATE, compile_template, render


def _rec(i: int, correct: bool, *, parsed="A", group=None, error=None, strategy="direct") -> Record:
    return Record(call_id=f"q{i}/{strategy}/answer", item_id=f"q{i}", suite="mcq", strategy=strategy, stage="answer",
                  kind="chat", model="fake:x", prompt="p", parsed=parsed, gold="A", correct=correct,
                  error=error, meta={"group": group} if group else {})


def test_an_answer_may_be_a_letter_an_index_or_the_text():
    opts = ["red", "green", "blue"]
    assert MCQItem(id=1, question="q", options=opts, answer="b").answer == "B"
    assert MCQItem(id="x", question="q", options=opts, answer=2).answer == "C"
    assert MCQItem(id="x", question="q", options=opts, answer="red").answer == "A"
    with pytest.raises(ValueError):
        MCQItem(id="x", question="q", options=opts, answer="D")


def test_a_repeated_id_names_the_file(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(json.dumps({"id": "a", "question": "q", "options": ["x", "y"], "answer": 0})
                              for _ in range(2)) + "\n")
    with pytest.raises(InputError, match="duplicate id 'a'") as exc:
        load_items(str(path))
    assert exc.value.file == str(path)


def test_the_default_template_names_the_character_and_letters_the_options():
    item = MCQItem(id="1", question="Who?", options=["me", "you"], answer="A", name="Holmes", source="Doyle")
    text = render(item, compile_template(DEFAULT_TEMPLATE))
    assert text.startswith("You are Holmes from Doyle.") and "A. me\nB. you\nAnswer:" in text
    plain = render(MCQItem(id="2", question="Who?", options=["me", "you"], answer="A"), compile_template(DEFAULT_TEMPLATE))
    assert plain.startswith("Question: Who?")


def test_a_bad_template_is_an_input_error():
    with pytest.raises(InputError, match="bad template"):
        compile_template("{% if %}")


def test_metrics_count_accuracy_invalid_and_groups_and_skip_failed_calls():
    recs = [_rec(0, True, group="x"), _rec(1, False, parsed=INVALID, group="x"), _rec(2, True, group="y"),
            _rec(3, False, error="timeout")]
    m = compute(recs, ["direct"])
    d = m["by_strategy"]["direct"]
    assert d["n"] == 3 and d["rate"] == pytest.approx(200 / 3) and d["invalid"] == 1
    assert d["by_group"]["x"]["n"] == 2 and d["by_group"]["y"]["rate"] == 100
    assert m["failed_calls"] == 1


def test_a_fake_run_writes_the_accuracy_table(tmp_path):
    from helpers import write_mcq
    from rolebound import api

    res = api.run("mcq", model="fake:random", data=str(write_mcq(tmp_path / "q.jsonl", 4)), out=tmp_path / "r",
                  progress=False)
    md = (res.run_dir / "report.md").read_text(encoding="utf-8")
    assert "Accuracy (%, 95% cluster-bootstrap CI)" in md and "Per-sample answers" in md
    assert res.metrics["by_strategy"]["direct"]["n"] == 4
