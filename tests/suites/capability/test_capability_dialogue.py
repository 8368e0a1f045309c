"""The dialogue strategy on the fake backend: probes at each depth, shared dialogues, and depth 0
equal to the suite's single-turn figure on the same items."""

from __future__ import annotations

import pytest

from rolebound import api
from rolebound.dialogue import metrics as dm
from rolebound.store import load_records


@pytest.mark.slow
def test_capability_depth_zero_is_the_identity_figure(tmp_path):
    res = api.run("capability", model="fake:random", strategies="identity,dialogue", limit=4, out=tmp_path / "r",
                  options={"depths": "0,2", "warmup": "scripted,items", "roles": "kindergarten,primary,college"},
                  progress=False, use_cache=False)
    d = res.metrics["dialogue"]
    ta0 = d["metrics"]["TA"]["scripted"]["rows"][0]
    assert ta0["depth"] == 0 and ta0["n"] == 4 * 3
    # pooled TA over (question, role) equals Table 3's macro TA: every role answers every question
    assert ta0["rate"] == pytest.approx(100 * res.metrics["by_strategy"]["identity"]["macro"]["TA"]["mean"])
    recs = load_records(tmp_path / "r")
    turns = [r for r in recs if r.stage.startswith("turn@")]
    # the role's system prompt heads every turn; kindergarten's items warm-up falls back to scripted turns
    assert all(t.prompt[0]["role"] == "system" for t in turns)
    kg = [t for t in turns if t.meta["warmup"] == "items" and t.meta["key"] == "kindergarten"]
    assert kg and all("no in-role items" in t.meta["source"] for t in kg)
    college = [t for t in turns if t.meta["warmup"] == "items" and t.meta["key"] == "college"]
    assert college and all(t.meta["source"].startswith("item:") for t in college)
    assert {r.meta["depth"] for r in dm.probe_records(recs)} == {0, 2}


@pytest.mark.slow
def test_a_dialogue_only_report_lists_its_probes_without_empty_single_turn_tables(tmp_path):
    api.run("capability", model="fake:random", strategies="dialogue", limit=2, out=tmp_path / "r",
            options={"depths": "0,2", "roles": "kindergarten,teacher"}, progress=False, use_cache=False)
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Headline figures by dialogue depth" in md
    assert "Table 3" not in md and "## Per role" not in md        # no single-turn variant ran
    assert "2 questions; roles: Kindergarten, Teacher." in md      # ladder order
    assert "8 rows" in md                                          # 2 questions x 2 roles x 2 depths, viewable
