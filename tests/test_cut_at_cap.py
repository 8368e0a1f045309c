"""Replies the token cap cut off (finish_reason "length"): how many, and how many of them read as no
answer against the replies that ended on their own; in metrics.json, the report's facts and a table."""

from __future__ import annotations

import json
import re

import pytest

from helpers import rolebound
from rolebound.records import INVALID, Record
from rolebound.report import cap_section, cut_at_cap
from rolebound.report.builder import Report


def rec(i: int, stage: str, finish: str | None, parsed, **kw) -> Record:
    return Record(call_id=f"q{i}/s/{stage}", item_id=f"q{i}", suite="charm", strategy="s", stage=stage,
                  finish_reason=finish, parsed=parsed, **kw)


def records():
    return [rec(0, "bc", "length", INVALID), rec(1, "bc", "length", 2), rec(2, "bc", "stop", INVALID),
            rec(3, "bc", "stop", 1), rec(4, "ba", "stop", "No"), rec(5, "ba", "stop", INVALID),
            rec(6, "bc", "length", None, error="timeout"),                       # a failed call: no reply
            rec(7, "bc", None, 1, kind="score", continuations=["1", "2"])]       # scored: nothing generated


def test_cut_replies_are_counted_by_stage_with_their_invalid_readings():
    out = cut_at_cap(records())
    assert {k: out[k] for k in ("generated", "cut", "cut_invalid", "invalid")} == \
        {"generated": 6, "cut": 2, "cut_invalid": 1, "invalid": 3}
    assert out["stages"] == {"bc": {"generated": 4, "cut": 2, "cut_invalid": 1, "invalid": 2}}   # ba: none cut


def test_the_report_shows_a_table_only_when_a_reply_was_cut():
    rep = Report("t")
    cap_section(rep, {"cut_at_cap": cut_at_cap(records())})
    (sec,) = rep.sections
    assert sec.title == "Replies cut at the token cap"
    assert sec.body["rows"] == [["bc", "4", "2", "1", "1", "2"]]
    rep = Report("t")
    cap_section(rep, {"cut_at_cap": cut_at_cap([rec(0, "bc", "stop", INVALID)])})
    assert rep.sections == []


@pytest.mark.slow
def test_a_run_whose_replies_the_cap_cut_says_so_at_its_end_and_in_its_report(tmp_path):
    # fake:constant answers its text a word per token: four tokens cut this one
    res = rolebound("run", "charm", "--model", "fake:constant", "--scoring", "generate", "--backend-opt",
                    "text=Let me weigh each option in turn before I answer", "--max-tokens", "4", "--limit", "4",
                    "--set", "ba_control=false",      # the Yes control's calls would be cut too
                    "--out", tmp_path / "r", "--no-cache", "-q", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert re.search(r"cut at max_tokens\s*│\s*5 of 5 \(5 read as no answer\)", res.stdout), res.stdout
    md = (tmp_path / "r" / "report.md").read_text(encoding="utf-8")
    assert "5 of 5 generated replies (100%) stopped at the token cap" in md
    assert "## Replies cut at the token cap" in md
    assert json.loads((tmp_path / "r" / "metrics.json").read_text())["cut_at_cap"]["cut"] == 5
