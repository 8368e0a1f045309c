"""Real Qwen2.5-Coder-1.5B replies (tests/data/qwen_replies/*.jsonl) read by today's parsers and
judge readers, without the model. `label` is what a careful reader takes from the reply; rows
with `misread: true` were misread by the run that wrote them (its `parsed` is kept). Answers are
read as a run reads them today: by the suite's own extractor, rebuilt from the prompt the row
keeps (`extractor_for`, as `rolebound report` does for old records)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from rolebound.suites.knowledge_errors.prompts import parse_judgment
from rolebound.suites.capability.boxed import parse_boxed_letter
from rolebound.scoring.extract import Extractor
from rolebound.scoring.parsers import INVALID
from rolebound.suites.charm.prompts import parse_answer_number
from rolebound.suites.charm.suite import CharmSuite
from rolebound.suites.knowledge_errors.strategies import parse_recollections
from rolebound.suites.multiverse.prompts import CONFLICTS, parse_judge, parse_segments
from rolebound.suites.multiverse.suite import MultiverseSuite

DIR = Path(__file__).parent / "data" / "qwen_replies"
# fixture file -> the suite whose reader it goes through (the *_paper / _judge files: issue 13's runs
# of every suite in the paper protocol, see the README there)
KIND = {"knowledge_errors": "knowledge_errors", "capability": "capability", "multiverse": "multiverse",
        "charm_sequential": "charm_sequential", "multiverse_paper": "multiverse",
        "knowledge_errors_judge": "knowledge_errors", "charm_paper": "charm_sequential",
        "capability_paper": "capability"}
SUITES = tuple(KIND)


def _rows(suite):
    return [json.loads(x) for x in (DIR / f"{suite}.jsonl").read_text().splitlines()]


def _as_record(row: dict, **meta) -> SimpleNamespace:
    return SimpleNamespace(role="model", stage=row["stage"], meta=meta,
                           prompt=[{"role": "user", "content": row["prompt_tail"]}])


def _extract(suite, rec):
    ex = suite.extractor_for(rec)
    assert ex is not None, "the suite cannot rebuild the options from the prompt"
    return ex


def read(suite: str, row: dict):
    suite = KIND.get(suite, suite)
    text, stage = row["response"], row["stage"]
    if suite == "knowledge_errors":
        return parse_judgment(text) if stage.startswith("judge") else len(parse_recollections(text, 3))
    if suite == "capability":
        return parse_boxed_letter(text)
    if suite == "multiverse":
        if stage == "answer" or stage.startswith("as."):      # as.<version>: a cross answer
            conflict = next((c for c in CONFLICTS if c in row["id"]), None)
            rec = _as_record(row, letters=row["letters"], task="canon" if row["letters"] == "ABCD" else "dilemma",
                             conflict=conflict)
            got = _extract(MultiverseSuite(), rec)(text).value
            return INVALID if got is None else got
        if stage == "segment":
            seg = parse_segments(text)
            return {k: len(seg[k]) for k in ("thinking", "acting")} if isinstance(seg, dict) else seg
        return parse_judge(text)
    got = _extract(CharmSuite(), _as_record(row))(text).value
    return INVALID if got is None else got


def _params():
    out = []
    for suite in SUITES:
        for row in _rows(suite):
            out.append(pytest.param(suite, row, id=f"{suite}:{row['id']}"))
    return out


@pytest.mark.parametrize(("suite", "row"), _params())
def test_a_careful_reader_and_the_parser_agree(suite, row):
    assert read(suite, row) == row["label"]
    if row.get("extract"):
        # the extractor the run stored in the record reads it the same way (`rolebound report`)
        got = Extractor.from_spec(row["extract"])(row["response"]).value
        assert (INVALID if got is None else got) == row["label"]


def test_the_strict_charm_reading_keeps_the_papers_format():
    # extraction=strict reads only "Answer: <n>" (Table 20); the rules read "my final answer is: 2"
    row = next(r for r in _rows("charm_sequential") if "final answer is: 2" in r["response"])
    assert parse_answer_number(row["response"], row["n_options"]) == INVALID
    assert read("charm_sequential", row) == 2


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


def test_paper_protocol_injection_prefill_ends_the_prompt():
    # the paper-protocol run: the prefill closes the prompt inside the open assistant turn of the Qwen template
    inj = [r for r in _rows("capability_paper") if r["kind"] == "complete"]
    assert len(inj) == 24
    for r in inj:
        tail = r["prompt_tail"]
        assert tail.rstrip().endswith("So, my role is")
        assert "<|im_end|>" not in tail.split("<|im_start|>assistant")[-1]


def test_judge_replies_cut_before_the_judgment_line_read_as_none():
    rows = _rows("knowledge_errors_judge")
    cut = [r for r in rows if r["label"] == INVALID]
    assert len(cut) == 9 and all(r["finish_reason"] == "length" for r in cut)
