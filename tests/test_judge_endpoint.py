"""A judge (and an extractor) on its own endpoint: each server gets its own calls, with its own
key, and the run files name both endpoints (without credentials), never a key.

Two fake OpenAI-compatible servers (rolebound.testing.fake_server) on 127.0.0.1; the CLI runs as
the installed `rolebound` script in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.config import RunConfig
from rolebound.errors import InputError
from rolebound.store import load_records
from rolebound.testing.fake_server import FakeServer

MODEL_KEY = "sk-model-0123456789-secret"
JUDGE_KEY = "sk-judge-9876543210-secret"
JUDGE_REPLY = '{"RV": 2, "C": 1, "RC": 0}'
SCRIPT = Path(sys.executable).with_name("rolebound")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


@pytest.fixture
def servers():
    with FakeServer(reply="So the answer is \\boxed{B}") as model, FakeServer(reply=JUDGE_REPLY) as judge:
        yield model, judge


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", MODEL_KEY)
    monkeypatch.setenv("JUDGE_KEY", JUDGE_KEY)


def rb(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **(env or {})})


def one_error(res, code: int = 2) -> str:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and len(err.splitlines()) == 1, err
    return err


def models_asked(srv: FakeServer) -> set:
    return {a["model"] for a in srv.stats.arrivals if a["model"]}


def no_secret_in(folder: Path, *secrets: str) -> None:
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        for s in secrets:
            assert s not in text, (p.name, s)


def capability(msrv: FakeServer, jsrv: FakeServer, out: Path, **kw):
    opts = dict(model="openai:test-model", strategies="identity", limit=1, out=out, progress=False,
                judge="openai:judge-model", use_cache=False,
                backend_options={"base_url": msrv.url + "/v1", "max_retries": 0},
                judge_options={"base_url": jsrv.url + "/v1", "api_key_env": "JUDGE_KEY"})
    opts.update(kw)
    return api.run("capability", **opts)


@pytest.mark.slow
def test_the_judge_calls_go_to_the_judge_server_with_its_own_key(servers, keys, tmp_path):
    model, judge = servers
    res = capability(model, judge, tmp_path / "run")
    assert models_asked(model) == {"test-model"} and models_asked(judge) == {"judge-model"}
    assert model.stats.requests == 6 and judge.stats.requests == 6        # 6 roles: 6 answers, 6 verdicts
    assert model.stats.keys_seen == {MODEL_KEY} and judge.stats.keys_seen == {JUDGE_KEY}
    m = res.manifest
    assert m.judge == "openai:judge-model"
    assert m.endpoints == {"model": model.url + "/v1", "judge": judge.url + "/v1"}
    verdicts = [r for r in load_records(res.run_dir) if r.role == "judge"]
    assert len(verdicts) == 6 and all(r.parsed == {"RV": 2, "C": 1, "RC": 0} for r in verdicts)
    report = (res.run_dir / "report.md").read_text()
    assert f"judge endpoint | {judge.url}/v1" in report
    no_secret_in(res.run_dir, MODEL_KEY, JUDGE_KEY)


@pytest.mark.slow
def test_credentials_in_the_judge_url_stay_out_of_the_run_files(servers, keys, tmp_path):
    model, judge = servers
    url = judge.url.replace("http://", "http://judgeuser:hunter2pw@") + "/v1"
    res = capability(model, judge, tmp_path / "run", judge_options={"base_url": url})
    assert judge.stats.requests == 6 and res.manifest.endpoints["judge"] == judge.url + "/v1"
    no_secret_in(res.run_dir, "hunter2pw", MODEL_KEY)
    from rolebound.models.openai_api import OpenAIBackend

    b = OpenAIBackend("m", base_url="http://u:pw@127.0.0.1:9/v1?api-key=qu3rysecret")
    assert b.endpoint_url() == "http://127.0.0.1:9/v1" and "qu3rysecret" not in json.dumps(b.info())


def test_without_judge_options_the_judge_keeps_todays_endpoint_rules(servers, keys, tmp_path):
    """No judge options: the judge shares the run's options but not its base URL (nor the key
    variable of the model's server), so it goes to the default endpoint."""
    from rolebound.api import other_backend

    b = other_backend("openai:j", None, {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "NOPE",
                                          "timeout": 7.0, "tokenizer": "/x"}, None, "--judge-opt")
    assert b.base_url is None and b.timeout == 7.0 and b._tokenizer_path is None
    assert b.endpoint_url() == "https://api.openai.com/v1"


def test_a_typo_in_a_judge_option_names_the_flag(servers, keys, tmp_path):
    model, judge = servers
    with pytest.raises(InputError, match="no option 'base_ulr'") as exc:
        capability(model, judge, tmp_path / "run", judge_options={"base_ulr": "x"})
    assert exc.value.field == "--judge-opt"
    with pytest.raises(InputError, match="need --judge"):
        capability(model, judge, tmp_path / "run", judge="self")
    assert model.stats.requests == 0 and judge.stats.requests == 0


@pytest.mark.slow
def test_the_same_model_name_on_another_server_is_another_judge(servers, keys, tmp_path):
    model, judge = servers
    res = capability(model, judge, tmp_path / "run", judge="openai:test-model")
    assert model.stats.requests == 6 and judge.stats.requests == 6
    assert res.manifest.protocol["self_judged"] is False


def test_yaml_judge_backend_and_extractor_backend_reach_api_run():
    cfg = RunConfig.model_validate({"suite": "capability", "model": "openai:m", "judge": "openai:deepseek-chat",
                                    "backend": {"base_url": "http://127.0.0.1:8000/v1"},
                                    "judge_backend": {"base_url": "https://api.deepseek.com/v1",
                                                      "api_key_env": "DEEPSEEK_API_KEY"},
                                    "extractor_backend": {"base_url": "http://127.0.0.1:8001/v1"}})
    (run,) = cfg.expand()          # one RunRequest per run of the grid (rolebound.request)
    assert run.judge_options.given() == {"base_url": "https://api.deepseek.com/v1", "api_key_env": "DEEPSEEK_API_KEY"}
    assert run.extractor_options.given() == {"base_url": "http://127.0.0.1:8001/v1"}
    assert RunConfig.model_validate({"suite": "charm"}).expand()[0].judge_options.given() == {}


@pytest.mark.slow
def test_the_extractor_on_its_own_endpoint(keys, tmp_path):
    """charm's generate protocol: the answers the rules read as none go to the extractor's server."""
    with FakeServer(reply="I cannot say.") as model, FakeServer(reply="2") as ex:
        res = api.run("charm", model="openai:test-model", limit=2, out=tmp_path / "run", progress=False,
                      use_cache=False, extractor="openai:reader",
                      backend_options={"base_url": model.url + "/v1", "max_retries": 0},
                      extractor_options={"base_url": ex.url + "/v1", "api_key_env": "JUDGE_KEY"})
        assert ex.stats.requests > 0 and models_asked(ex) == {"reader"} and models_asked(model) == {"test-model"}
        assert ex.stats.keys_seen == {JUDGE_KEY}
    assert res.manifest.endpoints == {"model": model.url + "/v1", "extractor": ex.url + "/v1"}


# -- through the installed script ---------------------------------------------------------------
@pytest.mark.slow
@needs_script
def test_cli_run_and_rejudge_on_the_judge_server(servers, tmp_path):
    model, judge = servers
    env = {"OPENAI_API_KEY": MODEL_KEY, "JUDGE_KEY": JUDGE_KEY}
    out = tmp_path / "run"
    res = rb("run", "capability", "--model", "openai:test-model", "--base-url", model.url + "/v1",
             "--strategy", "identity", "--limit", "1", "--judge", "openai:judge-model",
             "--judge-base-url", judge.url + "/v1", "--judge-api-key-env", "JUDGE_KEY",
             "--judge-opt", "timeout=30", "--out", out, "-q", "--no-cache", env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert models_asked(judge) == {"judge-model"} and judge.stats.keys_seen == {JUDGE_KEY}
    assert model.stats.keys_seen == {MODEL_KEY} and models_asked(model) == {"test-model"}
    m = json.loads((out / "manifest.json").read_text())
    assert m["endpoints"] == {"model": model.url + "/v1", "judge": judge.url + "/v1"}

    with FakeServer(reply=JUDGE_REPLY) as second:
        res = rb("report", out, "--judge", "openai:judge-b", "--judge-base-url", second.url + "/v1",
                 "--judge-api-key-env", "JUDGE_KEY", "-q", env=env)
        assert res.returncode == 0, res.stderr[-2000:]
        assert second.stats.requests == 6 and models_asked(second) == {"judge-b"}
        assert second.stats.keys_seen == {JUDGE_KEY}
    m = json.loads((out / "manifest.json").read_text())
    assert m["rejudges"][-1]["endpoint"] == second.url + "/v1" and m["rejudges"][-1]["judge"] == "openai:judge-b"
    assert model.stats.requests == 6                          # re-judging asked the model nothing
    no_secret_in(out, MODEL_KEY, JUDGE_KEY)


@pytest.mark.slow
@needs_script
def test_cli_judge_option_errors_are_one_line(servers, tmp_path):
    model, _ = servers
    base = ["run", "capability", "--model", "openai:test-model", "--base-url", model.url + "/v1",
            "--strategy", "identity", "--limit", "1", "--out", tmp_path / "run", "-q"]
    assert "--judge-opt" in one_error(rb(*base, "--judge", "openai:j", "--judge-opt", "colour=blue"))
    assert "need --judge" in one_error(rb(*base, "--judge-base-url", "http://127.0.0.1:9/v1"))
    assert "uses no judge" in one_error(rb("run", "mcq", "--model", "fake:random", "--judge-base-url", "http://x/v1"))
    assert "need --judge" in one_error(rb("report", tmp_path, "--judge-base-url", "http://127.0.0.1:9/v1"))
    assert model.stats.requests == 0


@pytest.mark.slow
@needs_script
def test_cli_card_finishes_on_an_api_model_with_its_judge_on_another_server(servers, keys, tmp_path):
    """The documented card command on an API model: every suite runs (capability without
    Injection, which this server cannot prefill, and says so), every judge call goes to the
    judge's server with the judge's key."""
    model, judge = servers
    out = tmp_path / "card"
    # charm (no judge) is reused: its default distractor-similarity split loads an embedder (a minute
    # on a loaded 2-core machine); test_protocol runs it through the openai backend
    charm = api.run("charm", model="openai:test-model", limit=2, out=tmp_path / "charm", progress=False,
                    options={"similarity": False}, backend_options={"base_url": model.url + "/v1"}).run_dir
    res = rb("card", "--model", "openai:test-model", "--base-url", model.url + "/v1",
             "--judge", "openai:judge-model", "--judge-base-url", judge.url + "/v1", "--judge-api-key-env", "JUDGE_KEY",
             "--limit", "knowledge-errors=2", "--limit", "multiverse=3", "--limit", "capability=1",
             "--runs", charm, "--out", out, "-q",
             env={"OPENAI_API_KEY": MODEL_KEY, "JUDGE_KEY": JUDGE_KEY})
    assert res.returncode == 0, res.stderr[-3000:]
    card = json.loads((out / "card.json").read_text())
    secs = {s["suite"]: s for s in card["suites"]}
    assert set(secs) == {"charm", "knowledge-errors", "multiverse", "capability"}
    assert all(s["finished"] and s["model_calls"] for s in secs.values())
    assert [n for n, s in secs.items() if not s["reused"]] == ["knowledge-errors", "multiverse", "capability"]
    cap = secs["capability"]
    assert cap["strategies"] == ["identity", "no-role"]
    assert any(p.startswith("injection skipped: the openai backend cannot prefill") for p in cap["problems"])
    for name in ("knowledge-errors", "multiverse", "capability"):
        assert secs[name]["judge"] == "openai:judge-model"
        assert secs[name]["endpoints"] == {"model": model.url + "/v1", "judge": judge.url + "/v1"}
    assert models_asked(model) == {"test-model"} and models_asked(judge) == {"judge-model"}
    assert model.stats.keys_seen == {MODEL_KEY} and judge.stats.keys_seen == {JUDGE_KEY}
    assert "injection skipped" in (out / "card.md").read_text()
    no_secret_in(out, MODEL_KEY, JUDGE_KEY)
