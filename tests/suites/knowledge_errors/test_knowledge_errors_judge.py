"""knowledge-errors judge scoring (`--set judge_scoring=generate|logprob`): the log-likelihood judge,
the default rule (the same as `--scoring` in charm), the early error and re-judging (fake backends;
the bundled-model check is in test_knowledge_errors_model.py)."""

from __future__ import annotations

import json

import pytest

from rolebound import api
from rolebound.errors import CapabilityError, InputError
from rolebound.suites.knowledge_errors import metrics as M
from rolebound.models.base import CHAT, CHAT_TEMPLATE, COMPLETE, ScoreResult
from rolebound.models.fake import FakeBackend
from rolebound.records import Record
from rolebound.scoring.parsers import INVALID
from rolebound.store import load_records
from rolebound.suites.knowledge_errors import prompts as P
from rolebound.suites import get_suite
from rolebound.suites.knowledge_errors.strategies import judge_scoring_mode

NO_HIDDEN = {"hidden_states": False}


class NoScoreJudge(FakeBackend):
    """A backend that generates but cannot score log-likelihoods."""

    capabilities = frozenset({CHAT, COMPLETE, CHAT_TEMPLATE})


class ApiLikeJudge(FakeBackend):
    """Scores, but is not a local engine (stands in for an API backend)."""

    backend = "openai"


async def _kke_yes_uke_no(self, requests):
    """Scripted judge: " yes" for every KKE judge prompt (Table 14), " no" for UKE (Table 15)."""
    out = []
    for r in requests:
        uke = "could not possibly know" in r.messages[0].content
        lps = {" yes": -2.0 if uke else -0.5, " no": -0.5 if uke else -2.0}
        out.append(ScoreResult(logprobs=[lps[c] for c in r.continuations], token_counts=[1] * len(r.continuations),
                               prompt_tokens=10))
    return out


def test_logprob_judge_records_yes_no_and_accuracies_follow(tmp_path, monkeypatch):
    monkeypatch.setattr(FakeBackend, "score", _kke_yes_uke_no)
    out = tmp_path / "run"
    res = api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=6, out=out, progress=False,
                  options={**NO_HIDDEN, "judge_scoring": "logprob"})
    recs = load_records(out)
    answers = {r.item_id: r for r in recs if r.stage == "answer"}
    judges = [r for r in recs if r.role == "judge"]
    assert len(judges) == 6 and not [r for r in recs if r.error]
    for j in judges:
        a = answers[j.item_id]
        et = a.meta["error_type"]
        # the Table 14/15 prompt, unchanged, as the user turn; then the prefilled judgment line
        tpl = P.JUDGE_KKE if et == "KKE" else P.JUDGE_UKE
        want = tpl.format(role_name=a.meta["character"], correct_memory=a.meta["correct_memory"],
                          given_query=a.meta["query"], given_response=a.response)
        assert j.prompt == [{"role": "user", "content": want}, {"role": "assistant", "content": "judgment:"}]
        assert j.kind == "score" and j.continuations == [" yes", " no"]
        assert j.parsed == ("yes" if et == "KKE" else "no") and j.correct == (et == "KKE")
        assert j.meta["judge_scoring"] == "logprob" and j.meta["judge_round"] == 0
    acc = res.metrics["accuracy"]["vanilla"]
    assert acc["KKE"]["all"]["mean"] == 100.0 and acc["UKE"]["all"]["mean"] == 0.0
    assert acc["overall"]["mean"] == 50.0
    assert acc["judgments"] == {"answers": 6, "yes": 3, "no": 3, "invalid": 0, "unjudged": 0}
    assert res.metrics["judge_scoring"] == {"0": "logprob"}
    assert res.manifest.options["judge_scoring"] == "logprob"
    assert json.loads((out / "manifest.json").read_text())["options"]["judge_scoring"] == "logprob"
    md = (out / "report.md").read_text()
    assert "| judge scoring | logprob" in md and "round 0: fake:random (logprob)" in md
    assert "log-probs: yes -0.500, no -2.000" in (out / "report.html").read_text()   # per-answer table
    assert ("judge scoring", "logprob") in get_suite("knowledge-errors").summary(res.metrics)
    # the same command resumes (the resolved default equals the explicit choice)
    again = api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=6, out=out,
                    progress=False, options=NO_HIDDEN)
    assert again.counts.calls == 0


def test_generate_mode_keeps_parsing_and_invalid_counting(tmp_path):
    out = tmp_path / "run"
    res = api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=6, out=out, progress=False,
                  options={**NO_HIDDEN, "judge_scoring": "generate"})
    judges = [r for r in load_records(out) if r.role == "judge"]
    assert all(j.kind == "chat" and j.meta["judge_scoring"] == "generate" for j in judges)
    assert all(j.parsed == P.parse_judgment(j.response) for j in judges)
    j = res.metrics["accuracy"]["vanilla"]["judgments"]
    assert j["invalid"] == sum(x.parsed == INVALID for x in judges) and j["invalid"] > 0   # fake replies "Yes." etc.
    assert res.metrics["judge_scoring"] == {"0": "generate"}
    assert "invalid: no single `judgment: yes|no`" in (out / "report.md").read_text()


def test_default_mode_follows_the_charm_scoring_rule():
    charm = get_suite("charm")
    cases = [(FakeBackend("random"), "logprob"), (NoScoreJudge("random"), "generate"),
             (ApiLikeJudge("random"), "generate")]
    for backend, want in cases:
        assert judge_scoring_mode(None, backend) == want
        assert charm.default_scoring(backend) == want          # the two suites decide alike
    assert judge_scoring_mode("generate", FakeBackend("random")) == "generate"
    assert judge_scoring_mode("LogProb", ApiLikeJudge("random")) == "logprob"


def test_bad_or_impossible_judge_scoring_fails_before_any_call(tmp_path, monkeypatch):
    s = get_suite("knowledge-errors")
    with pytest.raises(InputError) as e:
        s.check(FakeBackend("random"), s.run_settings(["vanilla"], options={"judge_scoring": "maybe"}),
                FakeBackend("random"))
    assert e.value.field == "--set" and "'judge_scoring'" in str(e.value)    # the framework's one format
    settings = s.run_settings(["vanilla"], options={"judge_scoring": "logprob"})
    with pytest.raises(CapabilityError, match="judge_scoring=logprob"):
        s.check(FakeBackend("random"), settings, NoScoreJudge("random"))
    # through the API: the run directory is never written
    real = api.create_backend
    monkeypatch.setattr(api, "create_backend", lambda spec, decoding=None, **kw:
                        NoScoreJudge("random", decoding) if spec == "fake:echo" else real(spec, decoding, **kw))
    out = tmp_path / "run"
    with pytest.raises(CapabilityError) as e:
        api.run("knowledge-errors", model="fake:random", judge="fake:echo", limit=2, out=out, progress=False,
                options={**NO_HIDDEN, "judge_scoring": "logprob"})
    assert "--set judge_scoring=generate" in str(e.value) and "cannot" in str(e.value)
    assert not (out / "records.jsonl").exists()
    # without the option, a judge that cannot score falls back to generating
    res = api.run("knowledge-errors", model="fake:random", judge="fake:echo", limit=2, out=out, progress=False,
                  options=NO_HIDDEN)
    assert res.manifest.options["judge_scoring"] == "generate"


def test_rejudge_uses_the_default_rule_of_the_new_judge(tmp_path, monkeypatch):
    from rolebound import models
    from rolebound.rejudge import rejudge

    out = tmp_path / "run"
    api.run("knowledge-errors", model="fake:random", strategies="vanilla", limit=4, out=out, progress=False,
            options={**NO_HIDDEN, "judge_scoring": "generate"})
    # same judge, other mode: a new round, not a resumed round 0
    rejudge(out, "fake:random", progress=False)
    recs = load_records(out)
    r1 = [r for r in recs if r.stage == "judge@1"]
    assert len(r1) == 4 and all(r.kind == "score" and r.parsed in ("yes", "no") for r in r1)
    assert all(r.meta["judge_scoring"] == "logprob" and r.meta["judge"] == "fake:random" for r in r1)
    man = json.loads((out / "manifest.json").read_text())
    assert man["rejudges"][-1]["round"] == 1 and man["rejudges"][-1]["judge_scoring"] == "logprob"
    met, _ = api.build_report(out)
    assert met["judge_scoring"] == {"0": "generate", "1": "logprob"}
    assert "round 1: fake:random (logprob) (earlier: 0: fake:random (generate))" in (out / "report.md").read_text()
    # a judge that is not a local engine generates, as its own run would
    real = models.create_backend
    monkeypatch.setattr(models, "create_backend", lambda spec, decoding=None, **kw:
                        ApiLikeJudge("random", decoding) if spec == "openai:judge" else real(spec, decoding, **kw))
    rejudge(out, "openai:judge", progress=False)
    r2 = [r for r in load_records(out) if r.stage == "judge@2"]
    assert len(r2) == 4 and all(r.kind == "chat" and r.meta["judge_scoring"] == "generate" for r in r2)
    assert all(r.parsed == P.parse_judgment(r.response) for r in r2)
    assert json.loads((out / "manifest.json").read_text())["rejudges"][-1]["judge_scoring"] == "generate"


def test_judge_modes_of_records_without_the_field():
    def judge(round_, kind, meta=None):
        return Record(call_id=f"a/v/j{round_}", item_id="a", suite="knowledge-errors", strategy="vanilla",
                      stage=M.judge_stage(round_), role="judge", kind=kind, meta={"judge_round": round_, **(meta or {})})

    recs = [judge(0, "chat"), judge(1, "score"), judge(2, "chat", {"judge_scoring": "generate"})]
    assert M.judge_modes(recs) == {0: "generate", 1: "logprob", 2: "generate"}
