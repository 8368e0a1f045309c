"""The core judge service (rolebound.rejudge): rounds, the newest verdicts, resume-or-new."""

from rolebound.records import Decoding, Record, RunManifest
from rolebound.rejudge import judge_rounds, judge_stage, newest_round, next_round, rounds_text, verdicts


def _judge(item, model, round_, parsed="yes", error=None):
    meta = {"judge_round": round_} if round_ else {}
    stage = judge_stage("judge", round_)
    return Record(call_id=f"{item}/s/{stage}", item_id=item, suite="x", strategy="s", stage=stage, role="judge",
                  kind="chat", model=model, prompt="p", parsed=parsed, error=error, meta=meta)


def _manifest(judge=None):
    return RunManifest(suite="x", strategies=["s"], model="fake:random", backend="fake", judge=judge,
                       decoding=Decoding(), dataset="d", dataset_hash="h", n_items=1, package_version="0")


def test_rounds_keep_history_and_the_newest_is_read():
    recs = [_judge("a", "j0", 0, "no"), _judge("b", "j0", 0, "no"), _judge("a", "j1", 1), _judge("b", "j1", 1, error="x")]
    assert judge_stage("judge.kid", 0) == "judge.kid" and judge_stage("judge.kid", 2) == "judge.kid@2"
    assert judge_rounds(recs) == {0: "j0", 1: "j1"} and newest_round(recs) == 1
    assert [(r.item_id, r.parsed) for r in verdicts(recs)] == [("a", "yes"), ("b", "yes")]   # b's failed call too
    assert [r.parsed for r in verdicts(recs, 0)] == ["no", "no"]
    assert verdicts([]) == [] and newest_round([]) is None
    assert rounds_text(judge_rounds(recs), 1) == "round 1: j1 (earlier: 0: j0)"


def test_next_round_resumes_only_the_same_judge_in_the_same_mode():
    recs = [_judge("a", "j0", 0), _judge("a", "j1", 1)]
    assert next_round(recs, _manifest("j0"), "j1") == 1                     # resume the newest round
    assert next_round(recs, _manifest("j0"), "j0") == 2                     # an older judge: a new round
    assert next_round(recs, _manifest("j0"), "j1", "logprob", {1: "generate"}) == 2
    assert next_round([], _manifest(None), "j0") == 0                       # never judged: round 0
    assert next_round([], _manifest("j0"), "j0") == 0 and next_round([], _manifest("j0"), "j9") == 1
