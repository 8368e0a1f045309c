"""A local engine loads at the first call the response cache cannot answer: a run rebuilt from
cached replies (bench/carried/) needs neither the model's files nor its engine installed, and
records what a run that asked the model recorded."""

from __future__ import annotations

import json

import pytest

from helpers import SCRIPT, needs_script, rolebound, write_mcq
from rolebound import api
from rolebound.errors import BackendError
from rolebound.models import llamacpp
from rolebound.models.base import GenResult

MODEL = "bundled:qwen2.5-coder-1.5b"
KEPT = ("call_id", "item_id", "strategy", "stage", "prompt", "response", "parsed", "gold", "correct",
        "finish_reason", "prompt_tokens", "completion_tokens")


class Engine:
    """Stands in for LlamaCppEngine: answers each prompt by its length (loads counted)."""

    loads: list[str] = []
    fail = False

    def __init__(self, path, **_):
        if Engine.fail:
            raise RuntimeError("no weights here")
        Engine.loads.append(str(path))

    def generate(self, requests, decoding, emit=None):
        out = []
        for i, r in enumerate(requests):
            res = GenResult(text=f"Answer: {'ABCD'[len(str(r.messages)) % 4]}", prompt_tokens=9,
                            completion_tokens=2, finish_reason="stop")
            out.append(res)
            if emit:
                emit(i, res)
        return out

    def close(self):
        pass


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Qwen on the llamacpp engine with the stand-in engine, and a response cache of the test's own;
    the model folder holds no model (ROLEBOUND_MODEL_DIR), as on a fresh clone."""
    from rolebound.models import bundled

    Engine.loads, Engine.fail = [], False
    gguf = tmp_path / "qwen.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(bundled, "bundled_gguf", lambda name: gguf)
    monkeypatch.setattr(llamacpp, "import_llama_cpp", lambda: (None, None))
    monkeypatch.setattr(llamacpp, "LlamaCppEngine", Engine)
    monkeypatch.setattr(llamacpp.LlamaCppBackend, "info", lambda self: {"engine": "stand-in"})
    env = {"ROLEBOUND_CACHE_DIR": str(tmp_path / "cache"), "ROLEBOUND_MODEL_DIR": str(tmp_path / "no-models")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def _run(tmp_path, n: int, out: str):
    return api.run("mcq", model=MODEL, backend_options={"engine": "llamacpp"}, scoring="generate",
                   data=str(write_mcq(tmp_path / f"q{n}.jsonl", n)), out=tmp_path / out, progress=False)


def _records(folder) -> list[dict]:
    rows = [json.loads(x) for x in (folder / "records.jsonl").read_text(encoding="utf-8").splitlines()]
    return sorted(({k: r.get(k) for k in KEPT} for r in rows), key=lambda r: r["call_id"])


def test_a_run_whose_every_call_is_cached_never_loads_the_engine(tmp_path, env):
    first = _run(tmp_path, 4, "asked")
    assert Engine.loads and first.manifest.counts["model_calls"] == 4
    Engine.loads.clear()
    Engine.fail = True                                   # the loader would raise: it is never called
    again = _run(tmp_path, 4, "cached")
    assert Engine.loads == [] and again.manifest.counts["model_calls"] == 0
    assert again.manifest.counts["cache_hits"] == 4
    assert _records(tmp_path / "cached") == _records(tmp_path / "asked")


def test_a_miss_with_an_engine_that_cannot_load_ends_the_run_on_one_line(tmp_path, env):
    Engine.fail = True
    with pytest.raises(BackendError, match="did not load: RuntimeError: no weights here"):
        _run(tmp_path, 2, "r")
    assert not (tmp_path / "r" / "manifest.json").exists()    # nothing recorded: no run left behind


@needs_script
def test_a_cached_run_completes_through_the_script_without_the_model_or_llama_cpp(tmp_path, env):
    _run(tmp_path, 4, "asked")
    env = {**__import__("os").environ, **env}
    cmd = ["run", "mcq", "--model", MODEL, "--engine", "llamacpp", "--scoring", "generate", "-q"]
    res = rolebound(*cmd, "--data", tmp_path / "q4.jsonl", "--out", tmp_path / "cached", env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert _records(tmp_path / "cached") == _records(tmp_path / "asked")
    counts = json.loads((tmp_path / "cached" / "manifest.json").read_text())["counts"]
    assert (counts["model_calls"], counts["cache_hits"]) == (0, 4)
    # a call the cache cannot answer: the missing GGUF's install line, once, exit 2
    write_mcq(tmp_path / "q6.jsonl", 6)
    res = rolebound(*cmd, "--data", tmp_path / "q6.jsonl", "--out", tmp_path / "more", env=env)
    err = res.stderr.strip()
    assert res.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, res.stderr[-2000:]
    assert "rolebound models install qwen2.5-coder-1.5b" in err
    if (tmp_path / "more" / "records.jsonl").exists():       # what was recorded is the cached replies
        assert all(json.loads(x)["cached"] for x in (tmp_path / "more" / "records.jsonl").open())
    assert SCRIPT.exists()


def test_a_judge_check_answered_by_the_cache_never_loads_the_engine(tmp_path, env):
    """judge-check too: its judge, on the run's engine (--judge-opt engine=llamacpp), is answered by
    the response cache without loading (the RoleKE check on a fresh clone, bench/results.py)."""
    from pathlib import Path

    from rolebound.judgecheck.run import run as check

    labels = Path(__file__).parent / "data" / "judge_labels" / "knowledge_errors_roleke_qwen.jsonl"
    kw = dict(data=labels, limit=3, progress=False, judge_options={"engine": "llamacpp"})
    first = check("knowledge-errors", MODEL, out=tmp_path / "asked", **kw)
    assert Engine.loads and first.counts["model_calls"] == 3
    Engine.loads.clear()
    Engine.fail = True                                   # the loader would raise: it is never called
    again = check("knowledge-errors", MODEL, out=tmp_path / "cached", **kw)
    assert Engine.loads == [] and (again.counts["model_calls"], again.counts["cache_hits"]) == (0, 3)
    assert again.metrics["verdicts"] == first.metrics["verdicts"]
