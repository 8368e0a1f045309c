"""Paper protocols: decoding and scoring from the suite's data, a separate judge, independent
repeats, explicit ties. Runs go over real HTTP to the local fake OpenAI server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import write_mcq
from rolebound import api
from rolebound.errors import InputError
from rolebound.models import create_backend
from rolebound.protocol import DEMO_LABEL, Protocol, overrides_of, resolve
from rolebound.suites import get_suite
from rolebound.records import Decoding, Message
from rolebound.store import load_records
from rolebound.suites import get_suite as real_get_suite
from rolebound.suites.base import default_scoring_for
from rolebound.suites.mcq import MCQSuite
from rolebound.testing.fake_server import FakeServer

ROOT = Path(__file__).resolve().parents[1]
PAPER = Protocol(source="Test paper, Appendix H", decoding={"temperature": 0.0, "top_p": 0.95, "max_tokens": 256},
                 scoring="generate")
JUDGED = Protocol(source="Judged paper, Tables 4-5", decoding={"temperature": 0.6, "top_p": 0.95, "max_tokens": 1024},
                  judge_decoding={"temperature": 0.1, "max_tokens": 64}, scoring="generate",
                  judge_required=True, judge_separate=True)


class PaperMCQ(MCQSuite):
    protocol = PAPER


class JudgedMCQ(MCQSuite):
    protocol = JUDGED
    uses_judge = True

    async def run_item(self, item, ctx, strategy, settings):
        await super().run_item(item, ctx, strategy, settings)
        await ctx.chat("judge", [Message(role="user", content=f"Judge the answer to {item.id}")], role="judge")


@pytest.fixture
def suites(monkeypatch):
    table = {"paper-mcq": PaperMCQ, "judged-mcq": JudgedMCQ}
    monkeypatch.setattr(api, "get_suite", lambda name: table[name]() if name in table else real_get_suite(name))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test")


def _run(srv, tmp_path, suite="paper-mcq", name="run", **kw):
    opts = dict(model="openai:test-model", data=str(write_mcq(tmp_path / "q.jsonl", 4)), out=tmp_path / name,
                progress=False, backend_options={"base_url": srv.url + "/v1", "max_retries": 0})
    opts.update(kw)
    return api.run(suite, **opts)


def _bodies(srv, judge: bool | None = None):
    out = [a["body"] for a in srv.stats.arrivals if a.get("body")]
    if judge is None:
        return out
    return [b for b in out if ("Judge the answer" in json.dumps(b)) == judge]


# -- resolving ---------------------------------------------------------------------------------
def test_resolve_applies_the_paper_and_names_each_departure():
    r = resolve(PAPER, "openai", {"top_p": 1.0})
    assert r.mode == "paper" and r.decoding.temperature == 0.0 and r.decoding.max_tokens == 256
    assert r.departures == ["top_p 1.0 instead of 0.95"]
    assert "not the paper's protocol: top_p 1.0 instead of 0.95" in r.label
    assert resolve(PAPER, "vllm", {}).departures == [] and resolve(PAPER, "hf", {}).mode == "paper"


def test_demo_backends_keep_their_own_settings_clearly_labelled():
    r = resolve(PAPER, "bundled", {})
    assert r.mode == "demo" and r.decoding == Decoding() and r.label == DEMO_LABEL
    assert "not the paper's protocol" in DEMO_LABEL
    assert resolve(PAPER, "bundled", {}, mode="paper").decoding.top_p == 0.95     # --protocol paper
    assert resolve(PAPER, "openai", {}, mode="demo").mode == "demo"
    with pytest.raises(InputError):
        resolve(PAPER, "openai", {}, mode="papers")


def test_judge_decoding_comes_from_the_paper_and_keeps_the_run_seed():
    r = resolve(JUDGED, "openai", {"seed": 7}, {"max_tokens": 32})
    assert (r.judge_decoding.temperature, r.judge_decoding.max_tokens, r.judge_decoding.seed) == (0.1, 32, 7)
    assert r.departures == ["judge max_tokens 32 instead of 64"]


def test_only_the_fields_a_user_sets_override():
    assert overrides_of(Decoding(max_tokens=64)) == {"max_tokens": 64}
    assert overrides_of({"top_p": None, "seed": 3}) == {"seed": 3}
    assert overrides_of(Decoding.model_validate({"temperature": 0.5})) == {"temperature": 0.5}


def test_a_yaml_config_overrides_only_what_it_sets(tmp_path):
    from rolebound.config import load_config

    p = tmp_path / "run.yaml"
    p.write_text("suite: charm\nmodel: openai:m\ndecoding: {top_p: 1.0}\njudge_decoding: {temperature: 0.2}\n"
                 "protocol: paper\nallow_greedy_repeats: true\n")
    (req,) = load_config(p).expand()          # one RunRequest per run
    assert overrides_of(req.decoding) == {"top_p": 1.0} and overrides_of(req.judge_decoding) == {"temperature": 0.2}
    assert req.protocol == "paper" and req.allow_greedy_repeats is True
    r = resolve(PAPER, "openai", overrides_of(req.decoding))
    assert r.decoding.max_tokens == 256 and r.departures == ["top_p 1.0 instead of 0.95"]


def test_local_engines_other_than_the_demo_generate(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert default_scoring_for(create_backend(f"hf:{tmp_path}")) == "generate"
    assert default_scoring_for(create_backend("bundled")) == "logprob"


# -- runs against the fake server -----------------------------------------------------------------
@pytest.mark.slow
def test_paper_decoding_reaches_the_server_and_the_manifest(tmp_path, suites):
    with FakeServer(reply="B") as srv:
        res = _run(srv, tmp_path)
        bodies = _bodies(srv)
    m = res.manifest
    assert m.scoring == "generate" and (m.decoding.top_p, m.decoding.max_tokens) == (0.95, 256)
    assert m.protocol["mode"] == "paper" and m.protocol["departures"] == []
    assert m.protocol["source"] == "Test paper, Appendix H"
    assert bodies and all(b["top_p"] == 0.95 and b["temperature"] == 0.0 for b in bodies)
    report = (res.run_dir / "report.md").read_text()
    assert "Test paper, Appendix H (the paper's protocol)" in report


@pytest.mark.slow
def test_a_departure_is_listed_in_manifest_and_report(tmp_path, suites):
    with FakeServer(reply="B") as srv:
        res = _run(srv, tmp_path, decoding={"top_p": 1.0}, scoring="logprob")
    deps = res.manifest.protocol["departures"]
    assert deps == ["top_p 1.0 instead of 0.95", "scoring logprob instead of generate"]
    assert "not the paper&#39;s protocol: top_p 1.0 instead of 0.95" in (res.run_dir / "report.html").read_text()


@pytest.mark.slow
def test_a_judged_suite_on_a_real_model_needs_judge(tmp_path, suites):
    with FakeServer(reply="B") as srv:
        with pytest.raises(InputError, match="--judge"):
            _run(srv, tmp_path, suite="judged-mcq")
        assert srv.stats.requests == 0                       # refused before any call
        res = _run(srv, tmp_path, suite="judged-mcq", judge="self", name="self")
        judge_bodies, answer_bodies = _bodies(srv, judge=True), _bodies(srv, judge=False)
    m = res.manifest
    assert m.protocol["self_judged"] is True and m.judge == "openai:test-model"
    assert "self-judged (the paper judged with another model)" in m.protocol["departures"]
    assert (m.judge_decoding.temperature, m.judge_decoding.max_tokens) == (0.1, 64)
    assert len(judge_bodies) == 4 and all(b["temperature"] == 0.1 and b["max_tokens"] == 64 for b in judge_bodies)
    assert all(b["temperature"] == 0.6 for b in answer_bodies)
    assert "self-judged" in (res.run_dir / "report.md").read_text()


@pytest.mark.slow
def test_a_separate_judge_is_not_flagged(tmp_path, suites):
    with FakeServer(reply="B") as srv:
        res = _run(srv, tmp_path, suite="judged-mcq", judge="fake:random")
        assert len(_bodies(srv, judge=True)) == 0 and len(_bodies(srv, judge=False)) == 4
    m = res.manifest
    assert m.protocol["self_judged"] is False and m.judge == "fake:random"
    assert not any("self-judged" in d for d in m.protocol["departures"])
    judged = [r for r in load_records(res.run_dir) if r.role == "judge"]
    assert len(judged) == 4 and all(r.model == "fake:random" and r.error is None for r in judged)
    assert "self-judged" not in (res.run_dir / "report.md").read_text()


@pytest.mark.slow
def test_repeats_send_their_own_seeds(tmp_path, suites):
    with FakeServer(reply="B") as srv:
        res = _run(srv, tmp_path, repeats=3, decoding={"temperature": 0.7})
        seeds = {b["seed"] for b in _bodies(srv)}
    assert seeds == {0, 1, 2} and res.manifest.protocol["seeds"] == [0, 1, 2]
    recs = load_records(res.run_dir)
    assert {(r.repeat, r.seed) for r in recs} == {(0, 0), (1, 1), (2, 2)}
    over = res.metrics["over_repeats"]
    assert over["repeats"] == [0, 1, 2] and len(over["values"]["by_strategy.direct.rate"]["per_repeat"]) == 3
    assert "Mean +- SEM over 3 repeats" in (res.run_dir / "report.md").read_text()


@pytest.mark.slow
def test_greedy_repeats_are_refused_unless_asked_for(tmp_path, suites):
    with FakeServer(reply="B") as srv:
        with pytest.raises(InputError, match="--allow-greedy-repeats"):
            _run(srv, tmp_path, repeats=3)
        res = _run(srv, tmp_path, repeats=2, allow_greedy_repeats=True)
    assert res.manifest.repeats == 2


# -- ties ------------------------------------------------------------------------------------------
def test_exact_ties_are_recorded_and_counted(tmp_path, monkeypatch):
    import rolebound.models.fake as fake

    async def tied(self, requests):
        return [fake.ScoreResult(logprobs=[-1.0, -0.5, -0.5, -2.0], token_counts=[1] * 4) for _ in requests]

    monkeypatch.setattr(fake.FakeBackend, "score", tied)
    res = api.run("mcq", model="fake:random", data=str(write_mcq(tmp_path / "q.jsonl", 3)), out=tmp_path / "r",
                  progress=False)
    recs = load_records(res.run_dir)
    assert all(r.tied == ["B", "C"] and r.response == "B" for r in recs)
    assert res.metrics["score_ties"]["tied"] == 3 and res.metrics["score_ties"]["scored"] == 3
    assert "3 of 3 scored answers tie" in (res.run_dir / "report.md").read_text()


# -- the installed command -------------------------------------------------------------------------
def _cli(*args):
    exe = Path(sys.executable).with_name("rolebound")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=ROOT, env=dict(os.environ))


@pytest.mark.slow
def test_cli_refuses_greedy_repeats_with_one_line(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 2)
    res = _cli("run", "mcq", "--model", "fake:random", "--data", str(data), "--repeats", "3",
               "--out", str(tmp_path / "r"), "-q")
    assert res.returncode == 2 and "--allow-greedy-repeats" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    ok = _cli("run", "mcq", "--model", "fake:random", "--data", str(data), "--repeats", "2",
              "--temperature", "0.7", "--out", str(tmp_path / "r2"), "-q")
    assert ok.returncode == 0, ok.stderr
    assert json.loads((tmp_path / "r2" / "manifest.json").read_text())["protocol"]["seeds"] == [0, 1]


def test_cli_bad_decoding_value_is_one_line(tmp_path):
    res = _cli("run", "mcq", "--model", "fake:random", "--data", str(write_mcq(tmp_path / "q.jsonl", 2)),
               "--top-p", "1.5")
    assert res.returncode == 2 and "--top-p" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_cli_suites_protocol_lists_every_suite():
    res = _cli("suites", "--protocol")
    assert res.returncode == 0
    for name in ("charm", "knowledge-errors", "multiverse", "capability", "mcq"):
        assert name in res.stdout


@pytest.mark.slow
def test_cli_suites_marks_the_judged_ones():
    """`judge-check SUITE` points here for the suites that have a judge."""
    res = subprocess.run([str(Path(sys.executable).with_name("rolebound")), "suites"], capture_output=True,
                         text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    assert res.returncode == 0
    rows = {c[1].strip(): c[4].strip() for c in (line.split("\u2502") for line in res.stdout.splitlines())
            if len(c) > 5 and c[1].strip()}
    judged = {n for n, v in rows.items() if v == "yes"}
    assert judged == {"knowledge-errors", "multiverse", "capability"}, rows


# -- each suite's paper protocol, through the installed command and the fake server ---------------
def _suite_cli(srv, tmp_path, suite, *extra):
    return _cli("run", suite, "--model", "openai:test-model", "--base-url", srv.url + "/v1", "--limit", "2",
                "--out", str(tmp_path / suite), "-q", "--no-cache", *extra)


def _manifest(tmp_path, suite):
    return json.loads((tmp_path / suite / "manifest.json").read_text())


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-test")


@pytest.mark.slow
def test_charm_protocol_on_a_real_model(tmp_path, api_key):
    with FakeServer(reply="First, the role cannot know this.\nAnswer: 2") as srv:
        res = _suite_cli(srv, tmp_path, "charm")
        bodies = _bodies(srv)
    assert res.returncode == 0, res.stderr
    m = _manifest(tmp_path, "charm")
    assert m["scoring"] == "generate" and m["decoding"]["top_p"] == 0.95 and m["decoding"]["max_tokens"] == 256
    assert m["protocol"]["source"] == "CHARM Appendix H" and m["protocol"]["departures"] == []
    assert bodies and all((b["temperature"], b["top_p"], b["max_tokens"]) == (0.0, 0.95, 256) for b in bodies)


@pytest.mark.slow
def test_multiverse_protocol_needs_a_judge_and_uses_its_decoding(tmp_path, api_key):
    with FakeServer(reply="<thinking>I weigh it.</thinking><acting>I save them.</acting> Answer: A") as srv:
        refused = _suite_cli(srv, tmp_path, "multiverse")
        assert refused.returncode == 2 and "--judge" in refused.stderr and "Traceback" not in refused.stderr
        assert srv.stats.requests == 0
        res = _suite_cli(srv, tmp_path, "multiverse", "--judge", "self", "--strategy", "cot")
        bodies = _bodies(srv)
    assert res.returncode == 0, res.stderr
    m = _manifest(tmp_path, "multiverse")
    assert (m["decoding"]["temperature"], m["decoding"]["max_tokens"]) == (0.6, 1024)
    assert (m["judge_decoding"]["temperature"], m["judge_decoding"]["max_tokens"]) == (0.1, 1024)
    assert m["scoring"] == "generate" and m["protocol"]["self_judged"] is True
    temps = {b["temperature"] for b in bodies}
    assert temps == {0.6, 0.1} and all(b["max_tokens"] <= 1024 for b in bodies)
    assert "self-judged" in (tmp_path / "multiverse" / "report.md").read_text()
    judged = [r for r in load_records(tmp_path / "multiverse") if r.stage == "judge"]
    assert judged and all(r.meta["judge_input"] == "segmented" for r in judged)     # Section 4.2
    assert all("<thinking>" in r.prompt[-1]["content"] for r in judged)


@pytest.mark.slow
def test_capability_protocol_gives_reasoning_room(tmp_path, api_key):
    with FakeServer(reply="I think so. \\boxed{B}") as srv:
        res = _suite_cli(srv, tmp_path, "capability", "--strategy", "identity", "--judge", "self")
        bodies = _bodies(srv)
    assert res.returncode == 0, res.stderr
    m = _manifest(tmp_path, "capability")
    assert m["decoding"]["max_tokens"] >= 32768 and m["judge_decoding"]["max_tokens"] == 4096
    answers = [b for b in bodies if b["max_tokens"] >= 32768]
    judged = [b for b in bodies if b["max_tokens"] == 4096]
    assert answers and judged and all(b["temperature"] == 0.0 for b in judged)


@pytest.mark.slow
def test_knowledge_errors_needs_a_judge(tmp_path, api_key):
    with FakeServer(reply="explanation: fine. judgment: yes") as srv:
        res = _suite_cli(srv, tmp_path, "knowledge-errors")
        assert res.returncode == 2 and "--judge" in res.stderr and len(res.stderr.strip().splitlines()) == 1
        ok = _suite_cli(srv, tmp_path, "knowledge-errors", "--judge", "self")
    assert ok.returncode == 0, ok.stderr
    assert _manifest(tmp_path, "knowledge-errors")["protocol"]["self_judged"] is True


@pytest.mark.model
def test_hf_on_the_converted_bundled_folder_generates(tmp_path):
    from rolebound.models.bundled import converted_dir

    res = api.run("charm", model=f"hf:{converted_dir()}", limit=2, out=tmp_path / "r", progress=False,
                  decoding={"max_tokens": 8})
    assert res.manifest.scoring == "generate" and res.manifest.protocol["mode"] == "paper"
    assert res.manifest.protocol["departures"] == ["max_tokens 8 instead of 256"]


def test_only_the_default_bundled_model_is_a_demo_model():
    from rolebound.protocol import is_demo, is_demo_spec

    assert is_demo("bundled") and is_demo("bundled", "smollm2-135m") and is_demo("fake", "random")
    assert not is_demo("bundled", "qwen2.5-coder-1.5b") and not is_demo("openai", "gpt-4o-mini")
    assert is_demo_spec("bundled") and is_demo_spec("bundled:smollm2-135m") and is_demo_spec("fake:x")
    assert not is_demo_spec("bundled:qwen2.5-coder-1.5b") and not is_demo_spec(None)
    p = resolve(get_suite("charm").protocol, "bundled", {}, model_name="qwen2.5-coder-1.5b")
    assert p.mode == "paper"
    assert resolve(get_suite("charm").protocol, "bundled", {}, model_name="smollm2-135m").mode == "demo"
