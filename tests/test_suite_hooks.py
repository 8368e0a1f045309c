"""The one suite folder: a Suite class in `<package>/suite.py` takes the hooks it leaves unset from
its package's modules (report.py, card.py, strategies.py); one that sets a hook keeps its own."""

from __future__ import annotations

import importlib
import sys
import textwrap

import pytest

from rolebound.suites import available, get_suite
from rolebound.suites.base import PACKAGE_HOOKS, Suite


@pytest.mark.parametrize("name", ["charm", "knowledge-errors", "multiverse", "capability"])
def test_builtin_suites_take_their_hooks_from_their_own_modules(name):
    suite = get_suite(name)
    package = type(suite).__module__.rpartition(".")[0]
    for hook, (module, attr) in PACKAGE_HOOKS.items():
        m = importlib.import_module(f"{package}.{module}")
        if hasattr(m, attr):
            assert getattr(suite, hook) is getattr(m, attr), (name, hook)
    assert suite.on_card and suite.card_limit
    assert suite.name == name


def _package(tmp_path, name, suite_body):
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "report.py").write_text(textwrap.dedent('''
        def write_report(metrics, records, manifest, run_dir):
            return ["from report.py"]

        def summary_lines(metrics):
            return [("n", "1")]
    '''))
    (pkg / "strategies.py").write_text('STRATEGIES = {"plain": "one call"}\n')
    (pkg / "suite.py").write_text(textwrap.dedent(suite_body))
    return pkg


def test_a_suite_folder_is_wired_by_convention_and_its_own_settings_win(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _package(tmp_path, "hooks_pkg", '''
        from rolebound.suites.base import Suite

        class Wired(Suite):
            card_limit = 5

        class Own(Suite):
            on_card = False
            card_limit = 5

            def summary(self, metrics):
                return [("own", "yes")]
    ''')
    mod = importlib.import_module("hooks_pkg.suite")
    try:
        wired, own = mod.Wired(), mod.Own()
        assert wired.report({}, [], None, None) == ["from report.py"]
        assert wired.summary({}) == [("n", "1")] and wired.strategies == {"plain": "one call"}
        assert wired.on_card                                    # a card_limit puts it on the card
        assert own.summary({}) == [("own", "yes")] and not own.on_card
        assert own.report({}, [], None, None) == ["from report.py"]
        assert wired.card_figures({}) is None                  # no card.py: the base default
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
    """LAZY_PACKAGE_HOOKS: build.commands(app) and importers.IMPORTERS back the two hooks, and
    neither module is imported by loading the suite (a fresh interpreter: this one may have them)."""
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
    for name in ["charm", "knowledge-errors", "multiverse", "capability"]:
        module = importlib.import_module(f"{type(get_suite(name)).__module__.rpartition('.')[0]}.build")
        orig = module.commands
        module.commands = calls.append
        try:
            get_suite(name).build_commands("app")
        finally:
            module.commands = orig
    assert calls == ["app"] * 4
