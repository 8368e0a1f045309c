"""docs/extending.md is checked against the code: the suite its text defines is built from the
text and driven through run, report, compare, card and build with no change to the core."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from rolebound import api
from rolebound.suites import _REGISTERED, get_suite

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


@pytest.fixture
def doc_suite():
    """The first python block of the guide, executed as a module of its own (it registers "echo")."""
    block = re.search(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    module = types.ModuleType("extending_doc_suite")
    sys.modules[module.__name__] = module            # a module like any plugin's
    exec(compile(block, str(DOC), "exec"), module.__dict__)
    yield get_suite("echo")
    _REGISTERED.pop("echo", None)
    sys.modules.pop(module.__name__, None)


def test_the_guides_suite_runs_reports_compares_and_builds(doc_suite, tmp_path):
    a = api.run("echo", model="fake:echo", strategies="plain,polite", out=tmp_path / "a", progress=False)
    assert a.metrics["by_strategy"]["plain"]["rate"] == 100.0 and (a.run_dir / "report.html").exists()
    again, _ = api.build_report(a.run_dir)                       # `rolebound report`: from records alone
    assert again["by_strategy"] == a.metrics["by_strategy"]
    b = api.run("echo", model="fake:constant", out=tmp_path / "b", progress=False)
    from rolebound.compare import compare_runs

    md = next(p for p in compare_runs([a.run_dir, b.run_dir], tmp_path / "cmp") if p.suffix == ".md")
    assert "echoed % (plain)" in md.read_text() and "fake:constant" in md.read_text()
    from rolebound.card.build import card_suites, section

    assert card_suites()[-1] == "echo"
    sec = section("echo", doc_suite, a.run_dir, a.metrics, tmp_path, reused=True)
    assert sec["figures"][0]["value"] == 100.0 and not sec["problems"]
    app = typer.Typer()
    doc_suite.build_commands(app)
    res = CliRunner().invoke(app, ["noon", "kayak", "--out", str(tmp_path / "w.txt")])
    assert res.exit_code == 0 and (tmp_path / "w.txt").read_text().split() == ["noon", "kayak"]
    c = api.run("echo", model="fake:echo", data=str(tmp_path / "w.txt"), out=tmp_path / "c", progress=False)
    assert c.metrics["by_strategy"]["plain"]["n"] == 2


def test_every_hook_the_guide_names_is_declared_on_suite():
    from rolebound.suites.base import Suite

    text = DOC.read_text(encoding="utf-8")
    named = set(re.findall(r"`(\w+)`", text)) & {n for n in dir(Suite) if not n.startswith("_")}
    for hook in ("compare", "extractor_for", "rejudge", "importers", "card_limit", "check", "select", "stats",
                 "prompt_templates", "on_card", "card_figures", "build_commands", "summary", "report"):
        assert hook in named, hook
        assert hasattr(Suite, hook)
        attr = getattr(Suite, hook)
        assert not callable(attr) or attr.__doc__, hook
