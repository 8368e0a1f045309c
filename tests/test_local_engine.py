"""The local engine's speed paths must not change answers: shared-prefix KV reuse and batching."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from rolebound.models.base import GenRequest, ScoreRequest
from rolebound.models import local
from rolebound.models.local import TransformersEngine, auto_batch, shared_engine
from rolebound.records import Decoding, Message


def groups(seqs, firsts, prefix_min=4):
    return TransformersEngine._prefix_groups(SimpleNamespace(prefix_min=prefix_min), seqs, firsts)


def test_prefix_groups_share_only_long_prefixes_and_keep_the_rest_in_order():
    shared = [1, 2, 3, 4, 5, 6]
    seqs = [[9, 9, 9], shared + [7, 8], [8, 1], shared + [9], shared[:3] + [0, 0, 0]]
    got, rest = groups(seqs, [len(s) - 1 for s in seqs])
    assert got == [([1, 3], 6)]
    assert rest == [0, 2, 4]                        # request order: plain batches stay as before


def test_prefix_stops_before_the_first_position_a_member_reads():
    seqs = [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 8]]
    got, _ = groups(seqs, [4, 6])                   # the first sequence reads from position 4
    assert got == [([0, 1], 4)]
    assert groups(seqs, [3, 6])[0] == []            # 3 shared tokens: under prefix_min


def test_prefix_reuse_off_gives_no_groups():
    seqs = [[1, 2, 3, 4, 5]] * 3
    assert groups(seqs, [4, 4, 4], prefix_min=0) == ([], [0, 1, 2])


@pytest.fixture(scope="module")
def fp32_engine():
    from rolebound.models.bundled import converted_dir

    return shared_engine(converted_dir(), dtype="fp32")[0]       # one fp32 load per test run


PROFILE = ("Tony Stark is a genius inventor, a billionaire and the man inside the Iron Man suit. "
           "He grew up in Manhattan, studied at MIT and runs Stark Industries. ") * 2


def persona(question):
    return [Message(role="user", content=f"You are Tony Stark. Profile: {PROFILE}\nQuestion: {question}")]


@pytest.mark.model
def test_shared_prefix_scoring_equals_plain_batches(fp32_engine):
    """fp32, so the two paths must agree to rounding; single- and multi-token options."""
    eng = fp32_engine
    qs = ["Who is your father?", "Which company do you run?", "Where did you study?"]
    reqs = [ScoreRequest(messages=persona(q), assistant_prefix="Answer: ", continuations=["1", "2", "3"]) for q in qs]
    reqs += [ScoreRequest(messages=persona(q), continuations=["Yes", "No, never", "Maybe so"]) for q in qs]
    seqs = [eng._split_context(r)[0] for r in reqs]
    found, _ = eng._prefix_groups(seqs, [len(s) - 1 for s in seqs])
    assert found and found[0][1] >= eng.prefix_min      # the reuse path really runs
    fast = eng.score(reqs)
    old, eng.prefix_min = eng.prefix_min, 0
    try:
        plain = eng.score(reqs)
    finally:
        eng.prefix_min = old
    for f, p in zip(fast, plain):
        assert f.error is None and f.token_counts == p.token_counts
        assert f.logprobs == pytest.approx(p.logprobs, abs=1e-3)


@pytest.mark.model
def test_shared_prefix_generation_equals_plain_batches(fp32_engine):
    eng = fp32_engine
    reqs = [GenRequest(messages=persona(q), max_tokens=n) for q, n in
            [("Who is Pepper?", 12), ("What is your suit made of?", 20), ("Name your AI.", 6)]]
    reqs.append(GenRequest(prompt="Unrelated short prompt:", max_tokens=5))
    dec = Decoding(max_tokens=16)
    fast = eng.generate(reqs, dec)
    old, eng.prefix_min = eng.prefix_min, 0
    try:
        plain = eng.generate(reqs, dec)
    finally:
        eng.prefix_min = old
    assert [f.text for f in fast] == [p.text for p in plain]
    assert [f.prompt_tokens for f in fast] == [p.prompt_tokens for p in plain]
    assert [f.completion_tokens for f in fast] == [p.completion_tokens for p in plain]


@pytest.mark.model
def test_auto_batch_is_16_rows_on_cpu_with_a_memory_budget(fp32_engine):
    rows, tokens = auto_batch(fp32_engine.model, "cpu", fp32_engine.dtype)
    assert rows == 16 and 2048 <= tokens <= 65536
    assert fp32_engine.max_batch == 16 and 2048 <= fp32_engine.batch_tokens <= 65536


@pytest.mark.model
def test_float32_head_equals_the_models_own_logits(fp32_engine):
    """The scoring path (trunk hidden state -> fp32 projection) is the model's own head."""
    eng = fp32_engine
    torch = eng.torch
    ids, mask, pos = eng._pad([eng.encode("The capital of France is"), eng.encode("Two plus two is")])
    inputs = dict(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
    with torch.inference_mode():
        ours = eng._logsoftmax32(inputs, 3)
        ref = torch.log_softmax(eng.model(**inputs, logits_to_keep=3).logits.float(), dim=-1)
    assert torch.allclose(ours, ref, atol=1e-4)


@pytest.mark.model
def test_an_answer_does_not_depend_on_its_batch():
    """Default dtype (bf16 where the CPU has it): the same request scored alone and inside a
    batch of other lengths picks the same option, and options are not tied."""
    from rolebound.models.bundled import converted_dir

    eng = shared_engine(converted_dir(), prefix_min=0)[0]
    qs = ["Who is your father?", "Which company do you run?", "Where did you study?", "Name your AI."]
    reqs = [ScoreRequest(messages=persona(q) if i % 2 else [Message(role="user", content=q * (i + 1))],
                         assistant_prefix="Answer: ", continuations=["1", "2", "3", "4", "5"])
            for i, q in enumerate(qs)]
    together = eng.score(reqs)
    for r, t in zip(reqs, together):
        alone = eng.score([r])[0]
        assert alone.logprobs.index(max(alone.logprobs)) == t.logprobs.index(max(t.logprobs))
        # close calls are scored again in float32 (stable to 0.05); clear ones keep the bf16
        # pass, whose values move with the batch but never by enough to change the answer
        tol = 0.05 if local._close(alone) else local.RESCORE_MARGIN / 2
        assert alone.logprobs == pytest.approx(t.logprobs, abs=tol)
        assert len(set(t.logprobs)) == len(t.logprobs)          # no exact ties (float32 head)


@pytest.mark.model
def test_close_calls_are_decided_by_the_float32_copy(monkeypatch):
    """score() keeps the bf16 pass only for clear calls: with a huge margin every request is
    scored again and equals the float32-only scoring; with margin 0 none is."""
    from rolebound.models.bundled import converted_dir

    eng = shared_engine(converted_dir(), prefix_min=0)[0]
    if not eng.score_fp32 or eng.dtype == eng.torch.float32:
        pytest.skip("this CPU scores in float32 directly")
    reqs = [ScoreRequest(messages=[Message(role="user", content=q)], assistant_prefix="Answer: ",
                         continuations=["1", "2", "3"]) for q in ("Pick one.", "Which one is right?")]
    fp32 = eng._score_once(reqs)                       # _score_pass None: the float32 copy
    monkeypatch.setattr(eng, "score_plan", "two-pass")  # cost would pick float32 alone on some CPUs
    monkeypatch.setattr(local, "RESCORE_MARGIN", 1e9)
    before = list(eng.rescored)                        # the engine is shared with other tests
    assert [r.logprobs for r in eng.score(reqs)] == [r.logprobs for r in fp32]
    assert [a - b for a, b in zip(eng.rescored, before)] == [2, 2, 0]
    monkeypatch.setattr(local, "RESCORE_MARGIN", 0.0)
    assert eng.score(reqs) and [a - b for a, b in zip(eng.rescored, before)] == [2, 4, 0]
    monkeypatch.setattr(eng, "score_plan", "float32")
    assert [r.logprobs for r in eng.score(reqs)] == [r.logprobs for r in fp32]
    assert [a - b for a, b in zip(eng.rescored, before)] == [2, 4, 2]


def charm_requests(per_role=6, roles=3):
    """CHARM's logprob calls (BA Yes/No, BC and KV options) for a few characters: personas shared
    by many calls (the prefix-reuse path) and questions of their own."""
    from rolebound.suites.charm.data import expand, load_data
    from rolebound.suites.charm.prompts import ANSWER_PREFIX, ba_prompt, mcq_prompt

    items, _ = expand(load_data()[0])
    names = list(dict.fromkeys(i.role for i in items))[:roles]
    picked = [i for r in names for i in [i for i in items if i.role == r][:per_role]]
    reqs = []
    for i in picked:
        if i.stage == "ba":
            reqs.append(ScoreRequest(messages=[Message(role="user", content=ba_prompt(i))], continuations=["Yes", "No"]))
        else:
            reqs.append(ScoreRequest(messages=[Message(role="user", content=mcq_prompt(i))], assistant_prefix=ANSWER_PREFIX,
                                     continuations=[str(k) for k in range(1, len(i.options) + 1)]))
    return reqs


def best(res):
    top = max(res.logprobs)
    return [k for k, x in enumerate(res.logprobs) if x == top]      # the answer, and any exact tie


@pytest.mark.model
def test_charm_answers_equal_float32_everywhere_on_every_score_plan(monkeypatch):
    """The answers (and exact ties) of score() are the float32 copy's, whichever plan the cost
    picks (float32 alone, or bf16 then a float32 re-score of close calls) and however the calls
    are batched: all at once or in small pieces."""
    from rolebound.models.bundled import converted_dir

    eng = shared_engine(converted_dir())[0]
    if not eng.score_fp32 or eng.dtype == eng.torch.float32:
        pytest.skip("this CPU scores in float32 directly")
    reqs = charm_requests(per_role=4, roles=2)     # personas shared by 4 calls each: both paths, 8 calls
    ref = eng._score_once(reqs)                              # _score_pass None: the float32 copy, every call
    for plan in ("two-pass", "float32"):
        monkeypatch.setattr(eng, "score_plan", plan)
        before = list(eng.rescored)
        whole = eng.score(reqs)
        pieces = [r for k in range(0, len(reqs), 5) for r in eng.score(reqs[k:k + 5])]
        for got in (whole, pieces):
            assert [best(g) for g in got] == [best(r) for r in ref], plan
        if plan == "two-pass":                   # both kinds of call occur: some kept, some re-scored
            assert 0 < eng.rescored[0] - before[0] < eng.rescored[1] - before[1]
        else:                                    # every value is float32's, to batch rounding
            for got in (whole, pieces):
                for g, r in zip(got, ref):
                    assert g.logprobs == pytest.approx(r.logprobs, abs=1e-3)


@pytest.mark.parametrize("cost,rescored,alone", [
    (0.6, [0, 0, 0], True),          # float32 GEMMs faster than bf16 ones: never two passes
    (1.8, [0, 0, 0], False),         # bf16 faster, nothing known yet: the two passes
    (1.8, [40, 60, 0], False),       # under 64 requests seen: the share is not read yet
    (1.8, [200, 300, 0], True),      # 2/3 close: 1 + 0.67 * 1.8 > 1.8
    (3.0, [60, 300, 0], False),      # 1/5 close at 3x: 1.6 < 3
])
def test_the_score_plan_is_the_cheaper_one(cost, rescored, alone):
    eng = SimpleNamespace(score_plan=None, _fp32_cost=cost, rescored=rescored)
    assert TransformersEngine._fp32_alone(eng) is alone
    eng.score_plan = "two-pass"
    assert TransformersEngine._fp32_alone(eng) is False


# -- prefix KV kept across calls (models/prefix_kv.py) ---------------------------------------------
def test_prefix_kv_finds_the_longest_shared_entry_slices_it_and_keeps_its_budget():
    torch = pytest.importorskip("torch")
    from rolebound.models.prefix_kv import PrefixKV, nbytes

    def kv(n):                                   # 2 layers, (1, heads, tokens, dim); value = position
        t = torch.arange(n, dtype=torch.float32).view(1, 1, n, 1).expand(1, 2, n, 4).contiguous()
        return [(t, t + 100)] * 2

    owner, other = object(), object()
    cache = PrefixKV(budget_mb=1)
    cache.put(owner, [1, 2, 3, 4, 5], kv(5))
    cache.put(other, [1, 2, 3, 4, 5, 6], kv(6))
    key, n = cache.best(owner, [1, 2, 3, 9, 9])
    assert key == (id(owner), (1, 2, 3, 4, 5)) and n == 3            # another model's entry is not used
    assert cache.best(owner, [1, 2, 3, 4, 5, 6], limit=4)[1] == 4    # never past the first read position
    assert cache.best(owner, [7, 8])[0] is None
    k, v = cache.take(key, 3)[0]
    assert k.shape == (1, 2, 3, 4) and k[0, 0, :, 0].tolist() == [0, 1, 2] and v[0, 0, 2, 0] == 102
    cache.put(owner, [1, 2, 3, 4, 5, 6, 7], kv(7))                   # extends the first: it goes
    assert [e[1] for e in cache.entries] == [(1, 2, 3, 4, 5, 6), (1, 2, 3, 4, 5, 6, 7)]
    assert cache.size == nbytes(kv(6)) + nbytes(kv(7))
    per_token = nbytes(kv(1))
    small = PrefixKV(budget_mb=per_token * 10 / (1 << 20))           # room for 10 tokens
    small.put(owner, [1] * 6, kv(6))
    small.put(owner, [2] * 3, kv(3))
    small.put(owner, [3] * 4, kv(4))                                 # the oldest is dropped
    assert [e[1][0] for e in small.entries] == [2, 3] and small.size <= small.budget
    small.put(owner, [4] * 11, kv(11))                               # over the whole budget: not kept
    assert [e[1][0] for e in small.entries] == [2, 3]


@pytest.mark.model
def test_a_prefix_kept_from_an_earlier_call_gives_the_answers_of_no_reuse(fp32_engine):
    """Two calls under one persona: the second computes none of it (counted as saved), a lone
    request on the persona reuses it too, and scores and greedy text equal those of no reuse."""
    eng = fp32_engine
    eng.kv.clear()
    qs = ["Who is your father?", "Which company do you run?", "Where did you study?", "Name your AI."]
    reqs = [ScoreRequest(messages=persona(q), assistant_prefix="Answer: ", continuations=["1", "2", "3"]) for q in qs]
    from rolebound.models.prefix_kv import lcp

    ctx = [eng._split_context(r)[0] for r in reqs]
    plen = lcp(ctx[0], ctx[1], len(ctx[0]))            # the persona the first call's pair shares
    assert plen >= eng.prefix_min
    before = dict(eng.prefill)
    first = eng.score(reqs[:2])
    mid = dict(eng.prefill)
    second = eng.score(reqs[2:3])                        # alone in its call: from the kept prefix
    third = eng.score(reqs[3:])
    after = dict(eng.prefill)
    assert after["saved"] - mid["saved"] >= 2 * plen and mid["saved"] - before["saved"] >= plen
    assert after["computed"] - mid["computed"] < 2 * 30             # the questions' tails only
    old, eng.prefix_min = eng.prefix_min, 0
    try:
        plain = eng.score(reqs)
        gplain = eng.generate([GenRequest(messages=persona(q), max_tokens=8) for q in qs], Decoding(max_tokens=8))
    finally:
        eng.prefix_min = old
    for f, p in zip(first + second + third, plain):
        assert f.logprobs == pytest.approx(p.logprobs, abs=1e-3)
    gens = [eng.generate([GenRequest(messages=persona(q), max_tokens=8)], Decoding(max_tokens=8))[0] for q in qs]
    assert [g.text for g in gens] == [p.text for p in gplain]
    assert eng.kv.size <= eng.kv.budget and eng.kv.entries


@pytest.mark.model
def test_the_backend_reports_prefill_tokens_and_takes_the_budget_option():
    from rolebound.models import create_backend

    b = create_backend("bundled", prefix_cache_mb=0)
    info_engine = b.engine
    assert info_engine.kv is None and b.info()["prefix"]["cache_mb"] == 0
    assert set(b.info()["prefill_tokens"]) == {"computed", "saved"}
    assert b.info()["decode"] == "dynamic cache"                   # the static step is CUDA's by default


@pytest.mark.parametrize("engine,option", [("llamacpp", "prefix_cache_mb"), ("llamacpp", "dtype"),
                                           ("torch", "n_ctx"), ("torch", "flash_attn")])
def test_an_option_of_the_other_engine_is_refused_by_name(engine, option):
    from rolebound.errors import BackendError
    from rolebound.models import create_backend

    with pytest.raises(BackendError, match=f"option '{option}' does not apply to --engine {engine}"):
        create_backend("bundled", engine=engine, **{option: 1})


# -- the decode loop (models/decode.py) --------------------------------------------------------------
class CharTok:
    """A tokenizer stand-in: token t is chr(t)."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(t) for t in ids)


def test_rows_finish_at_end_of_turn_stop_string_or_limit_and_are_emitted_at_once():
    from rolebound.models.decode import Rows

    seen = []
    rows = Rows(CharTok(), {0}, limits=[5, 5, 2], stops=[[], ["c"], []], prompt_tokens=[3, 4, 5],
                done=lambda r, res: seen.append((r, res.text, res.finish_reason)))
    rows.take([0, 1, 2], [ord("a"), ord("a"), ord("a")])
    rows.take([0, 1, 2], [0, ord("b"), ord("b")])                # row 0 ends its turn, row 2 its limit
    assert seen == [(0, "a", "stop"), (2, "ab", "length")] and rows.left == 1
    rows.take([0, 1, 2], [ord("x"), ord("c"), ord("x")])        # finished rows take nothing more
    assert seen[-1] == (1, "ab", "stop") and rows.left == 0
    assert [r.completion_tokens for r in rows.results] == [1, 3, 2]
    assert [r.prompt_tokens for r in rows.results] == [3, 4, 5]


def test_finished_rows_leave_the_batch_in_chunks():
    torch = pytest.importorskip("torch")
    from transformers import DynamicCache

    from rolebound.models.decode import DynamicStep, Rows

    cache = DynamicCache()
    cache.update(torch.arange(8.0).view(8, 1, 1, 1).expand(8, 1, 3, 2).contiguous(), torch.zeros(8, 1, 3, 2), 0)
    step = DynamicStep(None, "cache", cache, torch.ones(8, 3, dtype=torch.long), torch.full((8,), 3), steps=4)
    rows = Rows(CharTok(), {0}, [9] * 8, [[]] * 8, [3] * 8)
    tok = torch.arange(1, 9)
    rows.take(step.alive, [0] + [ord("a")] * 7)                  # one of 8 finished: it stays
    assert step.prune(rows, tok).tolist() == tok.tolist() and len(step.alive) == 8
    rows.take(step.alive, [ord("a"), ord("a"), 0] + [ord("a")] * 5)   # two of 8: both go
    assert step.prune(rows, tok).tolist() == [2, 4, 5, 6, 7, 8] and step.alive == [1, 3, 4, 5, 6, 7]
    assert cache.layers[0].keys[:, 0, 0, 0].tolist() == [1, 3, 4, 5, 6, 7]
    assert step.mask.shape == (6, 7) and step.pos.tolist() == [3] * 6


def personas(n_each=3, unrelated=True):
    """Two personas' questions (two prefix groups) and, unless told, two unrelated prompts."""
    other = "Sherlock Holmes is a consulting detective in London who lives at 221B Baker Street. " * 3
    qs = ["Who is Pepper?", "What is your suit made of?", "Name your AI.", "Where do you live?"][:n_each]
    reqs = [GenRequest(messages=persona(q), max_tokens=10) for q in qs]
    reqs += [GenRequest(messages=[Message(role="user", content=f"You are Sherlock. {other}\n{q}")], max_tokens=8)
             for q in qs]
    if unrelated:
        reqs += [GenRequest(prompt="Unrelated short prompt:", max_tokens=5),
                 GenRequest(messages=[Message(role="user", content="Say hello.")], max_tokens=6)]
    return reqs


_ALONE: dict = {}


def alone(eng, reqs, dec):
    """Each request decoded alone (a call of its own) on the module's fp32 engine. The tests here
    check that what the engine kept from earlier calls never changes an answer, so a request already
    decoded alone under the same decoding and end-of-turn tokens is not decoded again."""
    out = []
    for r in reqs:
        key = (id(eng), repr(r), repr(dec), tuple(sorted(eng.eos_ids)))
        if key not in _ALONE:
            _ALONE[key] = eng.generate([r], dec)[0]
        out.append(_ALONE[key])
    return out


def loops(eng, monkeypatch):
    seen = []
    inner = eng._decode_batch

    def counted(seqs, *a, **kw):
        seen.append(len(seqs))
        return inner(seqs, *a, **kw)

    monkeypatch.setattr(eng, "_decode_batch", counted)
    return seen


@pytest.mark.model
@pytest.mark.parametrize("long_other", [False, True])
def test_several_prefix_groups_decode_in_one_loop_with_the_answers_of_one_by_one(fp32_engine, monkeypatch, long_other):
    """Without a long unrelated prompt the personas are computed apart and every row prefills
    from its persona's KV (prefill tokens saved); with one, prefilling every row whole costs no
    more, and the personas' KV is kept from that prefill for later calls."""
    eng = fp32_engine
    eng.kv.clear()
    reqs = personas(unrelated=False)
    if long_other:
        reqs.append(GenRequest(messages=[Message(role="user", content="Tell me a story. " * 30)], max_tokens=6))
    enc = [eng.encode(eng._request_text(r.messages, r.prompt)) for r in reqs]
    groups, _ = eng._prefix_groups(enc, [len(e) - 1 for e in enc])
    assert len(groups) == 2                                   # the two personas really share prefixes
    seen = loops(eng, monkeypatch)
    emitted = []
    dec = Decoding(max_tokens=16)
    before = dict(eng.prefill)
    together = eng.generate(reqs, dec, emit=lambda i, res: emitted.append(i))
    assert seen == [len(reqs)]                                # one decode loop for the whole batch
    saved = eng.prefill["saved"] - before["saved"]
    if long_other:
        assert saved == 0 and eng.prefill["computed"] - before["computed"] == sum(len(e) for e in enc)
        assert all(eng.kv.best(eng.model, enc[m[0]])[1] >= plen for m, plen in groups)
    else:
        assert saved == sum((len(m) - 1) * plen for m, plen in groups)
    assert sorted(emitted) == list(range(len(reqs)))
    ones = alone(eng, reqs, dec)                              # the personas' rows: decoded once per module
    assert [t.text for t in together] == [a.text for a in ones]
    assert [(t.prompt_tokens, t.completion_tokens, t.finish_reason) for t in together] == \
        [(a.prompt_tokens, a.completion_tokens, a.finish_reason) for a in ones]


@pytest.mark.model
def test_stop_strings_and_end_of_turn_end_their_row_in_a_shared_loop(fp32_engine, monkeypatch):
    """A stop string cuts its row's text; an end-of-turn token (here one the model is known to
    produce) ends its row while the others go on; each equals that request decoded alone."""
    eng = fp32_engine
    reqs = personas(n_each=2)
    free = eng.generate(reqs, Decoding(max_tokens=16))
    words = free[0].text.split()
    assert len(words) >= 3
    stop = " " + words[2]
    reqs[0] = GenRequest(messages=reqs[0].messages, max_tokens=10, stop=[stop])
    first = eng.encode(free[2].text)[1]                       # the second token of another row
    monkeypatch.setattr(eng, "eos_ids", set(eng.eos_ids) | {first})
    seen = loops(eng, monkeypatch)
    got = eng.generate(reqs, Decoding(max_tokens=16))
    assert len(seen) == 1
    assert got[0].text == free[0].text[:free[0].text.index(stop)] and got[0].finish_reason == "stop"
    assert got[2].finish_reason == "stop" and got[2].completion_tokens <= 1
    alone = [eng.generate([r], Decoding(max_tokens=16))[0] for r in reqs]
    assert [g.text for g in got] == [a.text for a in alone]
    assert [g.finish_reason for g in got] == [a.finish_reason for a in alone]


@pytest.mark.model
def test_the_static_cache_step_gives_the_dynamic_answers_and_falls_back_when_it_fails(fp32_engine, monkeypatch):
    """The CUDA path's static cache runs eagerly on the CPU: same greedy text as the dynamic
    loop; a step that fails on its first call hands the batch to the dynamic loop and is off."""
    eng = fp32_engine
    assert eng.static_decode is False                          # CPU: off by default
    reqs = personas(n_each=2)
    dec = Decoding(max_tokens=12)
    dynamic = eng.generate(reqs, dec)
    assert eng._mask4d                                         # SDPA: decode steps pass its mask ready-made
    monkeypatch.setattr(eng, "_mask4d", False)                 # transformers builds it from the 2D mask
    assert [d.text for d in eng.generate(reqs, dec)] == [d.text for d in dynamic]
    monkeypatch.setattr(eng, "static_decode", True)
    monkeypatch.setattr(eng, "static_error", None)
    static = eng.generate(reqs, dec)
    assert eng.static_decode is True and eng.static_error is None
    assert [s.text for s in static] == [d.text for d in dynamic]
    kept = next(iter(eng._static_pool.values()))
    assert [s.text for s in eng.generate(reqs, dec)] == [d.text for d in dynamic]
    assert next(iter(eng._static_pool.values())) is kept       # the same shape reuses its cache

    def broken(*a, **kw):
        raise RuntimeError("no graph today")

    monkeypatch.setattr(eng, "_decode_forward", lambda: broken)
    again = eng.generate(reqs, dec)
    assert [s.text for s in again] == [d.text for d in dynamic]
    assert eng.static_decode is False and eng.static_error == "RuntimeError: no graph today"


def test_static_decode_takes_true_or_false_and_refuses_anything_else():
    from rolebound.errors import BackendError
    from rolebound.models import create_backend

    assert local._flag("false") is False and local._flag("True") is True and local._flag(False) is False
    with pytest.raises(BackendError, match="static_decode must be true or false, not 'maybe'"):
        create_backend("bundled", static_decode="maybe")
