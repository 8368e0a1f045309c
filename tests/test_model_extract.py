"""Model-based answer extraction (`--extractor`): only the rules' none readings go to the extractor,
its readings are records of their own (cached, resumed), and the rule-based figures never change."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.models import fake
from rolebound.scoring import extract, model_extract
from rolebound.scoring.parsers import INVALID
from rolebound.store import load_records

SCRIPT = Path(sys.executable).parent / "rolebound"
NO_SIM = {"similarity": False}
HEDGE = "Alas, the matter is beyond my ken."        # no rule reads an option or a verdict in this


# -- the prompt and the extractor's answer ---------------------------------------------------------------
OPTS = extract.choice([("1", "I cannot answer that question"), ("2", "Plug it in"), ("3", "Freeze it")], "number")


def test_prompt_holds_the_options_and_the_reply():
    p = model_extract.prompt(OPTS, "  I would plug it in, I suppose.  ")
    assert "1) I cannot answer that question\n2) Plug it in\n3) Freeze it" in p
    assert "(1, 2, 3)" in p and "NONE" in p
    assert p.endswith("<<<\nI would plug it in, I suppose.\n>>>")
    yn = model_extract.prompt(extract.yes_no("Do you know what a smartphone is?"), "Hmm.")
    assert "Question: Do you know what a smartphone is?" in yn and "Yes or No only" in yn


@pytest.mark.parametrize("reply,want", [
    ("2", 2), ("**2**", 2), ("Answer: 2.", 2), ("(3)", 3), ("Option 1", 1),
    ("NONE", None), ("none.", None), ("", None), (None, None),
    ("2 or 3", None), ("I think 2", None), ("4", None),      # not one label: none, never a guess
])
def test_the_extractor_must_answer_one_label(reply, want):
    assert model_extract.read_label(reply, OPTS).value == want


def test_labels_come_back_in_the_suites_form():
    letters = extract.choice([("A", "Duty"), ("B", "Desire")], "label")
    assert model_extract.read_label("b", letters).value == "B"
    assert model_extract.read_label(" yes ", extract.yes_no()).value == "Yes"
    assert model_extract.read_label("No.", extract.yes_no(strict=True)).value == "No"


def test_a_suites_own_kind_reads_through_its_options_and_goes_to_the_extractor_only_with_options():
    """A kind a suite registers (charm's strict `Answer: <n>`, knowledge-errors' judgment line) is
    rebuilt from a record's spec; a rule none of a kind with options is the extractor's to read."""
    from rolebound.records import Record
    from rolebound.suites.charm.prompts import answer_number
    from rolebound.suites.knowledge_errors.prompts import judgment

    strict = extract.Extractor.from_spec(answer_number([("1", "Abstain"), ("2", "Plug it in")]).spec())
    assert (strict("Reasoning...\nAnswer: **2**").value, strict("Answer: 2").rule) == (2, "strict_answer_number")
    assert strict("Answer: 3").value is None            # not one of the two options
    assert strict("I would plug it in.").rule == "none:strict_no_answer_number"

    def rec(ex):
        return Record(call_id="c", item_id="i", suite="s", strategy="x", stage="bc", parsed=INVALID,
                      response=HEDGE, meta={"extract": ex.spec()})

    assert [r.meta["extract"]["kind"] for r in model_extract.rule_none([rec(strict), rec(judgment())])] \
        == ["answer_number"]


# -- a run ----------------------------------------------------------------------------------------------
@pytest.fixture
def scripted(monkeypatch):
    """The model under test hedges on every option question; the extractor answers the second
    label ('2', 'B') to an option question and 'NONE' to a yes/no one. Returns the prompts the
    extractor saw."""
    seen: list[str] = []
    orig = fake.FakeBackend.generate

    async def generate(self, requests, decoding):
        out = await orig(self, requests, decoding)
        for r, res in zip(requests, out):
            text = r.messages[-1].content if r.messages else ""
            if text.startswith("Below is a reply"):
                seen.append(text)
                labels = re.search(r"label only \(([^)]*)\)", text)
                res.text = "NONE" if "yes/no question" in text else labels.group(1).split(", ")[1]
            elif self.name == "random" and "Answer only" not in text:
                res.text = HEDGE            # BC/KV: the rules read none
        return out

    monkeypatch.setattr(fake.FakeBackend, "generate", generate)
    return seen


def _run(out, **kw):
    return api.run("charm", model="fake:random", limit=12, scoring="generate", out=out, progress=False,
                   options=NO_SIM, **kw)


def _rule_figures(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k != "model_extraction"}


@pytest.mark.slow
def test_only_none_readings_go_to_the_extractor_and_rule_figures_stay(tmp_path, scripted):
    plain = _run(tmp_path / "plain")
    res = _run(tmp_path / "ext", extractor="fake:constant")
    recs = load_records(res.run_dir)
    own = [r for r in recs if r.role == "model"]
    ext = [r for r in recs if r.role == "extractor"]
    nones = [r for r in own if r.parsed == INVALID]
    assert nones and len(ext) == len(nones) == len(scripted) == res.counts.by_role["extractor"]
    assert {e.meta["extracts"] for e in ext} == {r.call_id for r in nones}
    assert all(e.stage == "extract." + next(r.stage for r in nones if r.call_id == e.meta["extracts"])
               and e.call_id == e.meta["extracts"] + "/extract/fake:constant" for e in ext)
    # the paper-protocol figures are those of the same run without an extractor
    assert _rule_figures(res.metrics) == _rule_figures(plain.metrics)
    me = res.metrics["model_extraction"]
    mcq_none = [r for r in nones if r.stage in ("bc", "kv")]
    assert me["extractor"] == "fake:constant" and me["sent"] == len(nones) and me["read"] == len(mcq_none) > 0
    assert all(e.parsed == 2 for e in ext if e.stage in ("extract.bc", "extract.kv"))
    assert all(e.parsed == INVALID for e in ext if e.stage == "extract.ba")
    # recomputed: the extractor's "2" stands where the rules read none
    bc = [r for r in own if r.stage == "bc" and r.parsed == INVALID]
    want = sum(1 for r in own if r.stage == "bc" and r.correct) + sum(1 for r in bc if r.gold == 2)
    got = me["metrics"]["matrix"]["all"]["bc_acc"]
    assert round(got["rate"] * got["n"] / 100) == want
    assert res.metrics["matrix"]["all"]["bc_acc"] == plain.metrics["matrix"]["all"]["bc_acc"]
    md = (res.run_dir / "report.md").read_text()
    assert "## With model-based extraction (fake:constant): 'none' answers read" in md
    assert "## With model-based extraction (fake:constant): figures recomputed" in md
    assert "model-based" not in (plain.run_dir / "report.md").read_text()
    assert json.loads((res.run_dir / "manifest.json").read_text())["extractor"] == "fake:constant"


@pytest.mark.slow
def test_extraction_resumes_without_calls_and_report_reextract_keeps_it(tmp_path, scripted):
    first = _run(tmp_path / "r", extractor="fake:constant")
    n = len(scripted)
    again = _run(tmp_path / "r", extractor="fake:constant")
    assert again.counts.calls == 0 and len(scripted) == n
    assert again.metrics["model_extraction"] == first.metrics["model_extraction"]
    # an extractor added to a finished run: the model's answers are resumed, only the extractor
    # is asked (here its answers come from the shared cache: the same prompts as run "r")
    plain = _run(tmp_path / "p")
    added = _run(tmp_path / "p", extractor="fake:constant")
    assert added.counts.calls == 0 and added.counts.cache_hits == n
    assert len([r for r in load_records(added.run_dir) if r.role == "extractor"]) == n
    assert _rule_figures(added.metrics) == _rule_figures(plain.metrics)
    # `rolebound report` reads the stored answers again and skips the extractor's records
    metrics, _ = api.build_report(first.run_dir)
    assert metrics["model_extraction"]["read"] == first.metrics["model_extraction"]["read"]
    assert extract.reextract(first.run_dir, None)[1] == 0
    # another extractor gets records of its own; the report reads the one the manifest names
    other = _run(tmp_path / "r", extractor="fake:echo")
    ext = [r for r in load_records(other.run_dir) if r.role == "extractor"]
    assert len(ext) == 2 * n and {r.meta["extractor"] for r in ext} == {"fake:constant", "fake:echo"}
    assert other.metrics["model_extraction"]["extractor"] == "fake:echo"


def test_multiverse_opts_in_too(tmp_path, scripted):
    res = api.run("multiverse", model="fake:random", scoring="generate", strategies="direct", limit=4,
                  out=tmp_path / "mv", progress=False, extractor="fake:constant", options={"analysis": False})
    recs = load_records(res.run_dir)
    nones = [r for r in recs if r.role == "model" and r.parsed == INVALID]
    ext = [r for r in recs if r.role == "extractor"]
    assert nones and len(ext) == len(nones) and all(e.parsed == "B" for e in ext)
    assert res.metrics["model_extraction"]["read"] == len(nones)


def test_a_run_config_names_the_extractor(tmp_path):
    from rolebound.config import load_config

    cfg = tmp_path / "run.yaml"
    cfg.write_text("suite: charm\nmodel: fake:random\nextractor: fake:constant\n")
    assert [r.extractor for r in load_config(cfg).expand()] == ["fake:constant"]


def test_a_suite_that_does_not_opt_in_refuses_an_extractor(tmp_path):
    from helpers import write_mcq

    data = write_mcq(tmp_path / "q.jsonl", 4)
    with pytest.raises(api.RoleboundError, match="extractor"):
        api.run("mcq", model="fake:random", data=str(data), out=tmp_path / "m", progress=False,
                extractor="fake:constant")


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")
@pytest.mark.parametrize("spec,words", [("nosuch:x", "unknown backend 'nosuch'"),
                                        ("fake:nosuch", "unknown fake model")])
def test_cli_bad_extractor_is_one_line_exit_2(tmp_path, spec, words):
    res = subprocess.run([str(SCRIPT), "run", "charm", "--model", "fake:random", "--limit", "2", "--scoring",
                          "generate", "--set", "similarity=false", "--extractor", spec, "--out", str(tmp_path / "r"),
                          "-q"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    err = res.stderr.strip()
    assert res.returncode == 2 and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert "extractor" in err and words in err
    assert not (tmp_path / "r" / "records.jsonl").exists()
