"""One backend registry: each entry checks its optional dependency (present, recent enough, read
from the installed metadata) before it imports the backend's module."""

from __future__ import annotations

import sys

import pytest

from rolebound import models
from rolebound.errors import BackendError


def test_a_missing_extra_is_its_install_hint_before_the_backend_module_is_imported(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)          # import fails as if not installed
    monkeypatch.delitem(sys.modules, "rolebound.models.llamacpp", raising=False)
    with pytest.raises(BackendError) as err:
        models.backend_class("llamacpp")
    assert str(err.value) == models.LLAMACPP_HINT
    assert "rolebound.models.llamacpp" not in sys.modules


def test_a_dependency_older_than_its_extra_says_which_version_is_needed():
    models.Requirement("json", "rolebound-no-such-dist", "1.0", "hint").check()   # no metadata: nothing to compare
    models.Requirement("pydantic", "pydantic", "2.0", "needs pydantic").check()
    with pytest.raises(BackendError, match=r"^needs pydantic \(found pydantic \S+; needs pydantic>=999\)$"):
        models.Requirement("pydantic", "pydantic", "999", "needs pydantic").check()


def test_every_builtin_entry_names_a_backend_class_and_its_factory():
    for name, entry in models.BUILTIN.items():
        if entry.requires and not all(models._present(r.module) for r in entry.requires):
            continue                    # an extra not installed here (vllm, llama-cpp-python)
        cls = entry.load()
        assert issubclass(cls, models.Backend) and cls.backend == name
        assert entry.tested and entry.description
