"""Shared test setup.

Each test session gets its own response cache (so tests never see answers from a developer's
runs), while the converted bundled model stays in the usual model folder (converting it takes
about 20 s, once per machine).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rolebound.paths import model_dir

# public data beside the checkout (../shared); ROLEBOUND_SHARED points elsewhere
SHARED = Path(os.environ.get("ROLEBOUND_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    os.environ["ROLEBOUND_MODEL_DIR"] = str(model_dir())   # pin before moving the cache
    os.environ["ROLEBOUND_CACHE_DIR"] = str(tmp_path_factory.mktemp("rolebound-cache"))
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    """Every test starts with an empty response cache."""
    monkeypatch.setenv("ROLEBOUND_CACHE_DIR", str(tmp_path / "cache"))
    yield


@pytest.fixture(scope="session")
def bundled():
    """One loaded bundled backend for the whole session (real model, CPU)."""
    from rolebound.models import create_backend

    b = create_backend("bundled")
    b.engine  # load now
    return b


def shared_path(*parts: str) -> Path:
    """A file under ../shared (public data for importer tests); skips if this checkout has none."""
    p = SHARED.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"{p} not present")
    return p
