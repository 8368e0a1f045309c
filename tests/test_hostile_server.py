"""Hostile servers and endpoint flags, through the installed script: a reply the tool cannot keep
(NaN, Infinity or 1e999 log-probs, an object for finish_reason, a lone surrogate) is a failed call,
recorded, never cached and retried on resume; a folder or cache an older version poisoned with such
replies is read past with one warning line; a reply quoting the API key is masked everywhere; a
gzip bomb fails its call within a bounded read; a Retry-After years away stops the run; a bad base
URL, a SOCKS proxy without its package and an option given twice are one line and exit 2. The
user's files stay byte for byte the same."""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound.models.openai_api import MAX_REPLY_BYTES
from rolebound.records import Record, Unkeepable, record_line
from rolebound.store import ResponseCache
from rolebound.testing.fake_server import BOMB_BYTES, MODES, FakeServer

from helpers import SCRIPT, needs_script, rolebound, write_mcq

KEY = "sk-hostile-0123456789-never-written"


def one_error(res, code: int) -> str:
    err = res.stderr.strip()
    assert res.returncode == code, (res.returncode, res.stderr[-2000:])
    assert "Traceback" not in res.stderr and len(err.splitlines()) == 1, err
    return err


def _no_constant(name):
    raise AssertionError(f"{name} in a file that must be strict JSON")


def strict_records(out: Path) -> list[dict]:
    """Every line of records.jsonl: strict JSON (no NaN/Infinity) that reads back as a record."""
    rows = [json.loads(line, parse_constant=_no_constant)
            for line in (out / "records.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:
        Record.model_validate(row)
    return rows


def cache_values(tmp_path: Path) -> list[dict]:
    db = sqlite3.connect(tmp_path / "cache" / "responses.sqlite")
    try:
        return [json.loads(v, parse_constant=_no_constant) for (v,) in db.execute("SELECT value FROM responses")]
    finally:
        db.close()


def api_run(url: str, data: Path, out: Path, scoring: str, *extra) -> list:
    return ["run", "mcq", "--model", "openai:test-model", "--base-url", url, "--data", data,
            "--scoring", scoring, "--out", out, "--quiet", *extra]


@pytest.fixture
def data(tmp_path) -> Path:
    return write_mcq(tmp_path / "q.jsonl", 6)


# -- what is written: strict JSON that reads back -------------------------------------------------------
def _rec(**kw) -> Record:
    return Record(call_id="q0/direct/answer", item_id="q0", suite="mcq", strategy="direct", stage="answer", **kw)


def test_a_record_line_is_strict_json_and_keeps_a_minus_inf_log_prob():
    line = record_line(_rec(kind="score", continuations=["A", "B"], logprobs=[-0.5, -math.inf]))
    json.loads(line, parse_constant=_no_constant)
    assert '"logprobs":[-0.5,null]' in line
    assert Record.model_validate_json(line).logprobs == [-0.5, -math.inf]


@pytest.mark.parametrize("field, value, says", [
    ("logprobs", [math.nan, -1.0], "field 'logprobs[0]' is nan"),
    ("logprobs", [math.inf], "field 'logprobs[0]' is inf"),
    ("finish_reason", {"type": "stop"}, "field 'finish_reason': Input should be a valid string"),
    ("response", "B \ud800", "field 'response' holds a lone surrogate"),
    ("meta", {"score": math.nan}, "field 'meta.score' is nan"),
])
def test_a_record_that_would_not_read_back_is_refused_naming_the_field(field, value, says):
    rec = _rec()
    setattr(rec, field, value)
    with pytest.raises(Unkeepable, match=says.replace("[", r"\[").replace("]", r"\]")):
        record_line(rec)


def test_the_cache_writes_strict_json_only(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    try:
        with pytest.raises(ValueError):
            cache.put("k", {"logprobs": [math.nan]})
        with pytest.raises(ValueError):
            cache.put("k", {"text": "\ud800"})
        assert cache.get("k") is None
    finally:
        cache.close()


# -- replies that cannot be kept ---------------------------------------------------------------------
UNKEEPABLE = [("nan-logprob", "logprob", "is nan"), ("inf-logprob", "logprob", "is inf"),
              ("huge-logprob", "logprob", "is inf"), ("object-finish", "generate", "finish_reason is dict"),
              ("surrogate", "generate", "lone surrogate")]


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("mode, scoring, says", UNKEEPABLE, ids=[m for m, _, _ in UNKEEPABLE])
def test_a_reply_that_cannot_be_kept_is_a_failed_call_never_cached(tmp_path, data, mode, scoring, says):
    out, before = tmp_path / "r", data.read_bytes()
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES[mode], times=2)
        args = api_run(srv.url + "/v1", data, out, scoring, "-c", "1")
        err = one_error(rolebound(*args), 3)
        assert err.startswith("2 failed call(s)")
        assert says in (out / "errors.log").read_text(encoding="utf-8")
        rows = strict_records(out)
        assert len(rows) == 6 and sum(1 for r in rows if r["error"]) == 2
        assert len(cache_values(tmp_path)) == 4               # only the answers that could be kept
        srv.reset()
        again = rolebound(*args)
        assert again.returncode == 0 and again.stderr == "", again.stderr
        assert srv.stats.requests == 2                        # only the two failed calls again
    final = {r["call_id"]: r for r in strict_records(out)}
    assert len(final) == 6 and not any(r["error"] for r in final.values())
    assert data.read_bytes() == before


@pytest.mark.slow
@needs_script
def test_a_folder_and_cache_poisoned_by_an_older_version_are_read_past_with_one_warning(tmp_path, data):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        args = api_run(srv.url + "/v1", data, out, "logprob")
        assert rolebound(*args).returncode == 0
        # what an older version wrote for an Infinity log-prob and an object finish_reason
        lines = (out / "records.jsonl").read_text(encoding="utf-8").splitlines()
        first, second = json.loads(lines[0]), json.loads(lines[1])
        first["logprobs"] = [None] * len(first["logprobs"])
        second["finish_reason"] = {"type": "stop"}
        lines[:2] = [json.dumps(first), json.dumps(second)]
        (out / "records.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
        db = sqlite3.connect(tmp_path / "cache" / "responses.sqlite")
        with db:
            db.execute("""UPDATE responses SET value = '{"logprobs": [Infinity, Infinity, Infinity, Infinity],
                          "token_counts": [1, 1, 1, 1], "prompt_tokens": null, "error": null}'""")
        db.close()

        rep = rolebound("report", out)
        assert rep.returncode == 0, rep.stderr
        warn = rep.stderr.strip().splitlines()
        assert len(warn) == 1 and warn[0].startswith("warning: ") and "records.jsonl" in warn[0]
        assert "2 records" in warn[0] and "line 1" in warn[0] and "rerun" in warn[0]

        srv.reset()
        res = rolebound(*args)              # the same command: those two calls again, past the cache
        assert res.returncode == 0, res.stderr
        warns = res.stderr.strip().splitlines()
        assert len(warns) == 2 and all(w.startswith("warning: ") for w in warns), warns
        assert "their calls run again" in warns[0] and "responses.sqlite" in warns[1]
        assert srv.stats.requests == 2
        assert rolebound("report", out).stderr == ""          # superseded: nothing to warn about

        srv.reset()
        fresh = rolebound(*api_run(srv.url + "/v1", data, tmp_path / "fresh", "logprob"))
        assert fresh.returncode == 0 and srv.stats.requests == 4      # the 4 poisoned entries, asked again
        assert len(fresh.stderr.strip().splitlines()) == 1 and "responses.sqlite" in fresh.stderr


@pytest.mark.slow
@needs_script
def test_a_reply_quoting_the_api_key_is_masked_everywhere(tmp_path, data):
    out = tmp_path / "r"
    env = {**os.environ, "OPENAI_API_KEY": KEY}
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES["key-echo"])
        res = rolebound(*api_run(srv.url + "/v1", data, out, "generate"), env=env)
        assert srv.stats.keys_seen == {KEY}                   # the key was really sent, and sent back
    assert res.returncode == 0, res.stderr
    assert KEY not in res.stdout + res.stderr
    written = [p for p in [*out.rglob("*"), *(tmp_path / "cache").rglob("*")] if p.is_file()]
    assert any(p.name == "responses.sqlite" for p in written)
    for p in written:
        assert KEY.encode() not in p.read_bytes(), p
    assert all("***" in r["response"] for r in strict_records(out))


# -- bounded reads, endpoints that will not serve ---------------------------------------------------
MAXRSS = ("import resource, subprocess, sys\n"
          "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
          "sys.stderr.write(r.stderr)\n"
          "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
          "sys.exit(r.returncode)\n")


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("transport", ["sdk", "aiohttp"])
def test_a_gzip_bomb_fails_its_call_within_a_bounded_read(tmp_path, data, transport):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES["gzip-bomb"], times=1)
        args = api_run(srv.url + "/v1", data, out, "generate", "-c", "1", "--backend-opt", f"transport={transport}")
        res = subprocess.run([sys.executable, "-c", MAXRSS, str(SCRIPT), *map(str, args)],
                             capture_output=True, text=True, timeout=120)
        err = one_error(res, 3)
        assert err.startswith("1 failed call(s)")
        assert f"over {MAX_REPLY_BYTES >> 20} MiB once gzip-decompressed" in (out / "errors.log").read_text()
        peak_kib = int(res.stdout.strip().splitlines()[-1])
        assert peak_kib * 1024 < BOMB_BYTES, peak_kib           # the bomb was never inflated whole
        srv.reset()
        assert rolebound(*args).returncode == 0 and srv.stats.requests == 1


@pytest.mark.slow
@needs_script
def test_a_retry_after_years_away_stops_the_run_at_once(tmp_path, data):
    out = tmp_path / "r"
    with FakeServer(reply="B") as srv:
        srv.fail(**MODES["429-forever"])
        err = one_error(rolebound(*api_run(srv.url + "/v1", data, out, "generate")), 3)
        assert srv.stats.requests == 1                         # no retry waits out ten years
    assert "HTTP 429" in err and "asks to wait 10 years (Retry-After)" in err and "rerun" in err
    assert (out / "records.jsonl").exists()


# -- endpoint flags and environment: exit 2, one line, nothing written --------------------------------
BAD_ENDPOINTS = [
    (["--base-url", "http://127.0.0.1:8000/v1\r\nX-Injected: 1"], {}, "holds the character '\\r'"),
    (["--base-url", "http://127.0.0.1:8000/v1\nHost: evil"], {}, "holds the character '\\n'"),
    (["--base-url", "http://127.0.0.1:99999/v1"], {}, "Port out of range"),
    (["--base-url", "http://127.0.0.1:8000/v1", "--backend-opt", "base_url=http://127.0.0.1:9000/v1"], {},
     "--base-url and --backend-opt base_url are both given"),
    (["--base-url", "http://127.0.0.1:8000/v1", "--judge", "openai:j", "--judge-base-url",
      "http://127.0.0.1:8001/v1", "--judge-opt", "base_url=http://127.0.0.1:9000/v1"], {},
     "--judge-base-url and --judge-opt base_url are both given"),
    (["--base-url", "http://127.0.0.1:8000/v1"], {"ALL_PROXY": "socks5://user:hunter2pw@127.0.0.1:1080"},
     "the proxy in ALL_PROXY (socks5://127.0.0.1:1080) is a SOCKS proxy, which needs the socksio package"),
    ([], {"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1\r\nX: y"}, "OPENAI_BASE_URL"),
]


@pytest.mark.slow
@needs_script
@pytest.mark.parametrize("flags, env, says", BAD_ENDPOINTS,
                         ids=["crlf", "lf", "port", "backend-opt-twice", "judge-opt-twice", "socks", "env-url"])
def test_a_bad_endpoint_is_one_line_and_exit_2(tmp_path, data, flags, env, says):
    out, before = tmp_path / "r", data.read_bytes()
    environ = {k: v for k, v in os.environ.items() if k.lower() not in ("all_proxy", "openai_base_url")}
    res = rolebound("run", "mcq", "--model", "openai:test-model", *flags, "--data", data, "--out", out, "--quiet",
                    env={**environ, **env})
    err = one_error(res, 2)
    assert says in err and "hunter2pw" not in err
    assert not out.exists() and data.read_bytes() == before


@pytest.mark.slow
def test_a_gzip_bomb_at_props_is_no_template_and_is_never_inflated():
    from rolebound.models.chat_template import from_server
    from rolebound.testing import fake_server

    class PropsBomb(FakeServer):
        async def _answer(self, method, path, raw, n, arrival, key=""):
            return 200, {}, fake_server.EDITS["gzip-bomb"]({}, key)

    with PropsBomb() as srv:
        assert from_server(srv.url + "/v1", None) is None
        assert srv.stats.requests == 1
