"""rolebound's backends as an inspect_ai model provider: `--model rolebound/bundled`,
`rolebound/fake:random`, `rolebound/hf:DIR`, `rolebound/bundled:qwen2.5-coder-1.5b -M engine=llamacpp`.

What follows `rolebound/` is a `rolebound run --model` spec; `-M key=value` are its `--backend-opt`s.
It lets an inspect eval run offline on the bundled model (inspect's mockllm counts tokens with a
tokenizer it downloads), and any inspect task run on rolebound's local engines.
"""

from __future__ import annotations

import asyncio
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage
from inspect_ai.tool import ToolChoice, ToolInfo

from ..errors import BackendError
from ..models import create_backend
from ..models.base import GenRequest
from ..records import Decoding, Message

ROLES = {"system", "user", "assistant"}


class RoleboundModel(ModelAPI):
    """An inspect ModelAPI over one rolebound backend, prepared on its first call."""

    def __init__(self, model_name: str, base_url: str | None = None, api_key: str | None = None,
                 config: GenerateConfig = GenerateConfig(), **model_args: Any):
        super().__init__(model_name, base_url, api_key, [], config)
        opts = dict(model_args)
        if base_url:
            opts["base_url"] = base_url
        self.backend = create_backend(model_name, **opts)      # a bad spec or option: BackendError now
        self._ready: asyncio.Lock | None = None
        self._prepared = False

    async def _prepare(self) -> None:
        self._ready = self._ready or asyncio.Lock()
        async with self._ready:
            if not self._prepared:
                await self.backend.prepare()
                self._prepared = True

    async def generate(self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice,
                       config: GenerateConfig) -> ModelOutput:
        if tools:
            raise BackendError(f"rolebound/{self.model_name} has no tool calling")
        await self._prepare()
        msgs = [Message(role=m.role if m.role in ROLES else "user", content=m.text) for m in input]
        dec = Decoding(temperature=config.temperature or 0.0,
                       top_p=config.top_p if config.top_p is not None else 1.0,
                       max_tokens=config.max_tokens or 256, seed=config.seed or 0,
                       stop=list(config.stop_seqs) if config.stop_seqs else None)
        [res] = await self.backend.generate([GenRequest(messages=msgs)], dec)
        if res.error:
            raise BackendError(res.error)
        out = ModelOutput.from_content(model=self.model_name, content=res.text or "",
                                       stop_reason="max_tokens" if res.finish_reason == "length" else "stop")
        p, c = res.prompt_tokens or 0, res.completion_tokens or 0
        out.usage = ModelUsage(input_tokens=p, output_tokens=c, total_tokens=p + c)
        return out

    def max_connections(self) -> int:
        return 1 if getattr(self.backend, "batching", False) else super().max_connections()

    async def aclose(self) -> None:
        if self._prepared:
            await self.backend.close()
            self._prepared = False

    def close(self) -> None:
        if self._prepared:
            asyncio.run(self.aclose())
