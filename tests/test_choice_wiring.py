"""The suites read answers with scoring.choice: records keep the rule, reports count readings per
rule, and `rolebound report RUN` reads the stored replies again without model calls."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.records import Record
from rolebound.scoring import extract
from rolebound.scoring.parsers import INVALID
from rolebound.store import RunDir, load_records

SCRIPT = Path(sys.executable).parent / "rolebound"
NO_SIM = {"similarity": False}


def _charm_run(tmp_path, **options):
    out = tmp_path / "run"
    api.run("charm", model="fake:random", limit=12, scoring="generate", out=out, progress=False,
            options={**NO_SIM, **options})
    return out


def test_charm_records_keep_the_rule_and_the_report_counts_rules(tmp_path):
    out = _charm_run(tmp_path)
    recs = [r for r in load_records(out) if r.role == "model"]
    assert recs and all("rule" in r.meta["extraction"] and r.meta["extract"]["kind"] in ("choice", "yes_no")
                        for r in recs)
    for r in recs:    # parsed is what the stored extractor reads, in the suite's own form
        got = extract.Extractor.from_spec(r.meta["extract"])(r.response).value
        assert r.parsed == (INVALID if got is None else got)
    mcq = [r for r in recs if r.stage in ("bc", "kv")]
    assert mcq and all(r.meta["extract"]["form"] == "number" for r in mcq)
    md = (out / "report.md").read_text()
    assert "## Answer extraction: readings per rule" in md
    assert "read by" in (out / "report.html").read_text()


@pytest.mark.slow
def test_charm_strict_extraction_is_the_papers(tmp_path):
    out = _charm_run(tmp_path, extraction="strict")
    kinds = {r.meta["extract"]["kind"] for r in load_records(out) if r.role == "model"}
    assert kinds <= {"yes_no_strict", "answer_number"} and kinds
    assert "extraction=strict" in (out / "report.md").read_text()


def _rewrite(out: Path, change) -> None:
    rd = RunDir(out)
    rd.open_for_append()
    for r in load_records(out):
        new = change(r)
        if new is not None:
            rd.append(new)
    rd.close()


@pytest.mark.slow
def test_report_reads_stored_replies_again_and_says_what_changed(tmp_path):
    out = _charm_run(tmp_path)
    ba = next(r for r in load_records(out) if r.stage == "ba")

    def older(r: Record):    # as if an older reader had read this one reply differently
        if r.call_id != ba.call_id:
            return None
        new = r.model_copy(deep=True)
        new.parsed = "No" if r.parsed != "No" else "Yes"
        new.meta["extraction"] = {"rule": "an_older_rule", "span": ""}
        return new

    _rewrite(out, older)
    res = subprocess.run([str(SCRIPT), "report", str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert "readings changed" in res.stdout and ": 1 readings changed" in res.stdout
    again = next(r for r in load_records(out) if r.call_id == ba.call_id)
    assert again.parsed == ba.parsed and again.meta["extraction"] == ba.meta["extraction"]
    res = subprocess.run([str(SCRIPT), "report", str(out)], capture_output=True, text=True)
    assert ": 0 readings changed" in res.stdout


@pytest.mark.slow
def test_report_rebuilds_readers_for_runs_without_specs(tmp_path):
    out = _charm_run(tmp_path)

    def strip(r: Record):
        if r.role != "model":
            return None
        new = r.model_copy(deep=True)
        new.meta.pop("extract", None)
        new.meta.pop("extraction", None)
        return new

    _rewrite(out, strip)
    res = subprocess.run([str(SCRIPT), "report", str(out)], capture_output=True, text=True)
    assert res.returncode == 0 and "re-extracted" in res.stdout
    assert all("extract" in r.meta for r in load_records(out) if r.role == "model")


@pytest.mark.slow
def test_multiverse_answers_read_by_their_options(tmp_path):
    out = tmp_path / "mv"
    api.run("multiverse", model="fake:random", limit=6, scoring="generate", out=out, progress=False,
            options={"analysis": False})
    ans = [r for r in load_records(out) if r.meta.get("extract")]
    assert ans and all(r.meta["extract"]["form"] == "label" for r in ans)
    assert all(r.parsed == INVALID or r.parsed in "ABCD" for r in ans)
    suite = __import__("rolebound.suites", fromlist=["get_suite"]).get_suite("multiverse")
    for r in ans:
        rebuilt = suite.extractor_for(r)
        assert rebuilt is not None and [o[0] for o in rebuilt.options] == [o[0] for o in r.meta["extract"]["options"]]


def test_judgment_extractor_keeps_the_papers_format():
    from rolebound.suites.knowledge_errors.prompts import judgment

    j = judgment()
    assert j("explanation: fine\n\n**Judgment:** No").value == "no"
    assert j("judgment: yes\njudgment: no").rule == "none:two_judgment_lines"
    assert j("Yes.").value is None
    assert json.dumps(j.spec()) == '{"kind": "judgment"}'
    assert extract.Extractor.from_spec(j.spec())("judgment: yes").value == "yes"   # re-read from a stored spec
