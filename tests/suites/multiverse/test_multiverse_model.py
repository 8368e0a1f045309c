"""multiverse with real weights: Think-Act Matching with the offline embedding model, and one
end-to-end run of the bundled model (direct, CoT, cross-version, reasoning analysis)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rolebound import api
from rolebound.scoring.embeddings import get_embedder
from rolebound.scoring.parsers import INVALID
from rolebound.store import load_records
from rolebound.suites.multiverse.prompts import JUDGE_DIGITS, parse_judge, parse_segments, think_act_matching
from rolebound.suites.multiverse.rules import rule_segments

pytestmark = pytest.mark.model

TAGGED = ("<thinking>Gwen is falling from the clock tower and I am afraid I will not reach her.</thinking>"
          "<acting>I shoot a web down the tower to catch Gwen before she hits the ground.</acting>"
          "<thinking>The quarterly tax forms are due next week.</thinking>"
          "<acting>I paint the fence blue.</acting>")


def test_think_act_matching_takes_the_best_pair_with_the_real_embedder():
    emb = get_embedder()
    seg = parse_segments(TAGGED)
    got = think_act_matching(seg, emb)
    assert got["pairs"] == 2 and got["best_pair"] == 0
    related, unrelated = got["cosines"]
    assert related > unrelated + 0.2           # the Gwen pair is far closer than tax forms vs a fence
    assert got["tam"] == pytest.approx(related, abs=1e-5)
    expected = float(np.dot(*emb.encode([seg["thinking"][0], seg["acting"][0]])))
    assert related == pytest.approx(expected, abs=1e-4)
    same = think_act_matching({"thinking": ["I will save her."], "acting": ["I will save her."]}, emb)
    assert same["tam"] == pytest.approx(1.0, abs=1e-4)


def test_tam_is_computed_at_run_time_and_stored_in_the_segmenter_record(tmp_path):
    data = tmp_path / "mv.yaml"
    data.write_text(
        "heroes:\n  - {id: h, name: H, note: test fixture,\n"
        "     versions: [{id: h-a, name: Alpha, universe: U, note: test fixture}]}\n"
        "canon:\n  - {version: h-a, phase: childhood, question: 'Q?', options: [a, b, c, d], answer: A,\n"
        "     note: test fixture}\n",
        encoding="utf-8")
    api.run("multiverse", model="fake:constant", data=str(data), out=tmp_path / "run", progress=False,
            scoring="generate", strategies="cot", backend_options={"text": TAGGED},
            options={"judge_scoring": "generate", "embedder": "minilm"})   # the one get_embedder() gives
    recs = {r.stage: r for r in load_records(tmp_path / "run")}
    seg, judge, ans = recs["segment"], recs["judge"], recs["answer"]
    assert seg.role == "judge" and judge.role == "judge"
    assert ans.parsed == INVALID and judge.parsed == INVALID    # no letter, no "t,a" score: counted, not guessed
    direct = think_act_matching(parse_segments(TAGGED), get_embedder())
    assert seg.parsed["tam"] == pytest.approx(direct["tam"], abs=1e-5) and seg.meta["embedder"]
    assert seg.parsed["segmenter"] == "llm"
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    a = metrics["strategies"]["cot"]["canon"]["analysis"]
    assert a["tam"]["n"] == 1 and a["judge_invalid"] == 1


UNTAGGED = ("Gwen is falling from the clock tower and I am afraid I will not reach her. "
            "I choose A: I shoot a web down the tower to catch Gwen.")


def _one_item(tmp_path):
    data = tmp_path / "mv.yaml"
    data.write_text(
        "heroes:\n  - {id: h, name: H, note: test fixture,\n"
        "     versions: [{id: h-a, name: Alpha, universe: U, note: test fixture}]}\n"
        "canon:\n  - {version: h-a, phase: childhood, question: 'Q?', options: [a, b, c, d], answer: A,\n"
        "     note: test fixture}\n",
        encoding="utf-8")
    return data


def test_rule_fallback_and_logprob_judge_when_the_segmenter_writes_no_tags(tmp_path):
    data = _one_item(tmp_path)
    res = api.run("multiverse", model="fake:constant", data=str(data), out=tmp_path / "run", progress=False,
                  scoring="generate", strategies="cot", backend_options={"text": UNTAGGED},
                  options={"embedder": "minilm"})   # the one get_embedder() gives, mpnet installed or not
    assert res.manifest.options["judge_scoring"] == "logprob" and res.manifest.options["segment_fallback"] == "rules"
    recs = {r.stage: r for r in load_records(tmp_path / "run")}
    seg, judge = recs["segment"], recs["judge"]
    assert seg.response == UNTAGGED and seg.meta["segment_fallback"] == "rules"
    assert seg.parsed["segmenter"] == "rules" and seg.parsed["acting"] == ["I choose A: I shoot a web down the tower "
                                                                             "to catch Gwen."]
    direct = think_act_matching(rule_segments(UNTAGGED), get_embedder())
    assert seg.parsed["tam"] == pytest.approx(direct["tam"], abs=1e-5)
    think = recs["judge.think"]
    assert think.kind == judge.kind == "score" and think.role == judge.role == "judge"
    assert think.continuations == judge.continuations == JUDGE_DIGITS
    assert judge.prompt[-1] == {"role": "assistant", "content": f"{think.response},"}
    assert judge.parsed == parse_judge(f"{think.response},{judge.response}")
    assert judge.meta["judge_scoring"] == "logprob"
    a = res.metrics["strategies"]["cot"]["canon"]["analysis"]
    assert a["tam"]["n"] == 0 and a["segment_invalid"] == 1             # the paper's TAM: none
    assert a["tam_rules"]["n"] == 1 and a["rules_tried"] == 1 and a["judge_invalid"] == 0
    html = (tmp_path / "run" / "report.html").read_text()
    assert "TAM (rule segments, ours)" in html

    api.run("multiverse", model="fake:constant", data=str(data), out=tmp_path / "off", progress=False,
            scoring="generate", strategies="cot", backend_options={"text": UNTAGGED},
            options={"segment_fallback": "none"})
    seg = next(r for r in load_records(tmp_path / "off") if r.stage == "segment")
    assert seg.parsed == INVALID and seg.meta["segment_fallback"] == "none"


def test_bundled_model_end_to_end(tmp_path):
    """The default strategies (direct, cot, cross-direct) on a small balanced slice of the starter set."""
    res = api.run("multiverse", model="bundled", limit=2, out=tmp_path / "run", progress=False)
    assert res.manifest.strategies == ["direct", "cot", "cross-direct"] and res.manifest.scoring == "logprob"
    assert res.counts.errors == 0 and res.counts.items_failed == 0
    recs = load_records(tmp_path / "run")
    stages = {(r.strategy, r.stage.split(".")[0] if r.stage.startswith("as.") else r.stage) for r in recs}
    assert {("direct", "answer"), ("cot", "answer.reason"), ("cot", "answer"), ("cot", "segment"),
            ("cot", "judge"), ("cross-direct", "as")} <= stages
    for r in recs:
        if r.stage == "answer" or r.stage.startswith("as.") and not r.stage.endswith(".reason"):
            assert r.kind == "score" and r.parsed in ("A", "B", "C", "D")
        if r.stage == "segment":
            assert r.parsed == INVALID or r.parsed["tam"] is not None
        if r.stage == "judge":   # logprob by default on a local engine: always a well-formed pair
            assert r.kind == "score" and r.parsed != INVALID
        if r.stage == "answer.reason":
            assert r.completion_tokens <= 64
    m = res.metrics
    assert m["strategies"]["direct"]["canon"]["n"] >= 1 and m["cross"]["cross-direct"]["canon"]["n"] >= 2
    assert m["cot_minus_direct"]["canon"]["acc"] is not None
    html = (tmp_path / "run" / "report.html").read_text()
    assert "Canon events (Table 6)" in html and "Cross-version (Tables 9, 11)" in html
