"""`rolebound models` says where each backend ran in our tests: the in-process vLLM engine never did,
and its row points to the tested GPU path (issue 40)."""

from __future__ import annotations

import os

import pytest

from helpers import needs_script, rolebound


@pytest.mark.slow
@needs_script
def test_models_marks_the_backend_that_never_ran():
    res = rolebound("models", env={**os.environ, "COLUMNS": "400"})
    assert res.returncode == 0, res.stderr
    rows = {ln.split("\u2502")[1].strip(): ln for ln in res.stdout.splitlines() if ln.count("\u2502") == 4}
    assert "NEVER RUN" in rows["vllm"]
    assert "vllm serve" in rows["vllm"] and "--model openai:NAME" in rows["vllm"]
    for tested in ("bundled", "hf", "openai", "llamacpp", "fake"):
        assert "NEVER RUN" not in rows[tested] and "yes" in rows[tested]
