"""knowledge-errors with the real bundled model (SmolLM2-135M on the CPU): the construction steps
and an end-to-end S2RD run where the same model answers and judges. The model rarely follows the
formats, so the tests check that every outcome is recorded and counted, never guessed."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from rolebound import api
from rolebound.suites.knowledge_errors import build as B
from rolebound.records import Decoding
from rolebound.runner import ItemContext, Session
from rolebound.store import RunDir, load_records
from rolebound.suites.knowledge_errors.data import load_items, load_topics, starter_dir

pytestmark = pytest.mark.model


def test_construction_steps_with_the_real_model(bundled, tmp_path):
    it = load_items(starter_dir() / "starter.jsonl")[0]
    rd = RunDir(tmp_path / "steps")
    rd.open_for_append()
    session = Session(rd, "knowledge-errors", bundled, Decoding(max_tokens=24), cache=None, use_cache=False)
    ctx = ItemContext(session=session, item_id="steps", strategy=B.STRATEGY)

    async def steps():
        topics = load_topics()[:2]
        return await asyncio.gather(
            B.step_memories(ctx, it.character, it.chunk, max_tokens=24),
            B.step_inject(ctx, "KKE", 0, it.character, it.memory_category, it.correct_memory, max_tokens=24),
            B.step_inject(ctx, "UKE", 0, it.character, it.memory_category, it.correct_memory, topics, max_tokens=24),
            B.step_question(ctx, "question.kke.0", it.character, it.false_memory, max_tokens=24))

    (mems, drops), kke, uke, question = asyncio.run(steps())
    rd.close()
    recs = {r.stage: r for r in load_records(tmp_path / "steps")}
    assert set(recs) == {"memories", "kke.0", "uke.0", "question.kke.0"}
    assert all(r.error is None and r.response and r.role == "generator" for r in recs.values())
    assert "Ada Lovelace" in recs["memories"].prompt[0]["content"]
    assert topics_in(recs["uke.0"].prompt[0]["content"], load_topics()[:2])
    # every line of the memories reply is either kept or counted under a reason
    reply = B._MD.sub("", recs["memories"].response)
    n_lines = sum(1 for line in reply.splitlines() if line.strip())
    assert len(mems) + sum(drops.values()) == max(n_lines, 1)
    for out in (kke, uke):
        assert out in ("format", "multiple_errors", "not_first_person") or (isinstance(out, tuple) and len(out) == 2)
    assert question is None or question.endswith("?")


def topics_in(prompt: str, topics: list[str]) -> bool:
    return all(f'"{t}"' in prompt for t in topics)


def test_build_counts_what_the_real_model_gets_wrong(bundled, tmp_path, monkeypatch):
    from rolebound import models

    corpus = tmp_path / "c.corpus.yaml"
    corpus.write_text("- character: Ada Lovelace\n  note: test\n  text: |\n"
                      "    Ada met Charles Babbage in London in June 1833. She saw his Difference Engine.\n",
                      encoding="utf-8")
    monkeypatch.setattr(models, "create_backend", lambda spec, decoding=None, **kw: bundled)
    out = tmp_path / "built.jsonl"
    res, _ = B.run_build(str(corpus), str(out), model="bundled", decoding=Decoding(max_tokens=48),
                         opts=B.BuildOptions(max_memories=1), use_cache=False)
    c = res.counts
    assert c["chunks"] == 1 and c["items"] == 2 * c.get("pairs_kept", 0)
    assert c.get("pairs_kept", 0) + c.get("pairs_dropped", 0) == min(1, c.get("memories_parsed", 0))
    assert len(load_items(out)) == c["items"]
    recs = load_records(tmp_path / "built.build")
    assert recs and all(r.error is None for r in recs)


def test_s2rd_end_to_end_on_the_bundled_model(tmp_path):
    out = tmp_path / "run"
    res = api.run("knowledge-errors", model="bundled", strategies="s2rd", limit=2, out=out, progress=False,
                  decoding={"max_tokens": 32}, options={"step_max_tokens": 16})
    assert res.manifest.judge == "bundled:smollm2-135m" and not res.errors
    recs = load_records(out)
    assert not [r for r in recs if r.error]
    stages = sorted(r.stage for r in recs)
    # one shared self-narrative; recollection, doubt, answer and judge for each of the two items
    assert stages == sorted(["s2rd.narrative"] + ["s2rd.recollection", "s2rd.doubt", "answer", "judge"] * 2)
    items = {r.meta["error_type"] for r in recs if r.stage == "answer"}
    assert items == {"KKE", "UKE"}
    for r in recs:
        if r.role == "judge":
            # a local engine: the judge scores " yes" vs " no" by default
            assert r.model == "bundled:smollm2-135m" and r.kind == "score"
            assert r.parsed in ("yes", "no") and r.meta["judge_scoring"] == "logprob"
        if r.stage == "answer":
            # one fragment per recollected memory (m=3); the question itself when none was parsed
            n = r.meta["recollected"]
            assert len(r.meta["self_rag_chunks"]) == (n if n else 3) and len(r.meta["cases"]) == 4
    met = json.loads((out / "metrics.json").read_text())
    j = met["accuracy"]["s2rd"]["judgments"]
    assert j["answers"] == 2 and j["yes"] + j["no"] == 2 and j["invalid"] == 0
    yes = sum(1 for r in recs if r.role == "judge" and r.parsed == "yes")
    assert met["accuracy"]["s2rd"]["overall"]["mean"] == pytest.approx(100.0 * yes / 2)
    md = (out / "report.md").read_text()
    assert "Table 2 layout: Known Knowledge Errors" in md and "Table 3 layout" in md
    assert (out / "figures" / "tsne.png").exists()
    z = np.load(out / "hidden_states.npz")
    assert z["vectors"].shape == (3, 576) and sorted(z["kind"]) == ["KKE", "UKE", "correct"]
    assert "Mean cosine distance" in md


def test_logprob_judge_on_the_bundled_model_gives_only_verdicts(bundled, tmp_path):
    """The bundled judge never writes `judgment: yes|no` when it generates; scored, every item
    gets a verdict."""
    from rolebound.suites.knowledge_errors.strategies import Methods

    items = load_items(starter_dir() / "starter.jsonl")[:2]          # one memory: its KKE and UKE query
    rd = RunDir(tmp_path / "judge")
    rd.open_for_append()
    session = Session(rd, "knowledge-errors", bundled, Decoding(max_tokens=16), judge=bundled, cache=None,
                      use_cache=False)
    methods = Methods(judge_scoring="logprob")
    replies = ["No, it was someone else.", "What is that? I have never heard of it."]

    async def judge_all():
        return await asyncio.gather(*(
            methods.judge(ItemContext(session=session, item_id=it.id, strategy="vanilla"), character=it.character,
                          error_type=it.error_type, correct_memory=it.correct_memory, query=it.query, response=reply)
            for it, reply in zip(items, replies)))

    recs = asyncio.run(judge_all())
    rd.close()
    assert sorted(it.error_type for it in items) == ["KKE", "UKE"]
    for r in recs:
        assert r.error is None and r.kind == "score" and r.parsed in ("yes", "no")
        assert len(r.logprobs) == 2 and all(np.isfinite(r.logprobs)) and r.prompt[-1]["content"] == "judgment:"
