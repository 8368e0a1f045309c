"""Open registries: a suite and a backend from another package (examples/rolebound-echo-suite,
installed as its own distribution with entry points) work through the installed `rolebound`
script; a suite marked @register_suite works through the Python API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rolebound import api
from rolebound.errors import InputError
from rolebound.suites import _REGISTERED, available, get_suite, register_suite
from rolebound.suites.base import Dataset, Item, Options, Suite, validate_options

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "rolebound-echo-suite"
SCRIPT = Path(sys.executable).parent / "rolebound"


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory):
    """The example installed into a folder of its own (dist-info with its entry points), so the
    test venv itself stays as it was; PYTHONPATH makes it visible to the rolebound script."""
    target = tmp_path_factory.mktemp("plugin")
    src = tmp_path_factory.mktemp("plugin-src") / EXAMPLE.name     # the build writes beside its source
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    res = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                          "--no-index", "--target", str(target), str(src)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert list(target.glob("rolebound_echo_suite-*.dist-info/entry_points.txt"))
    return target


def rb(plugin_path, cwd, *args):
    # the plugin first, then whatever PYTHONPATH the tests run under (a checkout's src/)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.slow
def test_the_installed_example_is_found_run_reported_and_compared(plugin_path, tmp_path):
    res = rb(plugin_path, tmp_path, "suites")
    assert res.returncode == 0 and "echo" in res.stdout
    res = rb(plugin_path, tmp_path, "suites", "echo")
    assert res.returncode == 0 and "shout" in res.stdout and "polite" in res.stdout
    res = rb(plugin_path, tmp_path, "models")
    assert res.returncode == 0 and "reverse" in res.stdout

    a, b = tmp_path / "a", tmp_path / "b"
    res = rb(plugin_path, tmp_path, "run", "echo", "-m", "fake:echo", "-s", "plain,polite", "--out", str(a), "-q")
    assert res.returncode == 0, res.stderr
    res = rb(plugin_path, tmp_path, "run", "echo", "-m", "reverse", "-s", "plain,polite", "--out", str(b), "-q")
    assert res.returncode == 0, res.stderr
    ma = json.loads((a / "metrics.json").read_text())
    mb = json.loads((b / "metrics.json").read_text())
    assert ma["by_strategy"]["plain"]["rate"] == 100.0
    assert mb["by_strategy"]["plain"]["rate"] == 25.0           # the two palindromes of eight words
    assert json.loads((b / "manifest.json").read_text())["model"] == "reverse:any"

    res = rb(plugin_path, tmp_path, "run", "echo", "-m", "reverse", "-s", "plain,polite", "--out", str(b), "-q")
    assert res.returncode == 0 and "resumed 16" in res.stdout

    (b / "metrics.json").unlink()
    res = rb(plugin_path, tmp_path, "report", str(b))
    assert res.returncode == 0, res.stderr
    assert json.loads((b / "metrics.json").read_text()) == mb

    res = rb(plugin_path, tmp_path, "compare", str(a), str(b), "--out", str(tmp_path / "cmp"))
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "fake:echo" in md and "reverse:any" in md

    res = rb(plugin_path, tmp_path, "data", "stats", "echo")
    assert res.returncode == 0 and "8 items" in res.stdout

    res = rb(plugin_path, tmp_path, "run", "echo", "-m", "fake:echo", "--set", "bogus=1", "--out", str(tmp_path / "c"))
    assert res.returncode == 2 and "bogus" in res.stderr and "shout" in res.stderr
    assert not (tmp_path / "c").exists()
    res = rb(plugin_path, tmp_path, "run", "echo", "-m", "fake:echo", "--set", "shout=maybe", "--out", str(tmp_path / "c"))
    assert res.returncode == 2 and "shout" in res.stderr and "true or false" in res.stderr


CARD_TINY = {"charm": 4, "knowledge-errors": 2, "multiverse": 2, "capability": 1}


@pytest.mark.slow
def test_the_example_reaches_card_compare_and_build_with_no_core_change(plugin_path, tmp_path):
    """The plugin declares on_card, card_figures and build_commands: `rolebound card` runs it with
    the built-in suites, `card --compare` puts it side by side, `rolebound build echo` writes data."""
    words = tmp_path / "words.txt"
    res = rb(plugin_path, tmp_path, "build", "--help")
    assert res.returncode == 0 and "echo" in res.stdout
    res = rb(plugin_path, tmp_path, "build", "echo", "noon", "kayak", "tree", "--out", str(words))
    assert res.returncode == 0, res.stderr
    res = rb(plugin_path, tmp_path, "run", "echo", "-m", "reverse", "--data", str(words), "--out", str(tmp_path / "w"), "-q")
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "w" / "metrics.json").read_text())["by_strategy"]["plain"]["n"] == 3
    limits = [x for k, v in CARD_TINY.items() for x in ("--limit", f"{k}={v}")]
    res = rb(plugin_path, tmp_path, "card", "--model", "fake:echo", "-q", "--out", str(tmp_path / "a"), *limits)
    assert res.returncode == 0, res.stderr[-2000:]
    card = json.loads((tmp_path / "a" / "card.json").read_text())
    assert [s["suite"] for s in card["suites"]][-1] == "echo"
    echo = card["suites"][-1]
    assert echo["title"] == "echo: repeat a word" and echo["figures"][0]["value"] == 100.0
    res = rb(plugin_path, tmp_path, "card", "--compare", str(tmp_path / "a"), str(tmp_path / "a" / "card.json"),
             "--out", str(tmp_path / "cmp"))
    assert res.returncode == 0, res.stderr[-2000:]
    md = (tmp_path / "cmp" / "compare.md").read_text()
    assert "echo: repeat a word" in md and "echoed % (plain)" in md


def test_the_one_scan_finds_what_importlib_finds_group_by_group(tmp_path, monkeypatch):
    from importlib import metadata

    from rolebound import plugins

    def dist(folder, target):
        info = folder / "rb_scan_probe-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rb-scan-probe\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[rolebound.suites]\nprobe = {target}\n\n"
                                               f"[rolebound.backends]\nprobe = {target}\n")

    dist(tmp_path / "a", "first:Suite")
    dist(tmp_path / "b", "second:Suite")          # a second copy later on sys.path: the first wins
    monkeypatch.setattr(sys, "path", [str(tmp_path / "a"), str(tmp_path / "b"), *sys.path])
    plugins._installed.cache_clear()
    try:
        for group in (plugins.SUITES, plugins.BACKENDS, plugins.IMPORTERS, plugins.COMMANDS):
            assert plugins.entry_points(group) == {ep.name: ep.value for ep in metadata.entry_points(group=group)}
        assert plugins.entry_points(plugins.SUITES)["probe"] == "first:Suite"
    finally:
        plugins._installed.cache_clear()


def test_without_the_plugin_echo_is_unknown(tmp_path):
    assert "echo" not in available()
    res = subprocess.run([str(SCRIPT), "run", "echo", "-m", "fake:echo"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert res.returncode == 2 and "unknown suite 'echo'" in res.stderr


class CountOptions(Options):
    n: int = 3


class CountItem(Item):
    k: int


def test_a_suite_marked_register_suite_runs_and_reports_through_the_api(tmp_path):
    @register_suite("count-test")
    class CountSuite(Suite):
        strategies = {"direct": "say the number"}
        default_strategies = ["direct"]
        options_model = CountOptions

        def load(self, data, settings):
            return Dataset(items=[CountItem(id=str(k), k=k) for k in range(settings.options.n)], source="builtin", hash="x")

        async def run_item(self, item, ctx, strategy, settings):
            await ctx.chat("answer", [{"role": "user", "content": str(item.k)}], parse=str.strip, gold=str(item.k))

        def metrics(self, records, manifest):
            return {"correct": sum(bool(r.correct) for r in records), "n": len(records)}

        def report(self, metrics, records, manifest, run_dir):
            p = Path(run_dir) / "report.md"
            p.write_text(f"{metrics['correct']}/{metrics['n']}\n")
            return [p]

    try:
        assert "count-test" in available() and get_suite("count-test").name == "count-test"
        res = api.run("count-test", model="fake:echo", out=tmp_path / "r", progress=False, options={"n": 5})
        # api.build_report adds the run-level score_ties to every suite's metrics (protocol)
        assert {k: res.metrics[k] for k in ("correct", "n")} == {"correct": 5, "n": 5}
        assert res.metrics["score_ties"]["tied"] == 0
        assert api.build_report(tmp_path / "r")[0] == res.metrics
        with pytest.raises(InputError, match="unknown option 'm' for suite count-test; valid options: n"):
            validate_options(get_suite("count-test"), {"m": 1})
    finally:
        _REGISTERED.pop("count-test", None)


def test_a_broken_entry_point_is_one_clear_error(monkeypatch):
    from rolebound import plugins
    from rolebound.errors import RoleboundError

    monkeypatch.setattr(plugins, "entry_points", lambda group: {"broken": "no_such_module_xyz:Suite",
                                                                "notasuite": "json:dumps"})
    with pytest.raises(RoleboundError, match="cannot load 'no_such_module_xyz:Suite'"):
        get_suite("broken")
    with pytest.raises(InputError, match="is not a Suite class"):
        get_suite("notasuite")
