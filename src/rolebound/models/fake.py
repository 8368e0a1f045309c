"""A deterministic stand-in model (`--model fake:random`, `fake:echo`, `fake:constant`).

For dry runs of a pipeline and for unit tests of the runner: answers depend only on the prompt,
so runs are reproducible. It knows nothing; never report its numbers.
Failure injection for tests: requests whose prompt matches the regex in ROLEBOUND_FAKE_FAIL fail;
ROLEBOUND_FAKE_DELAY adds a delay (seconds) per batch.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from typing import Any, Sequence

from ..errors import BackendError
from ..records import Decoding, Message
from .base import (CHAT, CHAT_TEMPLATE, COMPLETE, HIDDEN, LOGPROB, Backend, GenRequest, GenResult,
                   ScoreRequest, ScoreResult)

POOL = ["Yes.", "No.", "Answer: 1", "Answer: 2", "Answer: 3", "Answer: 4", "Answer: 5",
        "\\boxed{A}", "\\boxed{B}", "\\boxed{C}", "\\boxed{D}", "judgment: yes", "judgment: no",
        "I am not sure."]
NAMES = ("random", "echo", "constant")


def _h(obj: Any) -> int:
    return int(hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:12], 16)


class FakeBackend(Backend):
    backend = "fake"
    batching = True
    capabilities = frozenset({CHAT, COMPLETE, LOGPROB, CHAT_TEMPLATE, HIDDEN})
    option_names = frozenset({"delay", "text", "think_tag", "context_length"})   # context_length: for tests of the dialogue budget

    def __init__(self, name: str = "random", decoding: Decoding | None = None, **options: Any):
        if name not in NAMES:
            raise BackendError(f"unknown fake model '{name}'; available: {', '.join(NAMES)}")
        super().__init__(name, decoding, **options)
        self.calls = 0
        self.delay = float(options.get("delay", os.environ.get("ROLEBOUND_FAKE_DELAY", 0.0)))
        self.text = str(options.get("text", "No."))
        self.batch_sizes: list[int] = []

    def _fail(self, text: str) -> str | None:
        pattern = os.environ.get("ROLEBOUND_FAKE_FAIL")
        if pattern and re.search(pattern, text):
            return "InjectedFailure: ROLEBOUND_FAKE_FAIL matched the prompt"
        return None

    def identity(self) -> dict[str, Any]:
        # fake:constant answers its `text` option: two texts must not share cached answers
        return {**super().identity(), "text": self.text} if self.name == "constant" else super().identity()

    def chat_template_source(self) -> str:
        return "<|{role}|>{content}<|end|> ... <|assistant|><think>"   # stands in for a reasoning model

    def render_chat(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        text = "".join(f"<|{m.role}|>{m.content}<|end|>\n" for m in messages)
        return text + ("<|assistant|>" if add_generation_prompt else "")

    def _text(self, req) -> str:
        return req.prompt if req.prompt is not None else self.render_chat(req.messages or [])

    async def _batch(self, requests: Sequence) -> None:
        self.calls += len(requests)
        self.batch_sizes.append(len(requests))
        if self.delay:
            await asyncio.sleep(self.delay)

    async def generate(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        await self._batch(requests)
        out = []
        for r in requests:
            text = self._text(r)
            err = self._fail(text)
            if err:
                out.append(GenResult(error=err))
                continue
            if self.name == "echo":
                ans = (r.messages[-1].content if r.messages else text)
            elif self.name == "constant":
                ans = self.text
            else:
                ans = POOL[_h([text, decoding.seed if decoding.temperature > 0 else 0]) % len(POOL)]
            limit = r.max_tokens or decoding.max_tokens
            words = ans.split(" ")
            ans = " ".join(words[:limit])
            # a word per token: a reply longer than the cap is cut, as a real engine cuts it
            out.append(GenResult(text=ans, prompt_tokens=len(text.split()), completion_tokens=len(ans.split()),
                                 finish_reason="length" if len(words) > limit else "stop"))
        return out

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        await self._batch(requests)
        out = []
        for r in requests:
            text = self._text(r) + r.assistant_prefix
            err = self._fail(text)
            if err:
                out.append(ScoreResult(error=err))
                continue
            lps = [-((_h([text, c]) % 1000) / 100.0) - 0.01 for c in r.continuations]
            out.append(ScoreResult(logprobs=lps, token_counts=[1] * len(lps),
                                   prompt_tokens=len(text.split())))
        return out

    async def hidden_states(self, texts: Sequence[str]):
        import numpy as np

        rows = [np.random.default_rng(_h(t) % (2 ** 32)).standard_normal(16) for t in texts]
        return np.stack(rows)

    def count_tokens(self, text: str) -> int:
        return len(text.split())
