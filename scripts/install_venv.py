"""Make VENV hold exactly LOCK plus this checkout (editable): what `make setup` runs.

    python3 scripts/install_venv.py VENV LOCK

uv installs the lock in seconds where pip takes over a minute (bench/first_report.py). uv comes
from PyPI, pinned (UV_VERSION), into a folder outside the clone (~/.cache/rolebound/tools), once
per machine; a uv already on PATH is used as it is. uv reads none of pip's configuration, so the
find-links, index and extra indexes pip is configured with (`pip config list`, PIP_* variables)
are passed on. If uv cannot be had or fails, pip installs the lock as before.

The venv gets pip either way (`make llamacpp` and `make mpnet` use it): with uv, from the wheel
Python itself bundles (ensurepip), which also fetches uv and reads pip's configuration.

ROLEBOUND_INSTALLER=pip: pip only. ROLEBOUND_UV=PATH: this uv binary. ROLEBOUND_TOOLS=DIR: where
the pinned uv is kept. VENV/.rolebound-setup.json says which installer ran and how long each
step took.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UV_VERSION = "0.13.9"


def say(msg: str) -> None:
    print(f"setup: {msg}", file=sys.stderr, flush=True)


def last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip() and "WARNING" not in ln]
    return lines[-1][:200] if lines else "no message"


def make_venv(venv: Path, *, pip: bool) -> None:
    # --clear: a fresh venv each time, so what is installed is the lock and nothing else
    subprocess.run([sys.executable, "-m", "venv", "--clear", *([] if pip else ["--without-pip"]), str(venv)],
                   check=True)


def bundled_pip() -> Path | None:
    """The pip wheel ensurepip would install (a wheel runs as `python WHEEL/pip ...`)."""
    try:
        import ensurepip
    except ImportError:      # some distributions split it out
        return None
    found = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    return found[-1] if found else None


def tools_dir() -> Path:
    env = os.environ.get("ROLEBOUND_TOOLS")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rolebound" / "tools"


def find_uv(pip: list[str]) -> str | None:
    """ROLEBOUND_UV, else the pinned uv kept from an earlier setup, else uv on PATH, else the
    pinned uv fetched by pip (which reads pip's own configuration)."""
    if os.environ.get("ROLEBOUND_UV"):
        return os.environ["ROLEBOUND_UV"]
    home = tools_dir() / f"uv-{UV_VERSION}"
    kept = home / "bin" / "uv"
    if kept.is_file():
        return str(kept)
    if shutil.which("uv"):
        return shutil.which("uv")
    try:
        home.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=home.parent, prefix=".uv-") as tmp:
            got = subprocess.run(pip + ["install", "-q", "--no-deps", "--target", tmp, f"uv=={UV_VERSION}"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if got.returncode != 0 or not (Path(tmp) / "bin" / "uv").is_file():
                say(f"uv {UV_VERSION} could not be installed ({last_line(got.stderr)}); using pip")
                return None
            try:
                os.rename(tmp, home)           # a setup running beside this one sees all of it or none
            except OSError:
                if not kept.is_file():         # not another setup's copy that arrived first
                    raise
            os.makedirs(tmp, exist_ok=True)    # TemporaryDirectory removes the name it made
    except OSError as exc:
        say(f"uv could not be kept in {home.parent} ({exc}); using pip")
        return None
    return str(kept)


def pip_sources(pip: list[str]) -> list[str]:
    """uv flags for the package sources pip is configured with (config files and PIP_* variables)."""
    return source_flags(subprocess.run(pip + ["config", "list"], capture_output=True, text=True).stdout)


def source_flags(config_list: str) -> list[str]:
    """`pip config list` output -> --no-index, --index-url, and --extra-index-url and --find-links
    for each value (pip's lists are whitespace-separated; the same value from two places once)."""
    values: dict[str, list[str]] = {"index-url": [], "extra-index-url": [], "find-links": [], "no-index": []}
    for line in config_list.splitlines():
        key, sep, raw = line.partition("=")
        option = key.rsplit(".", 1)[-1]
        if not sep or option not in values:
            continue
        try:
            value = ast.literal_eval(raw)        # pip prints repr() of the value
        except (ValueError, SyntaxError):
            value = raw.strip("'\"")
        for v in str(value).split():
            if v not in values[option]:
                values[option].append(v)
    flags: list[str] = []
    if values["no-index"] and values["no-index"][-1].lower() in ("1", "true", "yes", "on"):
        flags.append("--no-index")
    if values["index-url"]:
        flags += ["--index-url", values["index-url"][-1]]
    for url in values["extra-index-url"]:
        flags += ["--extra-index-url", url]
    for place in values["find-links"]:
        flags += ["--find-links", place]
    if values["extra-index-url"] or values["find-links"]:
        # pip takes a pinned version from whichever source has it (torch's local +cpu build and
        # PyPI's other packages come from different places); uv's default stops at the first
        flags += ["--index-strategy", "unsafe-best-match"]
    return flags


def with_uv(uv: str, venv: Path, lock: Path, pip: list[str], pip_wheel: Path) -> bool:
    common = [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), "--no-deps"]
    # No --compile-bytecode: compiling all 140 packages, as pip does, costs more CPU than the whole
    # install; Python compiles a module when it is first imported (the Makefile runs the demo and
    # the tests with PYTHONDONTWRITEBYTECODE unset, so that bytecode is kept).
    steps = [common + ["-r", str(lock), str(pip_wheel)] + pip_sources(pip),
             common + ["--no-build-isolation", "-e", "."]]
    env = {**os.environ, "UV_NO_PROGRESS": "1"}
    for cmd in steps:
        got = subprocess.run(cmd, env=env, stderr=subprocess.PIPE, text=True)
        if got.returncode != 0:
            say(f"uv failed (exit code {got.returncode}: {last_line(got.stderr)}); installing with pip instead")
            return False
    return True


def with_pip(venv: Path, lock: Path) -> None:
    make_venv(venv, pip=True)
    pip = str(venv / "bin" / "pip")
    subprocess.run([pip, "install", "-q", "--no-deps", "-r", str(lock)], check=True)
    subprocess.run([pip, "install", "-q", "--no-deps", "--no-build-isolation", "-e", "."], check=True)


class Steps:
    """Seconds per step, for VENV/.rolebound-setup.json (bench/first_report.py reads it)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self.t = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.times[name] = round(self.times.get(name, 0.0) + now - self.t, 2)
        self.t = now


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        say("usage: python3 scripts/install_venv.py VENV LOCK")
        return 2
    venv, lock = Path(argv[0]), Path(argv[1])
    installer = os.environ.get("ROLEBOUND_INSTALLER", "uv")
    if installer not in ("uv", "pip"):
        say(f"ROLEBOUND_INSTALLER must be uv or pip, not {installer!r}")
        return 2
    steps, uv = Steps(), None
    wheel = bundled_pip() if installer == "uv" else None
    if installer == "uv" and wheel is None:
        say("this Python bundles no pip wheel (ensurepip); using pip")
    if wheel is not None:
        make_venv(venv, pip=False)
        steps.done("venv")
        pip = [str(venv / "bin" / "python"), str(wheel / "pip")]
        uv = find_uv(pip)
        steps.done("uv")
        if uv is not None and with_uv(uv, venv, lock, pip, wheel):
            steps.done("lock and checkout")
        else:
            uv = None
    if uv is None:
        installer = "pip"
        with_pip(venv, lock)
        steps.done("venv, lock and checkout")
    (venv / ".rolebound-setup.json").write_text(json.dumps(
        {"installer": installer, "uv": uv, "steps": steps.times}) + "\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as exc:
        say(f"{' '.join(map(str, exc.cmd[:3]))} ... failed with exit code {exc.returncode}")
        sys.exit(exc.returncode or 1)
