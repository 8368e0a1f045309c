"""The project venv holds exactly requirements.lock (what `make setup` installs), and the lock
agrees with pyproject.toml's ranges."""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / "requirements.lock"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def locked(path: Path = LOCK) -> dict[str, str]:
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"{path.name}: '{line}' is not pinned with =="
            out[norm(name)] = version
    return out


def test_lock_pins_every_direct_dependency_inside_its_range():
    from packaging.requirements import Requirement

    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        pytest.skip("needs tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pins = locked()
    extras = project["optional-dependencies"]
    # ray: the sweep tests run it; fix: the tune tests train with it
    reqs = project["dependencies"] + extras["dev"] + extras["ray"] + extras["fix"]
    for spec in reqs:
        req = Requirement(spec)
        name = norm(req.name)
        assert name in pins, f"{req.name} is not in requirements.lock (run `make lock`)"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"requirements.lock has {req.name}=={pins[name]}, outside {req.specifier}"
    assert pins["torch"].startswith("2.13.0")


@pytest.mark.skipif(Path(sys.prefix).resolve() != (ROOT / ".venv").resolve(),
                    reason="only the project venv is installed from the lock")
def test_project_venv_matches_the_lock():
    import sysconfig

    # the venv's own folders only: an imported ray puts its vendored packages (colorama) on sys.path
    venv = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    installed = {norm(d.metadata["Name"]): d.version for d in metadata.distributions(path=venv)}
    installed.pop("rolebound", None)        # the editable checkout itself
    installed.pop("pip", None)              # the venv's own
    want = locked()
    if "llama-cpp-python" in installed:     # `make llamacpp` adds its wheel and its own lock
        want.update(locked(ROOT / "requirements-llamacpp.lock"), **{"llama-cpp-python": installed["llama-cpp-python"]})
    assert installed == want, "the venv differs from requirements.lock: run `make setup`"
