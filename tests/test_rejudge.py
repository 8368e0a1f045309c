"""The core judge service (rolebound.rejudge): rounds, the newest verdicts, resume-or-new."""

import pytest

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


# -- `rolebound report RUN --judge MODEL`, the one service, for every judged suite -------------------
JUDGED = {
    "knowledge-errors": dict(strategies="vanilla", options={"hidden_states": False}),
    "capability": dict(strategies="identity", options={"roles": "primary"}),
    "multiverse": dict(strategies="cot", scoring="generate", options={"judge_input": "raw"}),
}


class _FlatEmbedder:
    name = "flat (test)"

    def cosine_matrix(self, a, b):
        import numpy as np

        return np.ones((len(a), len(b)))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(JUDGED))
def test_report_judge_rejudges_every_judged_suite_from_the_cli(name, tmp_path, monkeypatch):
    import json
    import subprocess
    import sys
    from pathlib import Path

    from rolebound import api
    from rolebound.scoring import embeddings

    monkeypatch.setattr(embeddings, "LazyEmbedder", lambda path=None, kind=None: _FlatEmbedder())
    monkeypatch.setattr(embeddings, "mpnet_available", lambda: False)
    out = tmp_path / "run"
    api.run(name, model="fake:random", limit=2, out=out, progress=False, **JUDGED[name])
    script = Path(sys.executable).parent / "rolebound"
    res = subprocess.run([str(script), "report", str(out), "--judge", "fake:echo", "-q"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "judge round" in res.stdout and "with fake:echo" in res.stdout
    log = json.loads((out / "manifest.json").read_text())["rejudges"]
    assert log[-1]["judge"] == "fake:echo" and log[-1]["answers"] > 0


def test_a_suite_without_a_judge_has_none_to_replace(tmp_path):
    from rolebound import api
    from rolebound.errors import InputError
    from rolebound.rejudge import rejudge

    out = tmp_path / "run"
    api.run("charm", model="fake:random", limit=3, out=out, progress=False, options={"similarity": False})
    with pytest.raises(InputError, match="has no judge to replace"):
        rejudge(out, "fake:echo", progress=False)
