"""The dialogue strategy on the fake backend: probes at each depth, shared dialogues, and depth 0
equal to the suite's single-turn figure on the same items."""

from __future__ import annotations

import pytest

from rolebound import api
from rolebound.store import load_records

pytestmark = pytest.mark.slow     # processes, servers or whole pipelines: not in `make test-fast`


def test_multiverse_depth_zero_is_the_direct_figure(tmp_path):
    res = api.run("multiverse", model="fake:random", strategies="direct,dialogue", limit=6, out=tmp_path / "r",
                  options={"depths": "0,2", "analysis": False}, progress=False, use_cache=False)
    d = res.metrics["dialogue"]
    direct = res.metrics["strategies"]["direct"]
    for task in ("canon", "dilemma"):
        if task in direct and direct[task]["labelled"]:
            assert d["metrics"][task]["scripted"]["rows"][0]["rate"] == direct[task]["acc"]["rate"]
    recs = load_records(tmp_path / "r")
    turns = [r for r in recs if r.stage.startswith("turn@")]
    assert turns and all("You are playing the role of" in t.prompt[0]["content"] for t in turns if t.stage == "turn@1")
    assert (tmp_path / "r" / "report.md").read_text().count("dialogue_drift") >= 1
