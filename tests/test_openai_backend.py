"""The `openai` backend against a local OpenAI-compatible server (rolebound.testing.fake_server).

Everything runs over real HTTP on 127.0.0.1: the SDK, the retry loop, the concurrency limit and
the runner. Waits are checked on the server's arrival times, never on the test's wall clock.
"""

from __future__ import annotations

import gc
import json
import math
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from typer.testing import CliRunner

import rolebound.models.openai_api as oa
from rolebound import api
from rolebound.cli import app
from rolebound.errors import RunStopped
from rolebound.models.base import GenRequest, ScoreRequest
from rolebound.records import Decoding, Message
from rolebound.store import load_records
from rolebound.testing.fake_server import MODES, FakeServer, token_logprob, tokenize, top_alternatives

KEY = "sk-fake-0123456789-do-not-leak"
TRANSPORT = "sdk"


@pytest.fixture(params=["sdk", "aiohttp"])
def transport(request, monkeypatch):
    """Run a test over both HTTP transports (the SDK's httpx stack and plain aiohttp)."""
    monkeypatch.setattr(sys.modules[__name__], "TRANSPORT", request.param)
    return request.param
LETTERS = "ABCDE"


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return KEY


@pytest.fixture
def server():
    with FakeServer(reply="B") as srv:
        yield srv


def backend(srv: FakeServer, **kw) -> oa.OpenAIBackend:
    opts = dict(base_url=srv.url + "/v1", concurrency=4, timeout=5.0, max_retries=3,
                backoff_base=0.01, backoff_max=2.0, transport=TRANSPORT)
    opts.update(kw)
    return oa.OpenAIBackend("test-model", **opts)


def chat_req(text: str = "Which option?", **kw) -> GenRequest:
    return GenRequest(messages=[Message(role="user", content=text)], **kw)


def gaps(srv: FakeServer) -> list[float]:
    t = [a["t"] for a in srv.stats.arrivals]
    return [b - a for a, b in zip(t, t[1:])]


def write_mcq(path: Path, n: int = 12) -> Path:
    """n five-option questions; the gold letter cycles A..E (the fake server always says B)."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"q{i}", "question": f"Question number {i}?",
                                 "options": [f"option {L} of {i}" for L in LETTERS],
                                 "answer": LETTERS[i % 5]}) + "\n")
    return path


# -- the server itself --------------------------------------------------------------------------
def test_server_listens_on_loopback_only_and_answers_plain_http(server):
    host, port = server._server.sockets[0].getsockname()[:2]
    assert host == "127.0.0.1" and server.url == f"http://127.0.0.1:{port}"
    assert all(s.getsockname()[0] == "127.0.0.1" for s in server._server.sockets)
    with urllib.request.urlopen(server.url + "/v1/models", timeout=5) as resp:
        models = json.load(resp)
    assert [m["id"] for m in models["data"]] == ["test-model"]
    bad = urllib.request.Request(server.url + "/v1/chat/completions", data=b"{not json", method="POST")
    for req, code in ((bad, 400), (server.url + "/v2/nothing", 404)):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        err.value.close()
        assert err.value.code == code
    assert server.stats.requests == 3 and server.stats.by_status == {200: 1, 400: 1, 404: 1}
    with urllib.request.urlopen(server.url + "/_fake/stats", timeout=5) as resp:   # not counted
        assert json.load(resp)["requests"] == 3
    reset = urllib.request.Request(server.url + "/_fake/reset", data=b"", method="POST")
    with urllib.request.urlopen(reset, timeout=5):
        pass
    assert server.stats.requests == 0 and server.stats.arrivals == []


def test_fault_rules_hit_the_requests_they_name(server):
    server.fail(status=500, on=[2])
    server.fail(status=429, retry_after=3, when=lambda path, body: "poison" in json.dumps(body))
    body = {"model": "test-model", "messages": [{"role": "user", "content": "hi"}]}

    def post(content: str) -> int:
        data = json.dumps({**body, "messages": [{"role": "user", "content": content}]}).encode()
        req = urllib.request.Request(server.url + "/v1/chat/completions", data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as exc:
            exc.close()
            return exc.code

    assert [post("a"), post("b"), post("poison"), post("c"), post("poison")] == [200, 500, 429, 200, 429]
    server.reset()
    assert post("poison") == 200 and server.stats.requests == 1


# -- generation ---------------------------------------------------------------------------------
async def test_chat_and_completions_endpoints(server, key, transport):
    b = backend(server)
    try:
        chat, = await b.generate([chat_req()], Decoding())
        raw, = await b.generate([GenRequest(prompt="Question: 2+2?\nAnswer:")], Decoding())
        assert chat.error is None and chat.text == "B" and chat.finish_reason == "stop"
        assert chat.completion_tokens == 1 and chat.prompt_tokens == len(tokenize("Which option?"))
        assert raw.error is None and raw.text == "B"
        paths = [a["path"] for a in server.stats.arrivals]
        assert paths == ["/v1/chat/completions", "/v1/completions"]
        assert {a["model"] for a in server.stats.arrivals} == {"test-model"}
        assert server.stats.keys_seen == {KEY}
    finally:
        await b.close()


async def test_max_tokens_and_stop_reach_the_server(transport):
    with FakeServer() as srv:    # echoes the user's message
        b = backend(srv)
        try:
            long, cut = await b.generate([chat_req("one two three four five", max_tokens=2),
                                          chat_req("alpha beta\ngamma", stop=["\n"])], Decoding())
            assert (long.text, long.finish_reason) == ("one two", "length")
            assert (cut.text, cut.finish_reason) == ("alpha beta", "stop")
        finally:
            await b.close()


@pytest.mark.slow
@pytest.mark.parametrize("limit", [3, 20])   # 20 > POOL_SIZE: requests spread over two HTTP pools
async def test_concurrency_is_bounded_and_reached(limit, transport):
    with FakeServer(delay=0.2, reply="B") as srv:     # long enough for every slot to fill
        b = backend(srv, concurrency=limit)
        try:
            results = await b.generate([chat_req(f"q{i}") for i in range(limit * 3)], Decoding())
            assert all(r.error is None for r in results)
            assert srv.stats.requests == limit * 3
            assert srv.stats.max_in_flight == limit
        finally:
            await b.close()


# -- retries ------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_429_is_retried_after_the_retry_after_wait(server, transport):
    server.fail(status=429, retry_after=1, times=1)
    b = backend(server)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error is None and res.text == "B"
        assert [a["status"] for a in server.stats.arrivals] == [429, 200]
        assert b.retries == 1 and b.waits and all(w >= 1.0 for w in b.waits)
        assert all(g >= 1.0 for g in gaps(server))
    finally:
        await b.close()


async def test_retry_after_is_capped_by_backoff_max(server, transport):
    server.fail(status=503, retry_after=30, times=1)
    b = backend(server, backoff_max=0.2)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error is None and b.waits == [0.2]
    finally:
        await b.close()


@pytest.mark.slow
async def test_500_and_timeouts_are_retried_with_growing_backoff(server, monkeypatch, transport):
    monkeypatch.setattr(oa.random, "uniform", lambda lo, hi: hi)   # jitter at its ceiling
    server.fail(status=500, times=2)
    server.fail(hang=3.0, times=1)                                # longer than the 0.5 s timeout
    b = backend(server, timeout=0.5, backoff_base=0.05)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error is None and res.text == "B"
        assert len(server.stats.arrivals) == 4                    # 500, 500, hang, 200
        assert b.retries == 3
        assert b.waits == pytest.approx([0.1, 0.2, 0.4])         # base * 2^attempt
        for gap, wait in zip(gaps(server), b.waits):
            assert gap >= wait
        assert gaps(server)[2] >= 0.85                           # the 0.5 s timeout, then 0.4 s
    finally:
        await b.close()


def test_backoff_delay_is_full_jitter_under_the_cap(server):
    b = backend(server, backoff_base=0.5, backoff_max=3.0)
    for attempt in range(1, 8):
        for _ in range(50):
            assert 0.0 <= b.backoff_delay(attempt, None) <= min(3.0, 0.5 * 2 ** attempt)
    assert all(b.backoff_delay(1, 2.0) >= 2.0 for _ in range(20))
    assert b.backoff_delay(1, 99.0) == 3.0


async def test_400_fails_at_once(server, transport):
    server.fail(status=400, times=1, message="bad parameter")
    b = backend(server)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error.startswith("HTTP 400") and "bad parameter" in res.error
        assert server.stats.requests == 1 and b.retries == 0
    finally:
        await b.close()


async def test_retries_end_in_a_recorded_error(server, transport):
    server.fail(status=503)
    b = backend(server, max_retries=2)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error.startswith("HTTP 503")
        assert server.stats.requests == 3 and b.retries == 2
    finally:
        await b.close()


async def test_connection_errors_are_retried(transport):
    with socket.socket() as s:        # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = oa.OpenAIBackend("test-model", base_url=f"http://127.0.0.1:{port}/v1", max_retries=2,
                         backoff_base=0.01, timeout=2.0, transport=transport)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert "Connect" in res.error.split(":")[0] and b.retries == 2
    finally:
        await b.close()


async def test_a_retry_after_past_the_stop_limit_ends_the_run_without_waiting(server, transport):
    server.fail(status=503, retry_after=3600, times=1)
    b = backend(server, timeout=5.0)        # the run waits max(3 x 5 s, 30 s) for an endpoint
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error.startswith("HTTP 503") and b.waits == [] and server.stats.requests == 1
        assert "asks to wait 3600 s (Retry-After), past the 30 s" in b.fatal_error
    finally:
        await b.close()


# -- replies: compressed, bombs, numbers that are not numbers -----------------------------------------
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
async def test_a_compressed_reply_is_read(server, transport, encoding):
    server.fail(edit=encoding)
    b = backend(server)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert res.error is None and res.text == "B"
    finally:
        await b.close()


@pytest.mark.slow
async def test_a_gzip_bomb_fails_its_call_without_a_retry(server, transport):
    server.fail(**MODES["gzip-bomb"])
    b = backend(server)
    try:
        res, = await b.generate([chat_req()], Decoding())
        assert f"over {oa.MAX_REPLY_BYTES >> 20} MiB once gzip-decompressed" in res.error
        assert server.stats.requests == 1 and b.fatal_error is None
    finally:
        await b.close()


@pytest.mark.parametrize("mode, says", [("nan-logprob", "is nan"), ("inf-logprob", "is inf"),
                                        ("huge-logprob", "is inf")])
async def test_a_log_prob_that_is_not_a_number_fails_the_score(transport, mode, says):
    with FakeServer(reply="C") as srv:
        srv.fail(**MODES[mode])
        b = backend(srv)
        try:
            req = ScoreRequest(continuations=["A", "B", "C"], messages=[Message(role="user", content="Pick")])
            res, = await b.score([req])
            assert says in res.error and not res.logprobs
        finally:
            await b.close()


# -- scoring --------------------------------------------------------------------------------------
async def test_chat_score_reads_top_logprobs(transport):
    with FakeServer(reply="C") as srv:
        b = backend(srv)
        try:
            msgs = [Message(role="user", content="Pick one")]
            res, = await b.score([ScoreRequest(continuations=list(LETTERS), messages=msgs)])
            expect = dict(top_alternatives("C", 20))
            assert res.error is None
            assert res.logprobs == pytest.approx([expect[L] for L in LETTERS])
            assert res.logprobs[2] == pytest.approx(math.log(0.5)) == max(res.logprobs)
            assert all(lp < 0 for lp in res.logprobs) and res.token_counts == [1] * 5
            odd, = await b.score([ScoreRequest(continuations=["C", "Zebra"], messages=msgs)])
            assert odd.logprobs[1] == -math.inf                # outside the top 20
            none, = await b.score([ScoreRequest(continuations=["Zebra", "Yak"], messages=msgs)])
            assert none.error and "top-20" in none.error       # never a silent pick
            sent = srv.stats.arrivals[0]["body"]
            assert sent["logprobs"] is True and sent["top_logprobs"] == 20 and sent["max_tokens"] == 1
        finally:
            await b.close()


async def test_echo_score_sums_continuation_tokens(transport):
    with FakeServer(reply="C") as srv:
        b = backend(srv)
        try:
            prompt = "Question: where?\nAnswer:"
            res, = await b.score([ScoreRequest(continuations=[" " + L for L in LETTERS], prompt=prompt)])
            assert res.error is None and res.token_counts == [1] * 5
            assert res.logprobs == pytest.approx([token_logprob(" " + L, "C") for L in LETTERS])
            assert max(range(5), key=lambda i: res.logprobs[i]) == 2
            multi, = await b.score([ScoreRequest(continuations=[" Paris, France"], prompt=prompt)])
            toks = tokenize(" Paris, France")
            assert multi.token_counts == [len(toks)] == [3]
            assert multi.logprobs[0] == pytest.approx(sum(token_logprob(t, "C") for t in toks))
            # the context's trailing space merges into the option's token: it still counts
            merged, = await b.score([ScoreRequest(continuations=["C", "A"], prompt=prompt + " ")])
            assert merged.token_counts == [1, 1]
            assert merged.logprobs == pytest.approx([math.log(0.5), token_logprob(" A", "C")])
            assert {a["path"] for a in srv.stats.arrivals} == {"/v1/completions"}
            bodies = [a["body"] for a in srv.stats.arrivals]      # options go out concurrently
            assert all(b_["echo"] is True for b_ in bodies)
            assert any(b_["prompt"] == prompt + " A" for b_ in bodies)
        finally:
            await b.close()


# -- through the runner ---------------------------------------------------------------------------
def _run(srv, tmp_path, out="run", **kw):
    opts = dict(suite="mcq", model="openai:test-model", data=str(write_mcq(tmp_path / "q.jsonl")),
                out=tmp_path / out, scoring="generate", concurrency=4, progress=False,
                backend_options={"base_url": srv.url + "/v1", "concurrency": 4, "max_retries": 1,
                                 "backoff_base": 0.01, "backoff_max": 0.05, "transport": TRANSPORT})
    opts.update(kw)
    return api.run(opts.pop("suite"), **opts)


@pytest.mark.slow
def test_mcq_run_end_to_end_generate(tmp_path, key, transport):
    with FakeServer(reply="B", delay=0.2) as srv:
        res = _run(srv, tmp_path)
        assert srv.stats.requests == 12 and srv.stats.max_in_flight == 4
    recs = load_records(res.run_dir)
    assert len(recs) == 12 and all(r.parsed == "B" and r.error is None for r in recs)
    assert [r.correct for r in recs] == [r.gold == "B" for r in recs]
    m = res.metrics["by_strategy"]["direct"]
    assert m["n"] == 12 and m["rate"] == pytest.approx(100 * 3 / 12, abs=0.01)   # golds q1, q6, q11
    assert res.manifest.counts["model_calls"] == 12 and res.manifest.model == "openai:test-model"
    assert res.manifest.model_info["requests_sent"] == 12


@pytest.mark.slow
@pytest.mark.parametrize("chat", [True, False])
def test_mcq_run_end_to_end_logprob(tmp_path, key, chat):
    with FakeServer(reply="C") as srv:
        res = _run(srv, tmp_path, scoring="logprob", options={"chat": chat})
        path = "/v1/chat/completions" if chat else "/v1/completions"
        assert {a["path"] for a in srv.stats.arrivals} == {path}
        assert srv.stats.requests == 12 * (1 if chat else 5)
    recs = load_records(res.run_dir)
    assert all(r.error is None and r.parsed == "C" and len(r.logprobs) == 5 for r in recs)
    assert all(max(r.logprobs) == pytest.approx(math.log(0.5), abs=1e-4) for r in recs)
    assert all(math.isfinite(x) and x < 0 for r in recs for x in r.logprobs)
    assert res.metrics["by_strategy"]["direct"]["n"] == 12


@pytest.fixture
def fast_cli_retries(monkeypatch):
    """The CLI has no backoff flags: shrink the defaults so the test stays quick."""
    init = oa.OpenAIBackend.__init__

    def patched(self, *a, **kw):
        kw.setdefault("backoff_base", 0.005)
        kw.setdefault("backoff_max", 0.02)
        init(self, *a, **kw)

    monkeypatch.setattr(oa.OpenAIBackend, "__init__", patched)



@pytest.mark.slow
def test_failed_calls_are_recorded_and_only_they_rerun(tmp_path, key, fast_cli_retries):
    """Through the CLI: the first run ends with 2 failed calls (exit 3), the same command again
    sends exactly those 2 requests and succeeds."""
    data = write_mcq(tmp_path / "q.jsonl")
    out = tmp_path / "run"
    with FakeServer(reply="B") as srv:
        poison = lambda path, body: any(f"number {i}?" in json.dumps(body) for i in (3, 7))  # noqa: E731
        srv.fail(status=500, when=poison)
        args = ["run", "mcq", "--model", "openai:test-model", "--base-url", srv.url + "/v1",
                "--data", str(data), "--scoring", "generate", "--out", str(out), "--concurrency", "3",
                "--quiet"]
        first = CliRunner().invoke(app, args)
        assert first.exit_code == 3, first.output
        assert srv.stats.max_in_flight <= 3
        assert srv.stats.requests == 10 + 2 * (1 + 6)          # default max_retries=6 for the CLI
        manifest = api.load_manifest(out)
        assert manifest.counts["failed_calls"] == 2 and manifest.counts["model_calls"] == 12
        errors = [r for r in load_records(out) if r.error]
        assert sorted(r.item_id for r in errors) == ["q3", "q7"]
        assert all(r.error.startswith("HTTP 500") for r in errors)
        assert (out / "errors.log").read_text().count("HTTP 500") == 2
        assert json.loads((out / "metrics.json").read_text())["failed_calls"] == 2

        srv.reset()
        second = CliRunner().invoke(app, args)
        assert second.exit_code == 0, second.output
        assert srv.stats.requests == 2
        assert sorted(json.dumps(a["status"]) for a in srv.stats.arrivals) == ["200", "200"]
    manifest = api.load_manifest(out)
    # counts add up over both invocations; resumed and failed_items describe the last one
    assert manifest.counts["model_calls"] == 12 + 2 and manifest.counts["resumed"] == 10
    assert manifest.counts["failed_calls"] == 2 and manifest.counts["failed_items"] == 0
    assert manifest.counts["invocations"] == 2
    assert not (out / "errors.log").exists()            # the clean pass removed the stale log
    recs = load_records(out)
    assert len(recs) == 12 and not any(r.error for r in recs)
    assert json.loads((out / "metrics.json").read_text())["by_strategy"]["direct"]["n"] == 12


@pytest.mark.slow
def test_api_key_never_reaches_the_run_files(tmp_path, key, transport):
    with FakeServer(reply="B") as srv:
        # a server that echoes the key in its error message (some do, partly masked)
        srv.fail(status=401, message=f"Incorrect API key provided: {KEY}",
                 when=lambda path, body: "number 5?" in json.dumps(body))
        with pytest.raises(RunStopped) as stop:                # a 401 stops the run at once
            _run(srv, tmp_path)
        assert srv.stats.keys_seen == {KEY}                     # the key was really sent
    assert stop.value.exit_code == 3 and KEY not in str(stop.value) and "***" in str(stop.value)
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"manifest.json", "records.jsonl", "metrics.json", "errors.log"} <= names
    assert any(n.startswith("report") for n in names)
    for p in files:
        assert KEY not in p.read_text(encoding="utf-8", errors="replace"), p.name
    err = next(r for r in load_records(tmp_path / "run") if r.error)
    assert err.error.startswith("HTTP 401") and "***" in err.error


def test_local_url_needs_no_key_but_remote_does(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    oa.OpenAIBackend("m", base_url="http://127.0.0.1:9/v1")     # local: a dummy key is fine
    from rolebound.errors import BackendError

    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        oa.OpenAIBackend("m", base_url="https://api.example.com/v1")


def test_credentials_in_the_url_stay_out_of_the_manifest(key):
    b = oa.OpenAIBackend("m", base_url="https://user:hunter2secret@llm.example.com/v1")
    assert "hunter2secret" not in json.dumps(b.info()) + json.dumps(b.identity())
    assert b.info()["base_url"] == "https://llm.example.com/v1"


def test_what_changes_how_a_request_is_served_is_in_the_cache_key(tmp_path, monkeypatch):
    """The same messages sent with and without a prefill, or to chat and to completions (rendered
    by a client template), get different replies: they must not share cached answers. The default
    setup's key is what it was, so existing caches keep their answers."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = "http://127.0.0.1:9/v1"
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    plain = oa.OpenAIBackend("m", base_url=url).identity()
    assert plain == {"backend": "openai", "model": "m", "base_url": url}
    prefilled = oa.OpenAIBackend("m", base_url=url, prefill="continue_final_message").identity()
    completions = oa.OpenAIBackend("m", base_url=url, endpoint="completions", chat_template=str(template)).identity()
    assert len({json.dumps(i, sort_keys=True) for i in (plain, prefilled, completions)}) == 3
    assert completions["chat_template"] == str(template)


@pytest.mark.slow
async def test_gc_is_frozen_only_while_the_backend_runs(server):
    b = backend(server)
    await b.prepare()
    assert gc.get_freeze_count() > 0
    await b.close()
    assert gc.get_freeze_count() == 0
    off = backend(server, freeze_gc=False)
    await off.prepare()
    assert gc.get_freeze_count() == 0
    await off.close()
