"""Bad input: one clear line naming file, line and field; exit code 2; no traceback unless --debug."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound.errors import InputError
from rolebound.io import read_csv_table, read_jsonl
from rolebound.suites.mcq.data import MCQItem

from helpers import write_mcq

ROOT = Path(__file__).resolve().parents[1]


def cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "rolebound.cli", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, **(env or {})})


@pytest.mark.slow
def test_bad_jsonl_field_names_file_line_field(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 5, bad_line=3)
    with pytest.raises(InputError) as exc:
        read_jsonl(data, MCQItem)
    assert exc.value.line == 3 and str(data) in str(exc.value)
    res = cli("run", "mcq", "--model", "fake:random", "--data", str(data), "--out", str(tmp_path / "r"))
    assert res.returncode == 2
    assert f"{data}:3" in res.stderr and "answer" in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "r" / "records.jsonl").exists()


@pytest.mark.slow
def test_invalid_json_line(tmp_path):
    p = tmp_path / "q.jsonl"
    p.write_text('{"id": "a", "question": "q", "options": ["x", "y"], "answer": "A"}\n{"id": oops}\n')
    res = cli("run", "mcq", "--model", "fake:random", "--data", str(p))
    assert res.returncode == 2 and f"{p}:2" in res.stderr and "invalid JSON" in res.stderr


@pytest.mark.slow
def test_debug_shows_traceback(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 2, bad_line=1)
    res = cli("--debug", "run", "mcq", "--model", "fake:random", "--data", str(data))
    assert res.returncode != 0 and "Traceback" in res.stderr


def test_config_yaml_unknown_key_has_line(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("suite: mcq\nmodel: fake:random\nlimit: 3\ntemprature: 0.5\n")
    res = cli("run", "--config", str(cfg))
    assert res.returncode == 2 and f"{cfg}:4" in res.stderr and "temprature" in res.stderr


@pytest.mark.slow
def test_config_yaml_bad_value_has_line(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("suite: mcq\nmodel: fake:random\ndecoding:\n  temperature: 0.0\n  top_p: 7\n")
    res = cli("run", "--config", str(cfg))
    assert res.returncode == 2 and f"{cfg}:5" in res.stderr and "decoding.top_p" in res.stderr


@pytest.mark.slow
def test_config_grid_runs_every_combination(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 3)
    cfg = tmp_path / "grid.yaml"
    cfg.write_text(f"suite: mcq\nmodel: [fake:random, fake:echo]\ndata: {data}\nout: {tmp_path / 'grid'}\n")
    res = cli("run", "--config", str(cfg), "--quiet")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == [
        "mcq__fake-echo__default", "mcq__fake-random__default"]


@pytest.mark.slow
@pytest.mark.parametrize("args,needle", [
    (["run", "mcq", "--model", "nosuch:x"], "available backends: bundled, hf, openai, llamacpp, vllm, fake"),
    (["run", "nosuchsuite"], "available:"),
    (["run", "mcq", "--model", "fake:random", "--strategy", "zzz", "--data", "x.jsonl"], "available: direct"),
    (["run", "mcq", "--model", "fake:nosuch"], "available: random, echo, constant"),
    (["run", "mcq", "--model", "hf:/no/such/folder"], "local model folder"),
])
def test_unknown_names_list_what_exists(args, needle):
    res = cli(*args)
    assert res.returncode == 2 and needle in res.stderr and "Traceback" not in res.stderr


@pytest.mark.slow
def test_missing_data_file(tmp_path):
    res = cli("run", "mcq", "--model", "fake:random", "--data", str(tmp_path / "nope.jsonl"))
    assert res.returncode == 2 and "file not found" in res.stderr


@pytest.mark.slow
def test_api_key_missing_is_clear(monkeypatch):
    res = cli("run", "mcq", "--model", "openai:gpt-4o-mini", "--data", "x.jsonl",
              env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""})
    assert res.returncode == 2 and "OPENAI_API_KEY" in res.stderr


@pytest.mark.slow
def test_vllm_missing_says_what_to_install():
    try:
        import vllm  # noqa: F401
        pytest.skip("vllm is installed here")
    except ImportError:
        pass
    res = cli("run", "mcq", "--model", "vllm:/some/model", "--data", "x.jsonl")
    assert res.returncode == 2 and "pip install vllm" in res.stderr


@pytest.mark.slow
def test_unknown_backend_option_lists_the_known_ones(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 2)
    res = cli("run", "mcq", "--model", "fake:random", "--data", str(data), "--backend-opt", "dealy=0.1")
    assert res.returncode == 2 and "no option 'dealy'" in res.stderr and "delay" in res.stderr
    res = cli("run", "mcq", "--model", "fake:random", "--data", str(data), "--backend-opt", "oops")
    assert res.returncode == 2 and "--backend-opt" in res.stderr and "key=value" in res.stderr


def test_backend_options_reach_the_backend(tmp_path):
    from rolebound import api

    data = write_mcq(tmp_path / "q.jsonl", 2)
    res = api.run("mcq", model="fake:constant", data=str(data), scoring="generate", out=tmp_path / "r",
                  backend_options={"text": "C"}, progress=False)
    assert set(api.load_run(res.run_dir)["response"]) == {"C"}


@pytest.mark.slow
def test_misspelt_yes_no_option_is_an_error_not_false(tmp_path):
    res = cli("run", "charm", "--model", "fake:random", "--limit", "4", "--set", "similarity=nope",
              "--out", str(tmp_path / "r"))
    assert res.returncode == 2 and "similarity" in res.stderr and "Traceback" not in res.stderr


def test_a_spreadsheet_reads_as_keys_and_stripped_cells_and_an_overlong_row_is_named(tmp_path):
    f = tmp_path / "sheet.csv"
    f.write_text("Era End,Name\n 1852 ,Ada\n,\n1900,Tove\n", encoding="utf-8")
    header, rows = read_csv_table(f)
    assert header == ["era_end", "name"]
    assert rows == [(2, {"era_end": "1852", "name": "Ada"}), (4, {"era_end": "1900", "name": "Tove"})]
    f.write_text("a,b\n1,2\n3,4,5\n", encoding="utf-8")
    with pytest.raises(InputError, match="more cells than the header") as e:
        read_csv_table(f)
    assert (e.value.file, e.value.line) == (str(f), 3)
