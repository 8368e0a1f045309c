"""CHARM's BA Yes control (issue 51): every BA question's answer is "No", so a model that always says
No scores 100% BA. In-boundary awareness questions whose answer is "Yes" (data/ba_control.yaml),
asked as BA is asked, are reported beside BA accuracy; on by default, --set ba_control=false skips them."""

from __future__ import annotations

import json
import re

import pytest

from rolebound import api
from rolebound.store import load_records
from rolebound.suites.charm.data import load_ba_control, load_data
from rolebound.suites.charm.prompts import BA_PROMPT

from helpers import needs_script, rolebound


def test_every_historical_role_has_yes_questions_of_its_own_world_in_a_ba_form():
    control = load_ba_control()
    d, _ = load_data()
    hist = {c.id: c for c in d.characters if c.period == "historical"}
    assert set(control.roles) == set(hist)
    # nothing a CHARM question asks about: no concept, no contemporary character (a target)
    outside = [c.name for c in d.concepts] + [c.name for c in d.characters if c.period == "contemporary"]
    for role, qs in control.roles.items():
        assert len(qs) == 3 and len({q.id for q in qs}) == 3, role
        for q in qs:
            assert q.source or q.note
            assert q.validated is False
            assert re.match(r"^(Do you know|Have you ever met|Have you heard of) .+\?$", q.question), q.question
            assert not any(name.lower() in q.question.lower() for name in outside), (role, q.question)
    assert control.validated is False and control.source


@needs_script
@pytest.mark.slow
def test_an_always_no_model_shows_the_no_bias_sentence_and_the_control_can_be_switched_off(tmp_path):
    """fake:constant answers "No." to everything: BA 100%, and "No" to what its character knows."""
    args = ["run", "charm", "--model", "fake:constant", "--scoring", "generate", "--limit", "120",
            "--set", "similarity=false"]
    r = rolebound(*args, "--out", tmp_path / "on", timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    m = json.loads((tmp_path / "on" / "metrics.json").read_text())
    yc = m["ba_control"]
    recs = [x for x in load_records(tmp_path / "on") if x.stage == "ba~yes"]
    roles = {x.meta["role"] for x in load_records(tmp_path / "on") if x.stage == "ba"}
    assert yc["n"] == len(recs) == 3 * len(roles) and yc["roles"] == len(roles)       # three per role asked
    assert yc["said_no"]["rate"] == 100.0 and yc["said_yes"]["rate"] == 0.0
    assert yc["ba_said_no"]["rate"] == m["stage_accuracy"]["ba/all"]["rate"] == 100.0
    # asked exactly as BA: Table 19's prompt under the role's name and profile, read as Yes/No, gold Yes
    ba = {x.meta["role"]: x for x in load_records(tmp_path / "on") if x.stage == "ba"}
    for x in recs:
        q = x.prompt[-1]["content"].split("Question: ", 1)[1].split("\n", 1)[0]
        b = ba[x.meta["role"]].prompt[-1]["content"]
        bq = b.split("Question: ", 1)[1].split("\n", 1)[0]
        assert x.prompt[-1]["content"] == b.replace(f"Question: {bq}\n", f"Question: {q}\n") != b
        assert b.startswith(BA_PROMPT.split("{character}")[0])
        assert x.gold == "Yes" and x.parsed == "No" and x.correct is False and x.strategy == "independent"
    md = (tmp_path / "on" / "report.md").read_text()
    assert "## BA Yes control: awareness questions whose answer is Yes" in md
    assert md.index("BA Yes control") < md.index("BA-BC matrix (Table 1)")         # beside BA accuracy
    assert "in-boundary questions whose answer is Yes (what the character knows): BA here measures a No-bias" in md
    assert "BA Yes control: said No %" in r.stdout
    before = json.loads((tmp_path / "on" / "manifest.json").read_text())["counts"]["model_calls"]
    again = rolebound(*args, "--out", tmp_path / "on", timeout=300)              # resumed: no new call
    assert again.returncode == 0
    assert json.loads((tmp_path / "on" / "manifest.json").read_text())["counts"]["model_calls"] == before
    off = rolebound(*args, "--set", "ba_control=false", "--out", tmp_path / "off", timeout=300)
    assert off.returncode == 0, off.stderr[-2000:]
    assert json.loads((tmp_path / "off" / "metrics.json").read_text())["ba_control"] == {}
    assert not any(x.stage == "ba~yes" for x in load_records(tmp_path / "off"))
    assert "BA Yes control" not in (tmp_path / "off" / "report.md").read_text()


@pytest.mark.slow
def test_a_model_that_says_yes_to_what_its_character_knows_is_told_apart(tmp_path):
    res = api.run("charm", model="fake:constant", scoring="generate", limit=120, out=tmp_path / "yes", progress=False,
                  backend_options={"text": "Yes.\nAnswer: 1"}, options={"similarity": False, "kv_control": False})
    m = json.loads((res.run_dir / "metrics.json").read_text())
    assert m["ba_control"]["said_no"]["rate"] == 0.0 and m["stage_accuracy"]["ba/all"]["rate"] == 0.0
    md = (res.run_dir / "report.md").read_text()
    assert "it says Yes to most of what the character knows, so its BA answers are not a blanket No" in md
    assert "No-bias" not in md.split("## BA Yes control")[1].split("##")[0].replace("(No-bias", "")
    # log-likelihood scoring asks the control as it asks BA: "Yes" against "No" as the first token
    lp = api.run("charm", model="fake:random", scoring="logprob", limit=40, out=tmp_path / "lp", progress=False,
                 options={"similarity": False})
    recs = [x for x in load_records(lp.run_dir) if x.stage == "ba~yes"]
    assert recs and all(x.kind == "score" and x.gold == "Yes" and x.parsed in ("Yes", "No") for x in recs)
