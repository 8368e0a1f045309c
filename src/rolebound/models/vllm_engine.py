"""Offline vLLM engine (GPU only, optional extra). Never run: no machine we test on has vLLM
(`rolebound models` says so); tests/test_vllm_prompts.py runs it against a stub of vLLM's API.

vllm pins its own torch and transformers, so install it into a fresh environment:
    python -m venv .venv-vllm && .venv-vllm/bin/pip install 'vllm' && .venv-vllm/bin/pip install -e . --no-deps
and the rest of rolebound's dependencies without torch (see docs/usage.md, "GPU and vLLM").
Options: tensor_parallel_size, pipeline_parallel_size, data_parallel_size,
distributed_executor_backend (ray: across nodes, docs/scale.md), gpu_memory_utilization,
max_model_len, enable_prefix_caching (on by default: CHARM asks hundreds of questions under one persona).

Prompts go to vLLM as token ids: a chat template that writes the BOS token itself (Llama's)
would get a second one if its text were handed over, since vLLM tokenizes text prompts with
the special tokens added.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Sequence

from ..errors import BackendError
from ..records import Decoding
from . import VLLM_HINT as INSTALL_HINT
from .base import (CHAT, CHAT_TEMPLATE, COMPLETE, LOGPROB, Backend, GenRequest, GenResult, ScoreRequest,
                   ScoreResult)


def _import_vllm():
    try:
        import vllm  # noqa: F401
        from vllm import LLM, SamplingParams
    except ImportError as exc:
        raise BackendError(f"{INSTALL_HINT} (import failed: {exc})") from None
    return LLM, SamplingParams


def prompt_ids(tok, text: str) -> list[int]:
    """The token ids of a prompt, with one BOS at most: a text that already starts with the BOS
    token (a chat template that writes it) is tokenized without special tokens; any other text
    gets what the tokenizer adds to a plain prompt."""
    bos = getattr(tok, "bos_token", None)
    return list(tok(text, add_special_tokens=not (bos and text.startswith(bos)))["input_ids"])


class VLLMBackend(Backend):
    backend = "vllm"
    batching = True
    capabilities = frozenset({CHAT, COMPLETE, LOGPROB, CHAT_TEMPLATE})
    preferred_batch = 4096
    option_names = frozenset({"dtype", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
                              "distributed_executor_backend", "gpu_memory_utilization",
                              "max_model_len", "enable_prefix_caching", "think_tag"})

    def __init__(self, name: str, decoding: Decoding | None = None, **options: Any):
        super().__init__(name, decoding, **options)
        self._llm = None
        self._lock = threading.Lock()
        _import_vllm()   # fail early with the install hint

    def identity(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.name, "dtype": str(self.options.get("dtype", "auto"))}

    @property
    def llm(self):
        with self._lock:
            if self._llm is None:
                LLM, _ = _import_vllm()
                kw = {"model": self.name,
                      "tensor_parallel_size": int(self.options.get("tensor_parallel_size", 1)),
                      "enable_prefix_caching": bool(self.options.get("enable_prefix_caching", True)),
                      "gpu_memory_utilization": float(self.options.get("gpu_memory_utilization", 0.85)),
                      "dtype": self.options.get("dtype", "auto"), "seed": self.decoding.seed}
                if self.options.get("pipeline_parallel_size"):
                    kw["pipeline_parallel_size"] = int(self.options["pipeline_parallel_size"])
                if self.options.get("distributed_executor_backend"):
                    kw["distributed_executor_backend"] = str(self.options["distributed_executor_backend"])
                if self.options.get("data_parallel_size"):
                    kw["data_parallel_size"] = int(self.options["data_parallel_size"])
                if self.options.get("max_model_len"):
                    kw["max_model_len"] = int(self.options["max_model_len"])
                self._llm = LLM(**kw)
            return self._llm

    def info(self) -> dict[str, Any]:
        try:
            import vllm

            return {"vllm": vllm.__version__, **{k: v for k, v in self.options.items()}}
        except ImportError:
            return {}

    def chat_template_source(self):
        return getattr(self.llm.get_tokenizer(), "chat_template", None)

    def render_chat(self, messages, add_generation_prompt=True) -> str:
        tok = self.llm.get_tokenizer()
        return tok.apply_chat_template([m.model_dump() for m in messages],
                                       add_generation_prompt=add_generation_prompt, tokenize=False)

    def _generate_sync(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        _, SamplingParams = _import_vllm()
        prompts, params = [], []
        tok = self.llm.get_tokenizer()
        for r in requests:
            text = r.prompt if r.prompt is not None else self.render_chat(r.messages or [])
            prompts.append({"prompt_token_ids": prompt_ids(tok, text)})
            stop = r.stop if r.stop is not None else decoding.stop
            params.append(SamplingParams(temperature=decoding.temperature, top_p=decoding.top_p,
                                         max_tokens=r.max_tokens or decoding.max_tokens,
                                         seed=decoding.seed, stop=stop or None))
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        res = []
        for o in outs:
            c = o.outputs[0]
            res.append(GenResult(text=c.text, prompt_tokens=len(o.prompt_token_ids or []),
                                 completion_tokens=len(c.token_ids), finish_reason=c.finish_reason))
        return res

    def _score_sync(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        """Exact log-likelihood from prompt_logprobs over context + continuation."""
        _, SamplingParams = _import_vllm()
        tok = self.llm.get_tokenizer()
        rows, prompts = [], []
        for i, r in enumerate(requests):
            ctx = (r.prompt if r.prompt is not None else self.render_chat(r.messages or [])) + r.assistant_prefix
            ctx_ids = prompt_ids(tok, ctx)
            for k, c in enumerate(r.continuations):
                cont_ids = tok(c, add_special_tokens=False)["input_ids"]
                rows.append((i, k, len(ctx_ids), len(cont_ids)))
                prompts.append({"prompt_token_ids": ctx_ids + cont_ids})
        sp = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0)
        outs = self.llm.generate(prompts, sp, use_tqdm=False)
        res = [ScoreResult(logprobs=[0.0] * len(r.continuations), token_counts=[0] * len(r.continuations))
               for r in requests]
        for (i, k, n_ctx, n_cont), o in zip(rows, outs):
            ids = o.prompt_token_ids
            total = 0.0
            for pos in range(n_ctx, n_ctx + n_cont):
                entry = o.prompt_logprobs[pos]
                total += entry[ids[pos]].logprob
            res[i].logprobs[k], res[i].token_counts[k] = total, n_cont
            res[i].prompt_tokens = n_ctx
        return res

    async def generate(self, requests, decoding):
        try:
            return await asyncio.to_thread(self._generate_sync, requests, decoding)
        except Exception as exc:  # noqa: BLE001
            return [GenResult(error=f"{type(exc).__name__}: {exc}") for _ in requests]

    async def score(self, requests):
        try:
            return await asyncio.to_thread(self._score_sync, requests)
        except Exception as exc:  # noqa: BLE001
            return [ScoreResult(error=f"{type(exc).__name__}: {exc}") for _ in requests]
