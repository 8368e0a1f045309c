"""CHARM's position-bias controls on a model that always picks option 1 (fake:constant): the
position-bias warning, the override under the paper's and the control order, --set permutations."""

from __future__ import annotations

import json

import pytest

from rolebound import api
from rolebound.store import load_records

pytestmark = pytest.mark.slow     # processes, servers or whole pipelines: not in `make test-fast`

FIRST = {"text": "No.\nAnswer: 1"}      # BA "No" (boundary recognised), every MCQ option 1


def run(tmp_path, name, **options):
    return api.run("charm", model="fake:constant", scoring="generate", limit=120, out=tmp_path / name,
                   progress=False, backend_options=FIRST, options={"similarity": False, **options})


def test_a_position_follower_gets_the_warning_and_a_different_override_under_the_control(tmp_path):
    res = run(tmp_path, "first")
    m = json.loads((res.run_dir / "metrics.json").read_text())
    bc = m["position_bias"]["stages"]["bc"]
    assert bc["pick_share"][0] == 100.0 and bc["gold_share"][0] <= 25.0 and bc["follows_position"]
    assert any(w.startswith("bc: the picks follow position") for w in m["position_bias"]["warnings"])
    ctl = m["override_control"]
    assert ctl["n"] == m["override"]["ba_pos_fc_bc"] > 0      # every candidate asked in the control order
    assert ctl["paper_order"]["rate"] == 100.0 and ctl["control_order"]["rate"] == 0.0
    assert ctl["outside_ci"] and ctl["same_position"]["rate"] == 100.0
    recs = [r for r in load_records(res.run_dir) if r.stage == "kv~ctl"]
    assert len(recs) == ctl["n"]                              # candidates only
    assert all(r.meta["order"].index(int(r.meta["fact_option"]) - 1) != 0 for r in recs)  # the fact moved
    md = (res.run_dir / "report.md").read_text()
    assert "Position bias warning" in md and "control order" in md
    assert "The paper's figures beside this run" in md and "GPT-4o 72.1" in md
    # the rebuilt metrics are identical (pure functions of the records) and the resume makes no call
    again = api.run("charm", model="fake:constant", scoring="generate", limit=120, out=res.run_dir, progress=False,
                    backend_options=FIRST, options={"similarity": False})
    assert again.counts.calls == 0
    assert json.loads((res.run_dir / "metrics.json").read_text())["override_control"] == ctl


def test_kv_control_can_be_switched_off(tmp_path):
    res = run(tmp_path, "off", kv_control=False)
    m = json.loads((res.run_dir / "metrics.json").read_text())
    assert m["override_control"] == {} and not any(r.stage == "kv~ctl" for r in load_records(res.run_dir))


def test_permutations_ask_every_bc_and_kv_question_under_k_shifts(tmp_path):
    res = run(tmp_path, "perm", permutations=3, kv_control=False)
    recs = load_records(res.run_dir)
    bc = [r for r in recs if r.stage == "bc"]
    assert len([r for r in recs if r.stage == "bc~s2"]) == len(bc) > 0
    m = json.loads((res.run_dir / "metrics.json").read_text())
    sh = m["shifts"]["bc"]
    assert sh["shifts"] == 3 and sh["items"] == len(bc)
    assert sh["consistency"]["rate"] == 0.0              # option 1 is another option under every shift
    assert m["stage_accuracy"]["bc/all"]["n"] == len(bc)  # the paper's figure: the unshifted answers only
    assert "cyclic shifts" in (res.run_dir / "report.md").read_text()
