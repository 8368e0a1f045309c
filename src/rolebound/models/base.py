"""One async protocol for every backend.

A backend answers batches of requests. Local engines batch them for throughput; API backends
fan them out under a concurrency limit. Each request either succeeds or carries its own error,
so one failure never sinks a batch. Backends know nothing about suites.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import CapabilityError
from ..records import Decoding, Message

# Capability flags a strategy can ask for.
CHAT = "chat"                   # generate from a list of messages
COMPLETE = "complete"           # generate from raw text (assistant prefill, Injection)
LOGPROB = "logprob"             # score continuations by log-likelihood
CHAT_TEMPLATE = "chat_template"  # render messages to the model's own raw text
HIDDEN = "hidden_states"        # last-token hidden states
PREFILL = "assistant_prefill"   # continue a final assistant message in a chat (vLLM continue_final_message)


# Reasoning-channel openers of the model families we know, as their chat templates write them.
THINK_MARKERS = (("<think>", "<think>\n"),                  # Qwen3, DeepSeek-R1, OLMo-3-Think, SmolLM3
                 ("<|channel>thought", "<|channel>thought\n"),   # Gemma 4
                 ("<seed:think>", "<seed:think>"),            # Seed-OSS
                 ("[THINK]", "[THINK]"),                      # Magistral
                 ("<|START_THINKING|>", "<|START_THINKING|>"))  # Command A Reasoning


def detect_thinking_markup(template: str | None) -> str:
    """The reasoning opener a chat template uses ('' when it has none, e.g. a non-reasoning model)."""
    if not template:
        return ""
    if isinstance(template, dict):          # some tokenizers keep several named templates
        template = " ".join(str(v) for v in template.values())
    for marker, tag in THINK_MARKERS:
        if marker in template:
            return tag
    return ""


@dataclass
class GenRequest:
    """Chat (messages) or raw completion (prompt). Decoding overrides apply to this request only."""

    messages: list[Message] | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None

    def cache_payload(self) -> dict[str, Any]:
        return {
            "messages": [m.model_dump() for m in self.messages] if self.messages else None,
            "prompt": self.prompt, "max_tokens": self.max_tokens, "stop": self.stop,
        }


@dataclass
class ScoreRequest:
    """Log-likelihood of each continuation after a context.

    The context is either messages (rendered with the chat template, generation prompt added,
    then `assistant_prefix` appended, e.g. "Answer:") or a raw text prompt.
    """

    continuations: list[str]
    messages: list[Message] | None = None
    prompt: str | None = None
    assistant_prefix: str = ""

    def cache_payload(self) -> dict[str, Any]:
        return {
            "messages": [m.model_dump() for m in self.messages] if self.messages else None,
            "prompt": self.prompt, "assistant_prefix": self.assistant_prefix,
            "continuations": self.continuations,
        }


@dataclass
class GenResult:
    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def problem(self) -> str | None:
        """Why this answer cannot be kept (written as strict JSON and read back), or None. A
        server's reply is checked where it enters a record: what fails is a failed call."""
        if not isinstance(self.text, str):
            return f"the text is {_kind(self.text)}, not a string"
        if (bad := _unwritable(self.text)) is not None:
            return f"the text holds {bad}"
        if self.finish_reason is not None and not isinstance(self.finish_reason, str):
            return f"finish_reason is {_kind(self.finish_reason)}, not a string"
        if isinstance(self.finish_reason, str) and (bad := _unwritable(self.finish_reason)) is not None:
            return f"finish_reason holds {bad}"
        return _count_problem("prompt_tokens", self.prompt_tokens) or \
            _count_problem("completion_tokens", self.completion_tokens)


@dataclass
class ScoreResult:
    logprobs: list[float] = field(default_factory=list)   # summed over each continuation's tokens
    token_counts: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    error: str | None = None

    def problem(self, n: int) -> str | None:
        """Why these scores of `n` continuations cannot be kept, or None: one number each,
        neither NaN nor +inf (-inf is an option the server ranked below its top-k)."""
        if not isinstance(self.logprobs, list):
            return f"the log-probs are {_kind(self.logprobs)}, not a list"
        if len(self.logprobs) != n:
            return f"{len(self.logprobs)} log-probs for {n} options"
        for i, lp in enumerate(self.logprobs, 1):
            if isinstance(lp, bool) or not isinstance(lp, (int, float)):
                return f"log-prob {i} of {n} is {_kind(lp)}, not a number"
            if math.isnan(lp) or lp == math.inf:
                return f"log-prob {i} of {n} is {lp!r}"
        if n and all(lp == -math.inf for lp in self.logprobs):
            return "no option has a log-prob (all -inf)"
        counts = self.token_counts if isinstance(self.token_counts, list) else [self.token_counts]
        for c in counts:
            if (bad := _count_problem("token count", c)) is not None:
                return bad
        return _count_problem("prompt_tokens", self.prompt_tokens)


def _kind(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _unwritable(text: str) -> str | None:
    """A lone surrogate (from a \\udXXX escape in the server's JSON) cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"a lone surrogate ({text[exc.start]!r} at character {exc.start})"
    return None


def _count_problem(name: str, value: Any) -> str | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return None
    return f"{name} is {_kind(value)}, not a count"


class Backend:
    """Base class. Subclasses set `backend`, `capabilities` and implement what they can."""

    backend: str = "base"
    capabilities: frozenset[str] = frozenset()
    # backend options (--backend-opt, the YAML `backend:` section) this backend understands
    option_names: frozenset[str] = frozenset()
    batching: bool = False          # True: the runner gathers requests into batches for it

    def __init__(self, name: str, decoding: Decoding | None = None, **options: Any):
        self.name = name
        self.decoding = decoding or Decoding()
        self.options = options

    # -- identity ---------------------------------------------------------------------------
    @property
    def spec(self) -> str:
        return f"{self.backend}:{self.name}"

    def identity(self) -> dict[str, Any]:
        """What makes two answers comparable: goes into every cache key."""
        return {"backend": self.backend, "model": self.name}

    def info(self) -> dict[str, Any]:
        """Free-form facts for the manifest (dtype, runtime versions, load time)."""
        return {}

    def secrets(self) -> tuple[str, ...]:
        """Texts never to be written (an API key): the runner masks them in everything it keeps,
        the model's own replies included."""
        return ()

    # what to set so that the backend can prefill an assistant turn, where it can with some help
    prefill_hint: str = ""

    def supports(self, cap: str) -> bool:
        return cap in self.capabilities

    def probe(self, cap: str) -> bool:
        """supports(cap), after asking the backend's server where that can tell (openai: a chat
        template reported by the server)."""
        return self.supports(cap)

    def require(self, cap: str, why: str = "") -> None:
        if cap not in self.capabilities:
            have = ", ".join(sorted(self.capabilities)) or "none"
            raise CapabilityError(
                f"backend '{self.spec}' cannot do '{cap}'{' (' + why + ')' if why else ''}; "
                f"it supports: {have}")

    # -- work -------------------------------------------------------------------------------
    async def generate(self, requests: Sequence[GenRequest], decoding: Decoding) -> list[GenResult]:
        self.require(CHAT)
        raise NotImplementedError

    async def score(self, requests: Sequence[ScoreRequest]) -> list[ScoreResult]:
        self.require(LOGPROB)
        raise NotImplementedError

    def render_chat(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> str:
        self.require(CHAT_TEMPLATE, "needed to serialise a prefilled assistant turn")
        raise NotImplementedError

    async def hidden_states(self, texts: Sequence[str]) -> Any:
        """Top-layer hidden state of the last token of each raw text, as a numpy array."""
        self.require(HIDDEN)
        raise NotImplementedError

    def count_tokens(self, text: str) -> int | None:
        return None

    def context_window(self) -> int | None:
        """Tokens a prompt and its reply may take together when the engine bounds them more tightly
        than the model's own window (None: the model's window, from its config or options)."""
        return None

    def chat_template_source(self) -> str | None:
        """The model's chat template (Jinja source), where the backend can see it."""
        return None

    def thinking_markup(self) -> str:
        """What opens the model's reasoning channel in an assistant turn (Capability Injection
        prefills after it): the `think_tag` backend option if set, else read from the chat template."""
        tag = self.options.get("think_tag")
        if tag is not None:
            return str(tag)
        return detect_thinking_markup(self.chat_template_source())

    async def prepare(self) -> None:
        """Load weights before the clock starts (so latencies and the ETA mean something)."""
        return None

    async def close(self) -> None:
        return None

    # Local engines batch; API backends ask for many requests in flight.
    preferred_batch: int = 16
