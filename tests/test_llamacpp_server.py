"""Every suite end to end through the `openai` backend against a real OpenAI-compatible server:
llama-cpp-python's (`python -m llama_cpp.server`) on the bundled SmolLM2 GGUF, on 127.0.0.1.

Two servers: "smollm2" answers (with log-probs) and "judge" judges (started without log-probs, so
scoring against it must fail with a clear error). Skipped, saying why, without the extra
(`make llamacpp` installs it). Limits are small: this checks the path, not the numbers.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HAVE = importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("uvicorn") is not None
pytestmark = [pytest.mark.model,
              pytest.mark.skipif(not HAVE, reason="llama-cpp-python[server] is not installed: run `make llamacpp`")]
ROLEBOUND = Path(sys.executable).with_name("rolebound")


@pytest.fixture(scope="module")
def servers():
    from rolebound.models import bundled
    from rolebound.testing.llama_server import LlamaServer

    gguf = bundled.gguf_path()
    with LlamaServer(gguf, alias="smollm2") as model, LlamaServer(gguf, alias="judge", logits_all=False) as judge:
        yield {"model": model.url, "judge": judge.url}


def run(servers, tmp_path, *args, judge_on_own_server=False):
    out = tmp_path / "run"
    cmd = [str(ROLEBOUND), "run", *args, "--model", "openai:smollm2", "--base-url", servers["model"],
           "--out", str(out), "-q", "--no-cache"]
    if judge_on_own_server:
        cmd += ["--judge", "openai:judge", "--judge-base-url", servers["judge"]]
    env = dict(os.environ, OPENAI_API_KEY="sk-local")
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    return res, out


def records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def ok(res, out):
    assert res.returncode == 0, res.stderr[-2000:]
    recs = records(out)
    assert recs and all(r.get("error") is None for r in recs), [r["error"] for r in recs if r.get("error")][:3]
    assert (out / "report.md").exists()
    return recs


@pytest.mark.parametrize("scoring", ["generate", "logprob"])
def test_charm(servers, tmp_path, scoring):
    recs = ok(*run(servers, tmp_path, "charm", "--limit", "3", "--scoring", scoring, "--max-tokens", "16"))
    if scoring == "logprob":
        assert all(r["kind"] == "score" and r["logprobs"] for r in recs)


def test_mcq_logprob(servers, tmp_path):
    from helpers import write_mcq

    data = write_mcq(tmp_path / "q.jsonl", 3)
    recs = ok(*run(servers, tmp_path, "mcq", "--data", str(data), "--scoring", "logprob"))
    assert all(len(r["logprobs"]) >= 2 for r in recs)


def test_knowledge_errors_self_judged(servers, tmp_path):
    ok(*run(servers, tmp_path, "knowledge-errors", "--limit", "2", "--judge", "self", "--max-tokens", "24",
            "--judge-max-tokens", "24"))


def test_multiverse_self_judged(servers, tmp_path):
    ok(*run(servers, tmp_path, "multiverse", "--limit", "2", "--strategy", "direct,cot", "--judge", "self",
            "--max-tokens", "24", "--judge-max-tokens", "24"))


def test_capability_with_injection_through_a_local_chat_template(servers, tmp_path):
    # llama-cpp-python's server reports no template (llama-server's /props does): Injection renders
    # the prompt with the model's own template and sends it to the completions endpoint
    from rolebound.models import bundled

    recs = ok(*run(servers, tmp_path, "capability", "--limit", "1", "--strategy", "identity,injection",
                   "--set", "roles=primary", "--judge", "self", "--max-tokens", "24", "--judge-max-tokens", "24",
                   "--backend-opt", f"chat_template={bundled.converted_dir()}"))
    injected = [r for r in recs if r["role"] == "model" and r["strategy"] == "injection"]
    assert injected and all(isinstance(r["prompt"], str) for r in injected)   # a rendered prompt


def test_capability_default_strategies_leave_injection_out_without_a_template(servers, tmp_path):
    res, out = run(servers, tmp_path, "capability", "--limit", "1", "--set", "roles=primary", "--judge", "self",
                   "--max-tokens", "16", "--judge-max-tokens", "16")
    ok(res, out)
    manifest = json.loads((out / "manifest.json").read_text())
    assert "injection" in json.dumps(manifest["skipped_strategies"]).lower()
    assert "injection" in (out / "report.md").read_text().lower()


def test_judge_on_a_second_server(servers, tmp_path):
    help_text = subprocess.run([str(ROLEBOUND), "run", "--help"], capture_output=True, text=True,
                               env=dict(os.environ, COLUMNS="200")).stdout
    if "--judge-base-url" not in help_text:
        pytest.skip("this checkout has no --judge-base-url yet")
    res, out = run(servers, tmp_path, "knowledge-errors", "--limit", "2", "--max-tokens", "24",
                   "--judge-max-tokens", "24", judge_on_own_server=True)
    recs = ok(res, out)
    judged = [r for r in recs if r["role"] == "judge"]
    assert judged and all(r["model"] == "openai:judge" for r in judged)


def test_logprob_scoring_where_the_server_has_none_fails_clearly(servers, tmp_path):
    out = tmp_path / "run"
    res = subprocess.run([str(ROLEBOUND), "run", "charm", "--model", "openai:judge", "--base-url", servers["judge"],
                          "--limit", "1", "--scoring", "logprob", "--out", str(out), "-q", "--no-cache",
                          "--backend-opt", "max_retries=0"],
                         capture_output=True, text=True, env=dict(os.environ, OPENAI_API_KEY="sk-local"), timeout=300)
    assert res.returncode != 0 and "Traceback" not in res.stderr
    errors = [r["error"] for r in records(out) if r.get("error")]
    assert errors and all("logprobs" in e or "log-probs" in e for e in errors), errors[:2]
