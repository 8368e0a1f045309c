"""Each suite's suite.py names its hooks: the class body assigns report, summary, compare,
card_figures, strategies and extractor_for from its own modules, and build_commands and importers
through lazy_hook, so build.py and importers.py load only when called. Nothing is wired by name."""

from __future__ import annotations

import ast
import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from rolebound.suites import available, get_suite
from rolebound.suites.base import Suite

# hook -> (module of the suite's package, attribute) that backs it where the module defines it
HOOKS = {"strategies": ("strategies", "STRATEGIES"), "extractor_for": ("strategies", "extractor_for"),
         "summary": ("report", "summary_lines"), "report": ("report", "report_sections"),
         "compare": ("report", "compare_tables"), "card_figures": ("card", "card_figures")}


@pytest.mark.parametrize("name", ["charm", "knowledge-errors", "multiverse", "capability", "mcq"])
def test_builtin_suites_name_their_hooks_in_suite_py(name):
    suite = get_suite(name)
    cls = type(suite)
    package = cls.__module__.rpartition(".")[0]
    body = next(n for n in ast.parse(Path(sys.modules[cls.__module__].__file__).read_text(encoding="utf-8")).body
                if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    assigned = {t.id for n in body.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    for hook, (module, attr) in HOOKS.items():
        m = importlib.import_module(f"{package}.{module}")
        if hasattr(m, attr):
            assert hook in assigned, (name, hook)                 # named in suite.py's class body
            assert getattr(suite, hook) is getattr(m, attr), (name, hook)
    assert {"build_commands", "importers"} <= assigned, name
    assert suite.name == name
    if name != "mcq":
        assert suite.on_card and suite.card_limit


def _package(tmp_path, name, suite_body):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "report.py").write_text(textwrap.dedent('''
        def report_sections(metrics, records, manifest, run_dir):
            return ["from report.py"]

        def summary_lines(metrics):
            return [("n", "1")]
    '''))
    (pkg / "strategies.py").write_text('STRATEGIES = {"plain": "one call"}\n')
    (pkg / "build.py").write_text("def commands(app):\n    app.append('built')\n")
    (pkg / "importers.py").write_text("IMPORTERS = {'csv': (print, 'a csv file')}\n")
    (pkg / "suite.py").write_text(textwrap.dedent(suite_body))
    return pkg


def test_a_suite_folder_has_the_hooks_its_class_names_and_the_defaults_otherwise(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _package(tmp_path, "hooks_pkg", '''
        from rolebound.suites.base import Suite, lazy_hook
        from .report import summary_lines, report_sections
        from .strategies import STRATEGIES

        class Named(Suite):
            card_limit = 5
            strategies = STRATEGIES
            report = staticmethod(report_sections)
            summary = staticmethod(summary_lines)
            build_commands = lazy_hook(".build", "commands")
            importers = lazy_hook("hooks_pkg.importers", "IMPORTERS")

        class Unnamed(Suite):
            on_card = False
            card_limit = 5
    ''')
    mod = importlib.import_module("hooks_pkg.suite")
    try:
        named, unnamed = mod.Named(), mod.Unnamed()
        assert named.report({}, [], None, None) == ["from report.py"]
        assert named.summary({}) == [("n", "1")] and named.strategies == {"plain": "one call"}
        assert named.on_card and mod.Named.on_card            # a card_limit puts it on the card
        assert "hooks_pkg.build" not in sys.modules and "hooks_pkg.importers" not in sys.modules
        app: list = []
        named.build_commands(app)
        assert app == ["built"]                                # the sibling build.py, loaded on the call
        got = named.importers()
        assert got == sys.modules["hooks_pkg.importers"].IMPORTERS and got is not sys.modules["hooks_pkg.importers"].IMPORTERS
        # nothing comes from the package unless the class names it: the base defaults
        assert unnamed.summary({}) == [] and unnamed.strategies == {} and not unnamed.on_card
        assert unnamed.card_figures({}) is None and unnamed.importers() == {}
    finally:
        for k in [k for k in sys.modules if k.startswith("hooks_pkg")]:
            del sys.modules[k]


def test_a_class_outside_a_suite_module_is_not_wired():
    class Loose(Suite):
        pass

    assert Loose.strategies == {} and Loose().summary({}) == [] and not Loose.on_card
    assert "charm" in available()


def test_a_judging_protocol_decides_uses_judge_unless_the_class_says():
    from rolebound.protocol import Protocol

    class Judged(Suite):
        protocol = Protocol(source="t", judge_separate=True)

    class Told(Suite):
        uses_judge = False
        protocol = Protocol(source="t", judge_decoding={"temperature": 0.0})

    class Plain(Suite):
        protocol = Protocol(source="t")

    assert (Judged.uses_judge, Told.uses_judge, Plain.uses_judge) == (True, False, False)
    assert [n for n in ("charm", "knowledge-errors", "multiverse", "capability") if get_suite(n).uses_judge] \
        == ["knowledge-errors", "multiverse", "capability"]


def test_build_and_importers_come_from_their_modules_and_load_only_when_called():
    """lazy_hook: build.commands(app) and importers.IMPORTERS back the two hooks, and neither
    module is imported by loading the suite (a fresh interpreter: this one may have them)."""
    import subprocess

    code = textwrap.dedent('''
        import sys
        from rolebound.suites import get_suite
        s = get_suite("multiverse")
        pkg = "rolebound.suites.multiverse"
        before = {m for m in (pkg + ".build", pkg + ".importers") if m in sys.modules}
        from rolebound.suites.multiverse.importers import IMPORTERS
        got = s.importers()
        assert got == IMPORTERS and got is not IMPORTERS, got
        print(sorted(before))
    ''')
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"
    calls = []
    for name in ["charm", "knowledge-errors", "multiverse", "capability", "mcq"]:
        module = importlib.import_module(f"{type(get_suite(name)).__module__.rpartition('.')[0]}.build")
        orig = module.commands
        module.commands = calls.append
        try:
            get_suite(name).build_commands("app")
        finally:
            module.commands = orig
    assert calls == ["app"] * 5
