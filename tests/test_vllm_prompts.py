"""The vllm backend hands vLLM token ids, never text it would tokenize again (a second BOS on
Llama-style templates), and passes the multi-GPU options through. vLLM does not install here:
its `LLM` API is a stub; the tokenizer and its chat template are the bundled SmolLM2's, real."""

from __future__ import annotations

import asyncio
import sys
import types
from types import SimpleNamespace

import pytest

from rolebound.records import Decoding, Message


class StubLLM:
    made: list[dict] = []
    prompts: list = []

    def __init__(self, tokenizer, **kw):
        self.tok = tokenizer
        StubLLM.made.append(kw)

    def get_tokenizer(self):
        return self.tok

    def generate(self, prompts, params, use_tqdm=False):
        StubLLM.prompts.extend(prompts)
        out = []
        for p in prompts:
            # what vLLM does: token ids as given; text tokenized with the special tokens added
            ids = p["prompt_token_ids"] if isinstance(p, dict) else self.tok(p)["input_ids"]
            out.append(SimpleNamespace(prompt_token_ids=ids, outputs=[SimpleNamespace(
                text="ok", token_ids=[1], finish_reason="stop")]))
        return out


@pytest.fixture()
def tok():
    from transformers import AutoTokenizer

    from rolebound.models.bundled import converted_dir

    return AutoTokenizer.from_pretrained(str(converted_dir()))


@pytest.fixture()
def backend(tok, monkeypatch):
    vllm = types.ModuleType("vllm")
    vllm.__version__ = "stub"
    vllm.LLM = lambda **kw: StubLLM(tok, **kw)
    vllm.SamplingParams = lambda **kw: SimpleNamespace(**kw)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    StubLLM.made.clear()
    StubLLM.prompts.clear()
    from rolebound.models.vllm_engine import VLLMBackend

    return VLLMBackend("/models/x", Decoding(), tensor_parallel_size=2, pipeline_parallel_size=2,
                       distributed_executor_backend="ray")


MSGS = [Message(role="system", content="You are Hamlet."), Message(role="user", content="Who are you?")]


def _llama_style(tok):
    """The SmolLM2 tokenizer made to behave as Llama's: a BOS token of its own, written by the
    chat template, and added by the tokenizer to any text it is given."""
    from tokenizers import processors

    tok.bos_token = "<|endoftext|>"
    bos, bos_id = tok.bos_token, tok.convert_tokens_to_ids("<|endoftext|>")
    tok.chat_template = "{{ bos_token }}" + tok.chat_template
    tok._tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=[(bos, bos_id)])
    return bos_id


def test_chat_prompts_go_as_the_templates_token_ids(backend, tok):
    from rolebound.models.base import GenRequest

    asyncio.run(backend.generate([GenRequest(messages=MSGS)], Decoding()))
    (sent,) = StubLLM.prompts
    text = tok.apply_chat_template([m.model_dump() for m in MSGS], add_generation_prompt=True, tokenize=False)
    assert "<|im_start|>system" in text                   # the real SmolLM2 template rendered
    assert sent == {"prompt_token_ids": tok(text, add_special_tokens=False)["input_ids"]}
    assert StubLLM.made[0]["pipeline_parallel_size"] == 2
    assert StubLLM.made[0]["tensor_parallel_size"] == 2
    assert StubLLM.made[0]["distributed_executor_backend"] == "ray"


@pytest.mark.slow
def test_a_template_that_writes_bos_gets_exactly_one(backend, tok):
    from rolebound.models.base import GenRequest

    bos_id = _llama_style(tok)
    text = tok.apply_chat_template([m.model_dump() for m in MSGS], add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|endoftext|><|im_start|>system")
    assert tok(text)["input_ids"][:2] == [bos_id, bos_id]      # the text handed to vLLM: two BOS
    asyncio.run(backend.generate([GenRequest(messages=MSGS), GenRequest(prompt="Once upon a time")], Decoding()))
    chat, raw = (p["prompt_token_ids"] for p in StubLLM.prompts)
    assert chat == tok(text, add_special_tokens=False)["input_ids"] and chat.count(bos_id) == 1
    assert raw == tok("Once upon a time")["input_ids"] and raw[0] == bos_id and raw.count(bos_id) == 1
