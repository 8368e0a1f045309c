"""Real Qwen2.5-Coder-1.5B replies (tests/data/qwen_replies) read by the charm parsers, no model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rolebound.scoring.parsers import parse_yes_no
from rolebound.suites.charm.prompts import parse_answer_number

ROWS = [json.loads(line) for line in
        (Path(__file__).parent / "data" / "qwen_replies" / "charm.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("row", ROWS, ids=[r["call_id"] for r in ROWS])
def test_parsers_read_real_replies_as_the_run_did(row):
    got = parse_yes_no(row["response"]) if row["stage"] == "ba" else \
        parse_answer_number(row["response"], row["n_options"])
    assert got == row["parsed"]


def test_fixtures_cover_the_formats_and_carry_provenance():
    assert {r["stage"] for r in ROWS} == {"ba", "bc", "kv"}
    assert {r["parsed"] for r in ROWS if r["stage"] == "ba"} == {"Yes", "No"}
    assert any(r["completion_tokens"] > 100 for r in ROWS)          # reasoning before the answer
    assert all("qwen2.5-coder-1.5b" in r["source"] and r["validated"] is False for r in ROWS)
