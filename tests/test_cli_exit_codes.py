"""The installed `rolebound` script, driven as a user or a shell script would (a subprocess, not
CliRunner): the exit code reaches the shell (2 bad input, 3 the endpoint or calls failed, 130
Ctrl-C), every error is one line on stderr with no traceback, and no record is ever lost."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rolebound.testing.fake_server import FakeServer

from helpers import write_mcq

SCRIPT = Path(sys.executable).with_name("rolebound")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


def rb(*args, cwd=None, timeout=120, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _default_sigint():
    # a test run started in the background (`cmd &`, CI runners, pytest-xdist workers) ignores
    # SIGINT, and an ignored SIGINT is inherited across exec: give the child Ctrl-C back
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(*args, cwd=None) -> subprocess.Popen:
    return subprocess.Popen([str(SCRIPT), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cwd, preexec_fn=_default_sigint)


def one_error(res, code: int) -> str:
    """The run exited with `code` and said why in exactly one line, without a traceback."""
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    assert len(err.splitlines()) == 1, err
    return err


def records(out: Path) -> list[dict]:
    p = out / "records.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def wait_for_records(out: Path, n: int, proc: subprocess.Popen, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while len(records(out)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, "no records appeared"
        time.sleep(0.1)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def data(tmp_path) -> Path:
    return write_mcq(tmp_path / "q.jsonl", 6)


def api_run(url: str, data: Path, out: Path, *extra) -> list:
    return ["run", "mcq", "--model", "openai:test-model", "--base-url", url, "--data", data,
            "--scoring", "generate", "--out", out, "--quiet", *extra]


# -- flags and arguments ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("flags, says", [
    (["--limit", "nope"], "--limit"),
    (["--limit", "-1"], "--limit"),
    (["--limit", "0"], "--limit"),
    (["--repeats", "0"], "--repeats"),
    (["--bogus"], "--bogus"),
    (["--temperature", "-1"], "--temperature"),
    (["--max-tokens", "0"], "--max-tokens"),
    (["--model", "nope:x"], "unknown backend 'nope'"),
    (["--strategy", "nope"], "unknown strategy 'nope'"),
    (["--backend-opt", "colour=red"], "no option 'colour'"),
])
def test_bad_flag_is_one_line_and_exit_2(tmp_path, data, flags, says):
    out = tmp_path / "run"
    res = rb("run", "mcq", "--model", "fake:random", "--data", data, "--out", out, *flags)
    assert says in one_error(res, 2)
    assert not out.exists()                 # checked before the run folder is made


def test_report_without_argument():
    assert "run_dir" in one_error(rb("report"), 2).lower()


@pytest.mark.slow
def test_report_of_a_folder_that_is_no_run(tmp_path):
    assert "manifest.json" in one_error(rb("report", tmp_path), 2)


def test_unknown_suite():
    assert "unknown suite 'nosuch'" in one_error(rb("run", "nosuch"), 2)


@pytest.mark.slow
def test_bare_command_prints_help():
    res = rb()
    assert res.returncode == 0 and "Usage" in res.stdout + res.stderr


# -- input files -------------------------------------------------------------------------------------
@pytest.mark.slow
def test_non_utf8_jsonl_names_file_and_line(tmp_path):
    bad = tmp_path / "latin1.jsonl"
    bad.write_bytes(b'{"id": "a", "question": "q?", "options": ["x", "y"], "answer": "A"}\n'
                    b'{"id": "caf\xe9", "question": "q?", "options": ["x", "y"], "answer": "A"}\n')
    err = one_error(rb("run", "mcq", "--model", "fake:random", "--data", bad, "--out", tmp_path / "r"), 2)
    assert f"{bad}:2" in err and "UTF-8" in err


@pytest.mark.slow
def test_non_utf8_yaml_names_file_and_line(tmp_path):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"# a charm file\nconcepts:\n  - name: caf\xe9\n")
    err = one_error(rb("run", "charm", "--model", "fake:random", "--data", bad, "--out", tmp_path / "r"), 2)
    assert f"{bad}:3" in err and "UTF-8" in err


@pytest.mark.slow
def test_data_given_a_directory(tmp_path):
    err = one_error(rb("run", "mcq", "--model", "fake:random", "--data", tmp_path, "--out", tmp_path / "r"), 2)
    assert str(tmp_path) in err and "directory" in err


@pytest.mark.slow
def test_unusable_set_value_leaves_no_run_folder(tmp_path):
    out = tmp_path / "r"
    err = one_error(rb("run", "charm", "--model", "fake:random", "--set", "data_seed=abc", "--limit", "3",
                       "--out", out), 2)
    assert "abc" in err and not out.exists()


@pytest.mark.slow
def test_rejected_option_leaves_no_run_to_trip_over(tmp_path):
    out = tmp_path / "r"
    err = one_error(rb("run", "charm", "--model", "fake:random", "--set", "similarity=flase", "--limit", "3",
                       "--out", out), 2)
    assert "flase" in err and not (out / "manifest.json").exists()
    res = rb("run", "charm", "--model", "fake:random", "--set", "similarity=false", "--limit", "3", "--out", out, "-q")
    assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_run_folder_that_cannot_be_written(tmp_path, data):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    err = one_error(rb("run", "mcq", "--model", "fake:random", "--data", data, "--out", blocker / "run"), 2)
    assert str(blocker / "run") in err and "cannot write" in err


@pytest.mark.slow
def test_debug_keeps_the_traceback(tmp_path):
    res = rb("--debug", "run", "mcq", "--model", "fake:random", "--data", tmp_path)
    assert res.returncode == 2 and "Traceback" in res.stderr


# -- run folders ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_resumed_run_adds_up_its_counts(tmp_path, data):
    out = tmp_path / "r"
    assert rb("run", "mcq", "--model", "fake:random", "--data", data, "--out", out, "-q").returncode == 0
    first = json.loads((out / "manifest.json").read_text())["counts"]
    first["wall_s"] = 1000                      # as if the first pass had taken a while
    man = json.loads((out / "manifest.json").read_text())
    man["counts"] = first
    (out / "manifest.json").write_text(json.dumps(man))
    (out / "errors.log").write_text("left over from an earlier pass\n")
    assert rb("run", "mcq", "--model", "fake:random", "--data", data, "--out", out, "-q").returncode == 0
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    assert counts["model_calls"] == 6 and counts["resumed"] == 6 and counts["invocations"] == 2
    assert counts["timed_invocations"] == 2 and 1000 <= counts["wall_s"] < 1100     # wall time adds up too
    assert not (out / "errors.log").exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.slow
def test_a_different_run_in_the_folder_is_refused_untouched(tmp_path, data):
    out = tmp_path / "r"
    assert rb("run", "mcq", "--model", "fake:random", "--data", data, "--out", out, "-q").returncode == 0
    before = (out / "records.jsonl").read_bytes()
    err = one_error(rb("run", "mcq", "--model", "fake:random", "--data", data, "--out", out, "--temperature", "0.5"), 2)
    assert "holds a different run" in err and (out / "records.jsonl").read_bytes() == before


@pytest.mark.slow
def test_overwrite_of_a_running_run_is_refused_and_it_finishes(tmp_path):
    data = write_mcq(tmp_path / "q.jsonl", 16)
    out = tmp_path / "r"
    with FakeServer(delay=0.05, reply="B") as srv:
        args = api_run(srv.url + "/v1", data, out, "--concurrency", "2", "--no-cache")
        first = start(*args)
        wait_for_records(out, 1, first)
        srv.delay = 1.0                     # keep the first run busy while the second one tries
        err = one_error(rb(*args, "--overwrite"), 2)
        assert first.poll() is None
        srv.delay = 0.0
        assert "another rolebound process is writing" in err
        stdout, stderr = first.communicate(timeout=120)
    assert first.returncode == 0, stderr
    recs = records(out)
    assert sorted(r["item_id"] for r in recs) == sorted(f"q{i}" for i in range(16))
    assert not any(r["error"] for r in recs)


@pytest.mark.slow
def test_ctrl_c_keeps_records_writes_a_report_and_resumes(tmp_path):
    n = 40
    data = write_mcq(tmp_path / "q.jsonl", n)
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        # requests after the fourth hang until the interrupt: it always comes mid-run, however
        # loaded the machine is (a timed pace let a starved test see the run already finished)
        srv.fail(hang=600, on=list(range(5, n + 1)))
        args = api_run(srv.url + "/v1", data, out, "--concurrency", "2", "--no-cache")
        proc = start(*args)
        wait_for_records(out, 3, proc)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        res = subprocess.CompletedProcess(args, proc.returncode, "", stderr)
        err = one_error(res, 130)
        assert "interrupted" in err and "rerun the same command to resume" in err and str(out) in err
        done = len(records(out))
        assert 3 <= done < n
        assert (out / "report.html").exists() and json.loads((out / "manifest.json").read_text())["finished"] is None
        srv.reset()
        again = rb(*args)
        assert again.returncode == 0, again.stderr
        assert srv.stats.requests == n - done          # only what was missing
    assert len({r["call_id"] for r in records(out)}) == n


# -- endpoints ----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_unauthorised_endpoint_stops_at_once_with_its_message(tmp_path, data):
    out = tmp_path / "r"
    with FakeServer() as srv:
        srv.fail(status=401, message="Invalid API key: go away")
        err = one_error(rb(*api_run(srv.url + "/v1", data, out)), 3)
        assert srv.stats.requests <= 3
    assert "HTTP 401" in err and "Invalid API key: go away" in err and "rerun the same command" in err
    assert (out / "manifest.json").exists() and "run stopped" in (out / "errors.log").read_text()


@pytest.mark.slow
def test_unknown_model_stops_at_once_and_resumes_when_fixed(tmp_path, data):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(status=404, message="The model `test-model` does not exist.", times=1)
        err = one_error(rb(*api_run(srv.url + "/v1", data, out)), 3)
        assert "does not exist" in err and srv.stats.requests == 1
        res = rb(*api_run(srv.url + "/v1", data, out))
        assert res.returncode == 0, res.stderr
    assert len([r for r in records(out) if not r["error"]]) == 6


@pytest.mark.slow
def test_closed_port_stops_within_30_s(tmp_path, data):
    for transport in ("sdk", "aiohttp"):
        t0 = time.monotonic()
        err = one_error(rb(*api_run(f"http://127.0.0.1:{closed_port()}/v1", data, tmp_path / transport,
                                    "--backend-opt", f"transport={transport}")), 3)
        assert time.monotonic() - t0 < 30
        assert "cannot connect" in err


@pytest.mark.slow
def test_failed_calls_exit_3(tmp_path, data):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(status=500, when=lambda path, body: "number 2?" in json.dumps(body))
        res = rb(*api_run(srv.url + "/v1", data, out, "--backend-opt", "max_retries=0"))
    assert one_error(res, 3).startswith("1 failed call(s), 1 failed item(s)")
    assert len(records(out)) == 6


@pytest.mark.slow
def test_consecutive_failures_trip_the_breaker(tmp_path, data):
    with FakeServer(reply="B") as srv:
        srv.fail(status=500, message="overloaded")
        err = one_error(rb(*api_run(srv.url + "/v1", data, tmp_path / "r", "--backend-opt", "max_retries=0",
                                    "--backend-opt", "max_consecutive_failures=2")), 3)
        assert srv.stats.requests <= 3
    assert "2 calls failed in a row" in err and "overloaded" in err


@pytest.mark.slow
def test_aiohttp_with_credentials_in_the_url(tmp_path, data):
    with FakeServer(reply="B") as srv:
        url = srv.url.replace("http://", "http://user:secret@") + "/v1"
        res = rb(*api_run(url, data, tmp_path / "r", "--backend-opt", "transport=aiohttp"))
    assert res.returncode == 0, res.stderr
    assert not any(r["error"] for r in records(tmp_path / "r"))
    assert "secret" not in (tmp_path / "r" / "manifest.json").read_text()
