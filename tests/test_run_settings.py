"""A run's settings carry the suite's options under one name (the validated model, which keeps
what was given for the manifest) and a typed state of the suite's own class, named in suite.py."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from rolebound.errors import InputError
from rolebound.suites import get_suite
from rolebound.suites.base import Options, RunState

BUILTIN = ["charm", "knowledge-errors", "multiverse", "capability", "mcq"]


@pytest.mark.parametrize("name", BUILTIN)
def test_each_suite_names_a_typed_state_class_in_its_suite_py(name):
    suite = get_suite(name)
    cls = suite.state_class
    assert dataclasses.is_dataclass(cls) and issubclass(cls, RunState) and cls is not RunState
    assert cls.__module__.rpartition(".")[0] == type(suite).__module__.rpartition(".")[0]
    source = Path(sys.modules[type(suite).__module__].__file__).read_text(encoding="utf-8")
    assert f"state_class = {cls.__name__}" in source
    settings = suite.run_settings(list(suite.default_strategies))
    assert type(settings.state) is cls and isinstance(settings.options, suite.options_model)
    assert suite.run_settings([]).state is not settings.state        # a fresh state per run


def test_options_keep_what_was_given_and_what_check_resolves():
    suite = get_suite("multiverse")
    settings = suite.run_settings(["cot"], {"permutations": 2, "judge_scoring": "Generate"})
    assert settings.options.permutations == 2 and settings.options.judge_scoring == "generate"
    assert settings.options.given() == {"permutations": 2, "judge_scoring": "Generate"}
    settings.resolve("segment_fallback", "none")
    assert settings.options.segment_fallback == "none" and settings.options.given()["segment_fallback"] == "none"
    with pytest.raises(InputError, match="unknown option 'bogus'"):
        suite.run_settings(["cot"], {"bogus": 1})
    assert Options().given() == {}
