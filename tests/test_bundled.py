"""The bundled model through the local transformers engine (real weights, CPU)."""

from __future__ import annotations

import asyncio
import math

import pytest

from rolebound.models.base import GenRequest, ScoreRequest
from rolebound.models.local import shared_engine
from rolebound.records import Decoding, Message

pytestmark = pytest.mark.model


def user(text):
    return [Message(role="user", content=text)]


def test_generation_stops_and_limits(bundled):
    reqs = [GenRequest(messages=user("What is the capital of France?")),
            GenRequest(messages=user("Write a long poem about the sea."), max_tokens=12),
            GenRequest(messages=user("Write a poem about cats."), stop=["\n"])]
    out = asyncio.run(bundled.generate(reqs, Decoding(max_tokens=40)))
    assert "Paris" in out[0].text and out[0].finish_reason == "stop"
    assert out[1].completion_tokens == 12 and out[1].finish_reason == "length"
    assert "\n" not in out[2].text and out[2].finish_reason == "stop" and out[2].text


def test_render_chat_uses_the_models_template(bundled):
    text = bundled.render_chat(user("hi"))
    assert text.endswith("<|im_start|>assistant\n") and "<|im_start|>user\nhi<|im_end|>" in text


def test_single_token_fast_path_matches_full_forward(bundled):
    """Options " 1".." 5" fold their shared space token into the context and read one position;
    the sum over a full forward of context+option must give the same log-probs."""
    msgs = user("Pick a number.\n1. one\n2. two\n3. three")
    eng = bundled.engine
    plan, eng.score_plan = eng.score_plan, "float32"   # one dtype on both sides: the float32 copy scores
    try:
        fast = asyncio.run(bundled.score([ScoreRequest(messages=msgs, assistant_prefix="Answer: ",
                                                       continuations=["1", "2", "3"])]))[0]
        slow = asyncio.run(bundled.score([ScoreRequest(messages=msgs, assistant_prefix="Answer: ",
                                                       continuations=["1 is it", "2 is it", "3 is it"])]))[0]
    finally:
        eng.score_plan = plan
    import torch

    model = eng._fp32_model if eng._fp32_model is not None else eng.model     # float32 engines score with .model
    ctx = eng.encode(bundled.render_chat(msgs) + "Answer:")
    with torch.inference_mode():
        for k, cont in enumerate(["1", "2", "3"]):
            ids = ctx + eng.encode(" " + cont)
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
            lp = torch.log_softmax(logits, -1)
            manual = float(lp[len(ids) - 2, ids[-1]])       # the digit after the folded space
            assert fast.logprobs[k] == pytest.approx(manual, abs=0.01)
    assert fast.token_counts == [1, 1, 1] and slow.token_counts[0] > 1
    assert all(s < f for s, f in zip(slow.logprobs, fast.logprobs))   # longer text, lower log-prob


def test_batched_greedy_equals_one_at_a_time():
    """fp32 so numerics are exact enough: rows leaving the batch must not disturb the others."""
    from rolebound.models.bundled import converted_dir

    eng = shared_engine(converted_dir(), dtype="fp32")[0]
    prompts = [eng.render(user(q)) for q in
               ["Name a color.", "What is 2+2? Explain briefly.", "Say hello in French.", "List three fruits."]]
    dec = Decoding(max_tokens=24)
    batched = eng.generate([GenRequest(prompt=p) for p in prompts], dec)
    single = [eng.generate([GenRequest(prompt=p)], dec)[0] for p in prompts]
    assert [b.text for b in batched] == [s.text for s in single]
    assert len({b.completion_tokens for b in batched}) > 1      # rows finished at different steps


def test_sampling_is_seeded(bundled):
    req = [GenRequest(messages=user("Tell me a word."))]
    a = asyncio.run(bundled.generate(req, Decoding(temperature=1.0, seed=7, max_tokens=8)))[0].text
    b = asyncio.run(bundled.generate(req, Decoding(temperature=1.0, seed=7, max_tokens=8)))[0].text
    assert a == b


def test_hidden_states_shape(bundled):
    hs = asyncio.run(bundled.hidden_states(["I was born in Bonn.", "I was born in Vienna in 1770."]))
    assert hs.shape[0] == 2 and hs.shape[1] == bundled.engine.model.config.hidden_size
    assert math.isfinite(float(hs.sum()))
