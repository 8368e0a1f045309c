"""Grids and flags past what the tool takes, and a stdout nobody reads: one line and exit 2 at
once, or (a closed pipe) a quiet exit 141 with the run's files written. Through the installed script."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from helpers import SCRIPT, needs_script, rolebound, write_mcq

pytestmark = [needs_script, pytest.mark.slow]
QUICK = 60          # a refusal comes long before this; a grid expanded run by run would not


def one_error(res: subprocess.CompletedProcess, code: int = 2) -> str:
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, res.stderr
    return lines[0]


def config(tmp_path: Path, **fields) -> Path:
    data = write_mcq(tmp_path / "q.jsonl", 2)
    p = tmp_path / f"grid{len(list(tmp_path.glob('grid*.yaml')))}.yaml"
    p.write_text(yaml.safe_dump({"suite": "mcq", "model": "fake:echo", "data": str(data), "cache": False,
                                 **fields}), encoding="utf-8")
    return p


MILLION = {"model": [f"fake:echo{i}" for i in range(1000)], "strategy": [f"s{i}" for i in range(1000)]}
BAD_GRIDS = [
    (MILLION, "1,000,000 runs (suite 1 x model 1,000 x strategy 1,000); one command runs at most 1,000"),
    ({"model": []}, "field 'model': is an empty list: the grid has no runs"),
    ({"suite": []}, "field 'suite': is an empty list: the grid has no runs"),
    ({"model": ["fake:echo"] * 5000}, "lists 'fake:echo' twice"),          # 5,000 runs into one folder
    ({"model": ["fake:echo"] * 3}, "field 'model': lists 'fake:echo' twice; each run of a grid needs its own folder"),
    ({"model": ["openai:a/b", "openai:a-b"]}, "'openai:a/b' and 'openai:a-b' share the folder name openai-a-b"),
]


@pytest.mark.parametrize("command", ["run", "sweep"])
@pytest.mark.parametrize("fields,message", BAD_GRIDS)
def test_a_grid_past_bounds_is_one_line_at_once(tmp_path, command, fields, message):
    out = tmp_path / "out"
    cfg = config(tmp_path, **fields, out=str(out))
    args = ["run", "--config", cfg, "-q"] if command == "run" else ["sweep", cfg, "-q"]
    line = one_error(rolebound(*args, timeout=QUICK, cwd=tmp_path))
    assert message in line and str(cfg) in line
    assert not out.exists() and not (tmp_path / "runs").exists() and not (tmp_path / "sweeps").exists()


def test_a_sweep_of_several_grids_counts_them_together(tmp_path):
    many = {"model": [f"fake:echo{i}" for i in range(600)]}
    a, b = config(tmp_path, **many), config(tmp_path, **many, strategy="direct")
    line = one_error(rolebound("sweep", a, b, "-o", tmp_path / "sw", "-q", timeout=QUICK))
    assert "the sweep's 2 grids have 1,200 runs; one command runs at most 1,000" in line
    assert not (tmp_path / "sw").exists()


@pytest.mark.parametrize("args,env,where", [
    (["--threads", "100000"], {}, "error: --threads: "),
    (["--threads", "0"], {}, "error: --threads: "),
    (["--backend-opt", "threads=513"], {}, "error: --backend-opt threads: "),
    ([], {"ROLEBOUND_THREADS": "100000"}, "ROLEBOUND_THREADS"),
])
def test_thread_counts_outside_1_to_512_are_refused(tmp_path, args, env, where):
    data = write_mcq(tmp_path / "q.jsonl", 2)
    res = rolebound("run", "mcq", "--model", "bundled", "--data", data, "-o", tmp_path / "r", "-q", *args,
                    timeout=QUICK, env={**os.environ, **env})
    line = one_error(res)
    assert where in line and "from 1 to 512" in line
    assert not (tmp_path / "r" / "records.jsonl").exists()


def test_a_config_with_too_many_threads_names_the_line(tmp_path):
    cfg = config(tmp_path, model="bundled", backend={"threads": 100000})
    line = one_error(rolebound("run", "--config", cfg, timeout=QUICK))
    assert line == f"error: {cfg}:2, field 'backend.threads': must be a whole number from 1 to 512"


def _closed_pipe_run(args, **kw) -> subprocess.CompletedProcess:
    r, w = os.pipe()
    os.close(r)                 # the reader is gone before the first line: every write meets EPIPE
    try:
        return subprocess.run([str(SCRIPT), *map(str, args)], stdout=w, stderr=subprocess.PIPE, text=True,
                              timeout=120, **kw)
    finally:
        os.close(w)


def test_a_closed_stdout_pipe_exits_141_quietly_with_the_run_written(tmp_path):
    data, out = write_mcq(tmp_path / "q.jsonl", 3), tmp_path / "r"
    res = _closed_pipe_run(["run", "mcq", "--model", "fake:echo", "--data", data, "-o", out, "-q"])
    assert res.returncode == 141 and res.stderr == "", res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["finished"] and manifest["counts"]["items"] == 3
    assert len((out / "records.jsonl").read_text().splitlines()) == 3 and (out / "report.html").exists()
    assert _closed_pipe_run(["suites"]).returncode == 141


def test_a_closed_stdout_is_dev_null(tmp_path):
    # fd 1 closed: the run's first file would otherwise take its number
    data, out = write_mcq(tmp_path / "q.jsonl", 3), tmp_path / "r"
    res = subprocess.run([str(SCRIPT), "run", "mcq", "--model", "fake:echo", "--data", str(data), "-o", str(out)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=120,
                         preexec_fn=lambda: os.close(1))
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    rows = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and json.loads((out / "manifest.json").read_text())["finished"]
