"""Issue 41: one straight path from `rolebound run` to the backend and to report.html, drawn in
docs/architecture.md as the code runs it (tests/pathtrace.py takes the stacks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pathtrace import handoffs, shared, trace

pytestmark = pytest.mark.slow
DOC = Path(__file__).resolve().parents[1] / "docs" / "architecture.md"


def drawn() -> tuple[list[str], list[str]]:
    """The two chains docs/architecture.md draws under "One item's call", first word of each line."""
    text = DOC.read_text(encoding="utf-8")
    part = text[text.index("### One item's call, from the command line (measured)"):text.index("## Backends")]
    blocks = re.findall(r"```\n(.*?)```", part, flags=re.S)
    names = [[ln.split()[1] if ln.startswith("||") else ln.split()[0] for ln in b.splitlines() if ln.strip()]
             for b in blocks]
    return names[0], names[1]


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        return trace(tmp_path_factory.mktemp("path"), mp)
    finally:
        mp.undo()


def test_a_run_reaches_the_backend_and_its_report_in_at_most_8_hand_offs(chains):
    model, report = chains
    k = shared(model, report)
    assert model[0] == report[0] == ("rolebound.cli", "run")
    total = handoffs(model) + handoffs(report[k - 1:])
    assert total <= 8, [f"{m}.{f}" for m, f in model] + ["--"] + [f"{m}.{f}" for m, f in report[k - 1:]]


def test_the_architecture_doc_draws_the_path_the_code_takes(chains):
    model, report = chains
    k = shared(model, report)
    short = lambda chain: [f"{m.removeprefix('rolebound.')}.{f}" for m, f in chain]  # noqa: E731
    doc_model, doc_report = drawn()
    assert doc_model == short(model)
    assert doc_report == short(report[k - 1:])


def test_the_tracer_joins_task_boundaries(chains):
    model, _ = chains
    names = [f for _, f in model]
    # frames from three different asyncio tasks, joined in creation order
    assert names.index("_run") < names.index("bounded") < names.index("Session.call") < names.index("Dispatcher._drain")
