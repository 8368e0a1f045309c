"""Bad values are refused the same way wherever they come from (flags, a YAML config, api.run):
exit 2 and one line through the installed script, no pydantic dump (that is for --debug)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.errors import InputError
from rolebound.request import RunRequest

from helpers import write_mcq

SCRIPT = Path(sys.executable).with_name("rolebound")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


def rb(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=120, env={**os.environ})


def one_line(res, code: int = 2) -> str:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in err and "pydantic" not in err, err
    assert len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def data(tmp_path) -> Path:
    return write_mcq(tmp_path / "q.jsonl", 4)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("run")
    out = tmp / "r"
    api.run("mcq", model="fake:random", data=str(write_mcq(tmp / "q.jsonl", 4)), out=out, progress=False)
    return out


# -- flags, YAML and api.run refuse the same values ---------------------------------------------------
BAD = [  # (flags, the request fields they set, what the line says)
    (["--timeout", "-1"], {"backend_options": {"timeout": -1}}, "--timeout"),
    (["--timeout", "0"], {"backend_options": {"timeout": 0}}, "greater than 0"),
    (["--backend-opt", "max_retries=-1"], {"backend_options": {"max_retries": -1}}, "max_retries"),
    (["--backend-opt", "concurrency=0"], {"backend_options": {"concurrency": 0}}, "concurrency"),
    (["--backend-opt", "prefix_cache_mb=abc"], {"backend_options": {"prefix_cache_mb": "abc"}}, "prefix_cache_mb"),
    (["--backend-opt", "prefix_cache_mb=-5"], {"backend_options": {"prefix_cache_mb": -5}}, "prefix_cache_mb"),
    (["--model", ""], {"model": ""}, "empty"),
    (["--model", "fake"], {"model": "fake"}, "fake:NAME"),
    (["--model", "fake:"], {"model": "fake:"}, "no model name after the colon"),
    (["--model", "openai:"], {"model": "openai:"}, "no model name after the colon"),
    (["--extractor", "fake"], {"extractor": "fake"}, "--extractor: "),
    (["--strategy", ","], {"strategies": ","}, "empty strategy name"),
    (["--model", "openai:m", "--base-url", "not-a-url"], {"model": "openai:m", "backend_options":
                                                         {"base_url": "not-a-url"}}, "not a valid URL"),
]


@pytest.mark.slow
@pytest.mark.parametrize("flags, fields, says", BAD, ids=[" ".join(b[0]) or "empty" for b in BAD])
def test_flag_is_refused_in_one_line(tmp_path, data, flags, fields, says):
    args = ["run", "mcq", "--model", "fake:random", "--data", data, "--out", tmp_path / "r", *flags]
    err = one_line(rb(*args))
    assert says in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("flags, fields, says", BAD, ids=[" ".join(b[0]) or "empty" for b in BAD])
def test_api_run_refuses_the_same(tmp_path, data, flags, fields, says):
    with pytest.raises(InputError):
        api.run("mcq", **{"model": "fake:random", "data": str(data), "out": tmp_path / "r", **fields})
    assert not (tmp_path / "r").exists()


@pytest.mark.slow
@pytest.mark.parametrize("yaml_text, says", [
    ("backend: {timeout: 0}", "backend.timeout"),
    ("backend: {max_retries: -1}", "backend.max_retries"),
    ("backend: {concurrency: 0}", "backend.concurrency"),
    ("model: fake", "fake:NAME"),
    ("strategy: ','", "empty strategy name"),
])
def test_yaml_refuses_the_same(tmp_path, data, yaml_text, says):
    cfg = tmp_path / "run.yaml"
    base = {"suite": "mcq", "model": "fake:random", "data": str(data), "out": str(tmp_path / "r")}
    lines = [f"{k}: {v}" for k, v in base.items() if k not in yaml_text.split(":")[0]]
    cfg.write_text("\n".join(lines + [yaml_text]) + "\n", encoding="utf-8")
    err = one_line(rb("run", "--config", cfg))
    assert says in err and str(cfg) in err
    assert not (tmp_path / "r").exists()


def test_the_request_is_one_typed_object(tmp_path, data):
    req = RunRequest(suite="mcq", model="fake:random", data=str(data), out=tmp_path / "r", strategies="direct",
                     decoding={"temperature": None, "seed": 3}, progress=False)
    assert req.strategies == ["direct"] and req.decoding.model_fields_set == {"seed"}
    res = api.run(req)
    assert res.manifest.decoding.seed == 3 and res.counts.calls == 4
    with pytest.raises(TypeError):
        api.run(req, limit=2)


@pytest.mark.slow
def test_good_specs_still_run(tmp_path, data):
    res = rb("run", "mcq", "--model", "fake:echo", "--data", data, "--out", tmp_path / "r", "-q",
             "--strategy", "direct")
    assert res.returncode == 0, res.stderr


# -- empty inputs --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_empty_data_file(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    err = one_line(rb("run", "mcq", "--model", "fake:random", "--data", empty, "--out", tmp_path / "r"))
    assert f"no items in {empty}" in err


@pytest.mark.slow
def test_report_on_empty_records(tmp_path, run_dir):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "records.jsonl").write_text("")
    err = one_line(rb("report", run))
    assert f"no records in {run}" in err


# -- compare --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_compare_needs_two_different_runs(run_dir):
    assert "two or more" in one_line(rb("compare", run_dir))
    assert "given twice" in one_line(rb("compare", run_dir, run_dir))


# -- broken manifests and records: one line, the whole report with --debug ---------------------------------
MANIFESTS = [("{}", "field 'suite'"), ("[1, 2]", "expected a JSON object"), (None, "field 'counts'")]


@pytest.mark.slow
@pytest.mark.parametrize("text, says", MANIFESTS, ids=["empty-object", "list", "counts-lots"])
@pytest.mark.parametrize("command", ["report", "compare", "card"])
def test_broken_manifest_is_one_line(tmp_path, run_dir, command, text, says):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    if text is None:
        m = json.loads((run / "manifest.json").read_text())
        m["counts"] = "lots"
        text = json.dumps(m)
    (run / "manifest.json").write_text(text)
    args = {"report": ["report", run], "compare": ["compare", run, run_dir],
            "card": ["card", "--model", "fake:random", "--runs", run, "--out", tmp_path / "card"]}[command]
    err = one_line(rb(*args))
    assert str(run / "manifest.json") in err and says in err


@pytest.mark.slow
@pytest.mark.parametrize("line, says", [
    ('{"foo": 1}', "field 'call_id': Field required"),
    (None, "field 'repeat'"),
])
def test_broken_record_is_one_line_naming_file_line_field(tmp_path, run_dir, line, says):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    lines = (run / "records.jsonl").read_text().splitlines()
    if line is None:
        rec = json.loads(lines[1])
        rec["repeat"] = "twice"
        line = json.dumps(rec)
    lines[1] = line
    (run / "records.jsonl").write_text("\n".join(lines) + "\n")
    err = one_line(rb("report", run))
    assert f"records.jsonl:2" in err and says in err
    debug = rb("--debug", "report", run)
    assert debug.returncode == 2 and "validation error" in debug.stderr


# -- view -------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_view_on_a_file(tmp_path, run_dir):
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert "is a file, not a folder" in one_line(rb("view", "--no-open", other))
    res = rb("view", "--no-open", run_dir / "manifest.json")        # a run's file: that run
    assert res.returncode == 0 and "report.html" in res.stdout, res.stderr
