"""Shared test setup.

Each test session gets its own response cache (so tests never see answers from a developer's
runs), while the converted bundled model stays in the usual model folder (converting it takes
about 20 s, once per machine).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rolebound.store import model_dir

# public data beside the checkout (../shared); ROLEBOUND_SHARED points elsewhere
SHARED = Path(os.environ.get("ROLEBOUND_SHARED") or Path(__file__).resolve().parents[1].parent / "shared")


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory):
    os.environ["ROLEBOUND_MODEL_DIR"] = str(model_dir())   # pin before moving the cache
    os.environ["ROLEBOUND_CACHE_DIR"] = str(tmp_path_factory.mktemp("rolebound-cache"))
    # derived entries (embeddings, similarity tables) are keyed by their inputs: one folder for the
    # test run, shared by its xdist workers, so an embedding model loads about once, not in every
    # test that runs charm
    base = tmp_path_factory.getbasetemp()
    derived = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "rolebound-derived"
    derived.mkdir(parents=True, exist_ok=True)
    os.environ["ROLEBOUND_DERIVED_DIR"] = str(derived)
    os.environ["HF_HUB_OFFLINE"] = "1"
    yield


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path, monkeypatch):
    """Every test starts with an empty response cache (the derived cache is the session's;
    tests/test_derived_cache.py gives each of its tests an empty one)."""
    monkeypatch.setenv("ROLEBOUND_CACHE_DIR", str(tmp_path / "cache"))
    yield


# Files in the order their heaviest test suggests (Ray, then a model, then other slow work), each
# file's tests kept together and in order: `make test` hands the tests to its workers in this order
# (pytest-xdist --dist loadgroup), so the longest start first and none is left alone at the end.
WEIGHT = ("ray", "model", "slow")


def _weight(item) -> int:
    return next((k for k, m in enumerate(WEIGHT) if item.get_closest_marker(m)), len(WEIGHT))


@pytest.hookimpl(tryfirst=True)    # before pytest-xdist reads the xdist_group markers
def pytest_collection_modifyitems(config, items):
    """A test that takes the `bundled` fixture is a model test (`make test-fast` leaves it out);
    then the files are ordered by WEIGHT."""
    for item in items:
        if "bundled" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("model"):
            item.add_marker(pytest.mark.model)
        # a test on a module-scoped fixture (a Ray cluster, a server, a loaded engine) stays on one
        # worker with the rest of its file (pytest-xdist --dist loadgroup); the others go anywhere
        defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
        if any(d.scope == "module" for ds in defs.values() for d in ds):
            item.add_marker(pytest.mark.xdist_group(item.fspath.basename))
    rank: dict[str, int] = {}
    for item in items:
        rank[item.fspath.strpath] = min(rank.get(item.fspath.strpath, len(WEIGHT)), _weight(item))
    first = {f: k for k, f in enumerate(dict.fromkeys(i.fspath.strpath for i in items))}
    items.sort(key=lambda i: (rank[i.fspath.strpath], first[i.fspath.strpath]))


def pytest_configure(config):
    """pytest-xdist's loadgroup keeps a group on one worker by renaming its tests through
    `Node._nodeid`; pytest 9.2 dropped that attribute, so with it the groups scatter, silently, and
    each worker starts the module fixtures again (a Ray cluster twice). Stop instead."""
    from _pytest.nodes import Node

    if config.getoption("dist", "no") == "loadgroup" and "_nodeid" not in getattr(Node, "__slots__", ()):
        raise pytest.UsageError("--dist loadgroup does not work with this pytest (pytest-xdist renames tests "
                                "through Node._nodeid, gone since pytest 9.2): install requirements.lock")


@pytest.fixture(autouse=True)
def _model_tests_are_marked(request, monkeypatch):
    """Only a test marked `model` may load a bundled model (so `-m "not model"` loads none): a
    load from any other test fails at once, naming the marker."""
    if request.node.get_closest_marker("model"):
        yield
        return
    from rolebound.models import local

    real = local.shared_engine

    def guarded(path, **opts):
        if Path(path).resolve().is_relative_to(model_dir().resolve()):
            pytest.fail(f"{request.node.nodeid} loads the bundled model {path}: mark it @pytest.mark.model")
        return real(path, **opts)

    monkeypatch.setattr(local, "shared_engine", guarded)
    yield


@pytest.fixture(scope="session")
def bundled():
    """One loaded bundled backend for the whole session (real model, CPU). Every other bundled
    backend of the session (api.run creates its own) shares its engine (models.local.shared_engine),
    so the weights load once per test run."""
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
