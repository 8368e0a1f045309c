"""A dead or broken endpoint, through the installed script: a server that never answers and one
that answers 500 to everything stop the run (exit 3, one line naming the cause) once every
request has failed for `down_after` seconds, with the calls in flight never above -c; replies
without an answer are failed calls, retried on resume; SIGTERM is Ctrl-C with exit 143.
How long the stop takes at the defaults is measured in bench/dead_endpoint.py, not asserted here."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rolebound.testing.fake_server import MODES, FakeServer

from helpers import write_mcq

SCRIPT = Path(sys.executable).with_name("rolebound")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")


def rb(*args, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ})


def one_error(res, code: int) -> str:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def records(out: Path) -> list[dict]:
    p = out / "records.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def api_run(url: str, data: Path, out: Path, *extra) -> list:
    return ["run", "mcq", "--model", "openai:test-model", "--base-url", url, "--data", data,
            "--scoring", "generate", "--out", out, "--quiet", "--no-cache", *extra]


@pytest.fixture
def data(tmp_path) -> Path:
    return write_mcq(tmp_path / "q.jsonl", 12)


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["sdk", "aiohttp"])
def test_a_server_that_never_answers_stops_the_run(tmp_path, data, transport):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(times=1)           # one answer first: then every request may go at once
        srv.fail(**MODES["hang"])
        err = one_error(rb(*api_run(srv.url + "/v1", data, out, "--timeout", "0.5", "-c", "4",
                                    "--backend-opt", "down_after=2", "--backend-opt", f"transport={transport}")), 3)
        assert srv.stats.max_in_flight <= 4           # retries included
        assert srv.stats.requests < 40                # without the stop: 12 calls x 7 tries
    assert f"no answer within 0.5 s from {srv.url}/v1" in err and "requests" in err
    assert "1 of 12 jobs done" in err and "rerun the same command" in err
    assert "run stopped" in (out / "errors.log").read_text()


@pytest.mark.slow
def test_a_server_that_answers_500_to_everything_stops_the_run(tmp_path, data):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES["500"])
        err = one_error(rb(*api_run(srv.url + "/v1", data, out, "-c", "4", "--backend-opt", "down_after=1",
                                    "--backend-opt", "max_consecutive_failures=0")), 3)
        assert srv.stats.max_in_flight <= 4
        assert srv.stats.requests < 84
        assert f"every request to {srv.url}/v1 failed" in err and "HTTP 500: internal error" in err
        assert "0 of 12 jobs done" in err
        srv.reset()                 # the same command resumes once the server works again
        res = rb(*api_run(srv.url + "/v1", data, out))
        assert res.returncode == 0, res.stderr


@pytest.mark.slow
def test_the_breaker_says_no_job_was_done(tmp_path, data):
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES["500"])
        err = one_error(rb(*api_run(srv.url + "/v1", data, tmp_path / "r", "-c", "1", "--backend-opt",
                                    "max_retries=0", "--backend-opt", "max_consecutive_failures=3")), 3)
    assert "3 calls failed in a row" in err and "0 of 12 jobs done (2 failed)" in err


@pytest.mark.slow
@pytest.mark.parametrize("mode, says", [("no-choices", "the server's reply has no choices"),
                                         ("null-content", "the server's reply has no content")])
def test_a_reply_without_an_answer_is_a_failed_call_retried_on_resume(tmp_path, data, mode, says):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES[mode], times=2)
        err = one_error(rb(*api_run(srv.url + "/v1", data, out, "-c", "1")), 3)
        assert err.startswith("2 failed call(s)")
        log = (out / "errors.log").read_text()
        assert says in log and '"choices"' in log        # the body is kept
        assert "IndexError" not in log and "KeyError" not in log
        assert sum(1 for r in records(out) if r["error"]) == 2
        srv.reset()
        res = rb(*api_run(srv.url + "/v1", data, out))
        assert res.returncode == 0, res.stderr
        assert srv.stats.requests == 2                   # only the two failed calls again
    final = {r["call_id"]: r for r in records(out)}
    assert len(final) == 12 and not any(r["error"] for r in final.values())


@pytest.mark.slow
@pytest.mark.parametrize("sigint", ["default", "ignored"])   # ignored: `cmd &` / nohup, as a job runs
def test_sigterm_is_ctrl_c_with_exit_143(tmp_path, sigint):
    data = write_mcq(tmp_path / "q.jsonl", 30)
    out = tmp_path / "r"
    with FakeServer(delay=0.2, reply="B") as srv:
        args = api_run(srv.url + "/v1", data, out, "--concurrency", "2")
        ignore = sigint == "ignored"
        proc = subprocess.Popen([str(SCRIPT), *map(str, args)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignore else None)
        end = time.monotonic() + 60
        while len(records(out)) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < end, "no records appeared"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
        err = one_error(subprocess.CompletedProcess(args, proc.returncode, "", stderr), 143)
        assert "terminated" in err and "rerun the same command to resume" in err
        done = len(records(out))
        assert 3 <= done < 30
        assert json.loads((out / "manifest.json").read_text())["finished"] is None
        srv.reset()
        srv.delay = 0.0             # the delay was there to stop it mid-run; the resume needs none
        again = rb(*args)
        assert again.returncode == 0, again.stderr
        assert srv.stats.requests == 30 - done


def test_sigterm_outside_the_calls_is_one_line_and_exit_143(tmp_path):
    """While a command loads or writes its report (no run handler installed), SIGTERM used to kill
    the process silently; it takes the Ctrl-C path with exit 143."""
    # a command that resumes says so; `report` rebuilds from records and has nothing to resume (issue 52)
    for argv, said in ((["run", "charm"], "terminated; rerun the same command"), (["report", "x"], "terminated")):
        code = ("import sys, time, rolebound.cli as c\n"
                "def slow(**kw):\n    print('ready', flush=True); time.sleep(60)\n"
                f"c.app = slow\nsys.argv = ['rolebound', *{argv!r}]\nc.main()\n")
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)
        err = one_error(subprocess.CompletedProcess([], proc.returncode, "", stderr), 143)
        assert err == said if said == "terminated" else err.startswith(said), err
