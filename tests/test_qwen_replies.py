"""Real Qwen2.5-Coder-1.5B replies (tests/data/qwen_replies/*.jsonl) read by today's parsers and
judge readers, without the model. `label` is what a careful reader takes from the reply; rows
with `misread: true` are known misreads, xfail(strict) so the answer-extraction work flips them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rolebound.suites.knowledge_errors.prompts import parse_judgment
from rolebound.suites.capability.boxed import parse_boxed_letter
from rolebound.scoring.parsers import parse_answer_number, parse_yes_no
from rolebound.suites.knowledge_errors.strategies import parse_recollections
from rolebound.suites.multiverse.prompts import parse_choice, parse_judge, parse_segments

DIR = Path(__file__).parent / "data" / "qwen_replies"
SUITES = ("knowledge_errors", "capability", "multiverse", "charm_sequential")


def _rows(suite):
    return [json.loads(x) for x in (DIR / f"{suite}.jsonl").read_text().splitlines()]


def read(suite: str, row: dict):
    text, stage = row["response"], row["stage"]
    if suite == "knowledge_errors":
        return parse_judgment(text) if stage.startswith("judge") else len(parse_recollections(text, 3))
    if suite == "capability":
        return parse_boxed_letter(text)
    if suite == "multiverse":
        if stage == "answer":
            return parse_choice(text, row["letters"])
        if stage == "segment":
            seg = parse_segments(text)
            return {k: len(seg[k]) for k in ("thinking", "acting")} if isinstance(seg, dict) else seg
        return parse_judge(text)
    if stage.endswith(".ba"):
        return parse_yes_no(text)
    return parse_answer_number(text, row["n_options"])


def _params():
    out = []
    for suite in SUITES:
        for row in _rows(suite):
            marks = [pytest.mark.xfail(strict=True, reason=row["note"])] if row["misread"] else []
            out.append(pytest.param(suite, row, marks=marks, id=f"{suite}:{row['id']}"))
    return out


@pytest.mark.parametrize(("suite", "row"), _params())
def test_a_careful_reader_and_the_parser_agree(suite, row):
    assert read(suite, row) == row["label"]


@pytest.mark.parametrize("suite", SUITES)
def test_misreads_are_what_the_run_recorded(suite):
    # the run's own parsed value is kept, so a misread row shows what the records said that day
    for row in _rows(suite):
        if row["misread"]:
            assert row["parsed"] != row["label"]
        assert row["validated"] is False and "qwen2.5-coder-1.5b" in row["source"]


def test_injection_prompt_leaves_the_assistant_turn_open():
    inj = [r for r in _rows("capability") if r["kind"] == "complete"]
    assert inj
    for r in inj:
        tail = r["prompt_tail"]
        assert "<|im_start|>assistant\n<think>\nOkay, I am" in tail
        assert tail.rstrip().endswith("So, my role is")
        assert "<|im_end|>" not in tail.split("<|im_start|>assistant")[-1]
