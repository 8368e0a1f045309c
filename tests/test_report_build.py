"""report.build: the one path from a run's records to its report. The run-level parts sit around
the suite's own in a fixed order, a run's own report and `rolebound report RUN` are the same
bytes, and a suite with no report hook gets its title and summary lines."""

from __future__ import annotations

import pytest

from rolebound import api
from rolebound.suites import _REGISTERED, register_suite
from rolebound.suites.base import Dataset, Item, Suite

pytestmark = pytest.mark.slow     # whole runs


def _headings(md: str) -> list[str]:
    return [line[3:] for line in md.splitlines() if line.startswith("## ")]


def _fact_keys(md: str) -> list[str]:
    """The first column of the facts table (the first table, under the title)."""
    lines = md.splitlines()
    start = lines.index("|---|---|") + 1
    end = lines.index("", start)
    return [line.split("|")[1].strip() for line in lines[start:end]]


def test_the_run_level_parts_sit_around_the_suites_sections(tmp_path):
    res = api.run("charm", model="fake:random", scoring="logprob", limit=6, repeats=2, allow_greedy_repeats=True,
                  options={"permutations": 2}, out=tmp_path / "r", progress=False)
    md = (res.run_dir / "report.md").read_text(encoding="utf-8")
    heads = _headings(md)
    order = ["The paper's figures beside this run", "Position bias: answers and gold answers by option position",
             "Table 2: where character hallucination occurs", "Per-sample records",
             "Accuracy under cyclic shifts of the options (--set permutations)"]
    assert [heads.index(h) for h in order] == sorted(heads.index(h) for h in order)
    assert heads[-1].startswith("Mean +- SEM over 2 repeats")            # the last section
    keys = _fact_keys(md)
    assert keys[0] == "suite" and keys[-1] == "against the paper"          # the run's facts first
    assert keys.index("exact ties") < keys.index("calls")
    html = (res.run_dir / "report.html").read_bytes()
    again, paths = api.build_report(res.run_dir)                          # `rolebound report RUN`
    assert again == res.metrics
    assert {p.name for p in paths} == {"report.md", "report.html"}
    assert (res.run_dir / "report.md").read_text(encoding="utf-8") == md
    assert (res.run_dir / "report.html").read_bytes() == html


class PlainItem(Item):
    word: str


def test_a_suite_without_a_report_hook_gets_its_title_and_summary(tmp_path):
    @register_suite("plain-report-test")
    class PlainSuite(Suite):
        strategies = {"say": "the word"}
        default_strategies = ["say"]

        def load(self, data, settings):
            return Dataset(items=[PlainItem(id=f"w{i}", word=w) for i, w in enumerate(["a", "b"])],
                           source="builtin", hash="x")

        async def run_item(self, item, ctx, strategy, settings):
            await ctx.chat("answer", [{"role": "user", "content": item.word}], parse=str.strip, gold=item.word)

        def metrics(self, records, manifest):
            return {"echoed": sum(bool(r.correct) for r in records)}

        def summary(self, metrics):
            return [("echoed", str(metrics["echoed"]))]

    try:
        res = api.run("plain-report-test", model="fake:echo", out=tmp_path / "p", progress=False)
        md = (res.run_dir / "report.md").read_text(encoding="utf-8")
        assert md.startswith("# plain-report-test: fake:echo\n")
        assert _fact_keys(md)[0] == "suite" and "| echoed | 2 |" in md
        assert _headings(md) == ["Summary"]
    finally:
        _REGISTERED.pop("plain-report-test", None)
