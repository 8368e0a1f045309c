"""The papers' figures each suite carries (data/paper_results.yaml), checked against the papers' text
in ../shared/seeds, and how they are set beside a run's figures."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from conftest import shared_path
from rolebound.report import papers
from rolebound.suites import get_suite

SUITES = ("charm", "knowledge-errors", "multiverse", "capability")
NUM = re.compile(r"[+-]?\d+(?:\.\d+)?")


def _region(text: str, table: str) -> str:
    """The text between the previous caption and this table's caption (tables sit above them)."""
    m = re.search(r"(?:^|\n| )" + re.escape(table) + ":", text)
    assert m, f"{table}: caption not found"
    prev = [p.end() for p in re.finditer(r"Table \d+:", text[:m.start()])]
    return text[(prev[-1] if prev else 0):m.start()]


def _after(region: str, label: str, data_follows: bool) -> int | None:
    """End of the first occurrence of `label` as a token (followed by table data: a word, then a
    number, when `data_follows`; PDF text repeats model names in figure legends)."""
    tail = r"(?=\s*\S+?\s*\d+\.\d+)" if data_follows else r"(?=\s|\d|$)"
    m = re.search(r"(?:^|\s)" + re.escape(label) + tail, region)
    return m.end() if m else None


def _cells(region: str, row: papers.PaperRow, sections: set[str]) -> list[str]:
    """The value cells of the row labelled row.row (inside row.section's block, when given)."""
    tabbed = "\t" in region
    if row.section:
        at = _after(region, row.section, not tabbed)
        assert at is not None, f"{row.table}: section {row.section!r} not found"
        region = region[at:]
        ends = [e for e in (_after(region, s, not tabbed) for s in sections - {row.section}) if e is not None]
        region = region[:min(ends)] if ends else region
    if tabbed:
        for ln in region.split("\n"):
            cells = ln.split("\t")
            label = cells[0].strip()
            if len(cells) > 1 and (label == row.row or label.startswith(row.row + " $")):
                return cells[1:]
        raise AssertionError(f"{row.table}: row {row.row!r} not found")
    # flattened tables (one line per table, or glued PDF text): the tokens after the label
    m = re.search(re.escape(row.row) + r"(?=\s*\d)", region)
    assert m, f"{row.table}: row {row.row!r} not found"
    rest = region[m.end():]
    if re.match(r"\s*\d+\.\d+ \(", rest):     # "0.884 (0.009) 0.912 (0.019) ...": value (spread) pairs
        return [f"{a} ({b})" for a, b in re.findall(r"(\d+\.\d+) \((\d+\.\d+)\)", rest)]
    return rest.split()


def _check(text: str, row: papers.PaperRow, sections: set[str] = frozenset()) -> None:
    if row.quote is not None:
        assert row.quote in text, f"{row.table}: quote not in the paper"
        assert row.text in row.quote and abs(abs(row.value) - float(row.text)) < 1e-9
        return
    cells = _cells(_region(text, row.table), row, set(sections))
    assert row.col is not None and row.col <= len(cells), f"{row.table} {row.row}: no column {row.col}"
    cell = cells[row.col - 1].replace("$", "")
    nums = [float(x) for x in NUM.findall(cell.replace("\\pm", " "))]
    assert nums and nums[0] == row.value, f"{row.table} {row.section or ''} {row.row} col {row.col}: {cell!r} != {row.value}"
    if row.sem is not None:
        assert "\\pm" in cells[row.col - 1] and nums[1] == row.sem, f"{row.table} {row.row}: SEM {cell!r}"
    if row.spread is not None:
        assert len(nums) > 1 and nums[1] == row.spread, f"{row.table} {row.row}: spread {cell!r}"


@pytest.mark.parametrize("name", SUITES)
def test_every_paper_value_is_in_the_papers_text(name):
    rows = papers.rows_for(name)
    assert rows, f"{name} carries no paper_results.yaml rows"
    seed = {"charm": "000_5ab5088aa2e48184.txt", "knowledge-errors": "002_ff71d92c534b8476.txt",
            "multiverse": "003_17ec9514d450889c.txt", "capability": "004_169b4845f308a769.txt"}[name]
    text = shared_path("seeds", seed).read_text(encoding="utf-8")
    for row in rows:
        _check(text, row, {r.section for r in rows if r.table == row.table and r.section})


@pytest.mark.parametrize("name,tables", [
    ("charm", {"Table 2", "Table 3", "Table 6", "Table 15"}),
    ("knowledge-errors", {"Table 2", "Table 3"}),
    ("multiverse", {"Table 3", "Table 6", "Table 7", "Table 9", "Table 11"}),
    ("capability", {"Table 3", "Section 6.1"}),
])
def test_the_issue_tables_are_covered_and_rows_carry_their_provenance(name, tables):
    rows = papers.rows_for(name)
    assert tables <= {r.table for r in rows}
    suite = get_suite(name)
    for r in rows:
        assert r.source and r.protocol and r.paper
        assert r.condition in suite.strategies, f"{r.condition} is no {name} strategy"
    if name == "knowledge-errors":
        assert all(r.sem is not None for r in rows if r.table == "Table 2")


def test_a_wrong_value_is_caught_by_the_seed_check():
    text = shared_path("seeds", "000_5ab5088aa2e48184.txt").read_text(encoding="utf-8")
    row = next(r for r in papers.rows_for("charm") if r.table == "Table 2" and r.metric == "c_gap")
    _check(text, row)
    with pytest.raises(AssertionError):
        _check(text, row.model_copy(update={"value": row.value + 0.1}))
    with pytest.raises(AssertionError):
        _check(text, row.model_copy(update={"col": 1}))


def test_paper_line_and_protocol_comparison():
    rows = [r for r in papers.rows_for("charm") if r.metric == "c_gap"]
    line = papers.paper_line(rows, "%")
    assert line.startswith("GPT-4o 72.1, GPT-5.5 50.3") and "Llama-3.1-8B 52.0" in line and "Qwen3-8B 24.7" in line
    mv = [r for r in papers.rows_for("multiverse") if r.metric == "direct/canon"]
    assert "sonnet3.5 70.4" in papers.paper_line(mv, "%")      # 0.704 beside a percent rate
    suite = get_suite("charm")
    paper = SimpleNamespace(protocol={"mode": "paper", "departures": []}, scoring="generate", limit=None,
                            n_items=2748, strategies=["independent"])
    assert papers.protocol_comparison(suite, paper) == (True, [])
    demo = SimpleNamespace(protocol={"mode": "demo"}, scoring="logprob", limit=200, n_items=210,
                           strategies=["independent"])
    same, dep = papers.protocol_comparison(suite, demo)
    assert not same and any("demo" in d for d in dep) and any("logprob" in d for d in dep) \
        and any("--limit 200" in d for d in dep)
    demo.model = "fake:random"                     # a stand-in is named for what it is, not the bundled model
    assert papers.protocol_comparison(suite, demo)[1][0].startswith("a test stand-in model (fake:random: it knows nothing")
    demo.model = "bundled"
    assert "the bundled demo model's decoding" in papers.protocol_comparison(suite, demo)[1][0]


def test_a_paper_column_of_many_models_gives_their_range_and_the_highest():
    rows = [r for r in papers.rows_for("knowledge-errors") if r.figure == "KKE/event" and r.condition == "vanilla"]
    few = [r for r in papers.rows_for("charm") if r.metric == "c_gap"]
    assert papers.paper_summary(few, "%") == ""                        # six models: the whole line
    assert papers.paper_summary(rows, "%") == \
        "14 models, 7.11 to 39.33; highest GPT-4o 39.33 ± 0.19 (Table 2)"


def test_options_that_leave_out_part_of_the_protocol_are_departures():
    mv = get_suite("multiverse")
    run = SimpleNamespace(protocol={"mode": "paper", "departures": []}, scoring="generate", limit=None,
                          n_items=180, options={"tasks": "canon", "analysis": False})
    same, dep = papers.protocol_comparison(mv, run)
    assert not same and dep == ["tasks=canon only (the paper asks canon events and moral dilemmas)",
                                "analysis=false: no thinking/acting analysis (no segmenter, judge scores or TAM)"]
    run.options = {"tasks": "dilemma,canon", "analysis": True}       # both tasks, analysis on: the paper's
    assert papers.protocol_comparison(mv, run) == (True, [])
    cap = get_suite("capability")
    run.options = {"roles": "primary, college", "per_level": 20, "judge": False}
    assert papers.protocol_comparison(cap, run)[1] == [
        "roles=primary,college only (the paper asks every role)",
        "per_level=20: 20 questions per level, not the whole bank", "judge=false: RV, C and RC not scored"]
    run.options = {"roles": "all", "per_level": "all", "judge": True}     # "all" is every role (pick_roles)
    assert papers.protocol_comparison(cap, run) == (True, [])
    run.options = {"similarity": False, "kv_control": False}   # a table left out, a control of ours: same figures
    assert papers.protocol_comparison(get_suite("charm"), run) == (True, [])
    run.options = {"judge_scoring": "logprob"}
    assert "judge_scoring=logprob" in papers.protocol_comparison(get_suite("knowledge-errors"), run)[1][0]


def test_the_manifests_protocol_label_names_option_departures(tmp_path):
    from rolebound import api

    res = api.run("multiverse", model="fake:random", protocol="paper", strategies="direct", limit=2,
                  options={"tasks": "canon", "analysis": False}, out=tmp_path / "run", progress=False)
    label = res.manifest.protocol["label"]
    assert "not the paper's protocol" in label and "tasks=canon only" in label and "analysis=false" in label
    whole = api.run("multiverse", model="fake:random", protocol="paper", strategies="direct", limit=2,
                    options={"analysis": False, "tasks": "canon,dilemma"}, out=tmp_path / "both", progress=False)
    assert "tasks=" not in whole.manifest.protocol["label"]


def test_beside_uses_card_figures_and_metric_paths():
    suite = get_suite("charm")
    manifest = SimpleNamespace(strategies=["independent"])
    metrics = {"matrix": {"cross": {"compliance_gap": {"rate": 40.0}}}}
    figs = [{"key": "c_gap", "label": "Compliance Gap", "value": 33.3, "unit": "%"}]
    out = {e["metric"]: e for e in papers.beside(suite, metrics, manifest, figs)}
    assert out["c_gap"]["value"] == 33.3 and "GPT-4o 72.1" in out["c_gap"]["paper"]
    assert out["matrix.cross.compliance_gap"]["value"] == 40.0
    assert "sequential.cross.diff" not in out          # the run has no sequential strategy
    ke = get_suite("knowledge-errors")
    kfigs = [{"key": "KKE/all", "label": "KKE", "value": 10.0, "unit": "%"}]
    papers.annotate(ke, kfigs, ["vanilla", "cot"], card_strategy="vanilla")
    assert "LLaMA3-8b 27.00" in kfigs[0]["paper"] or "LLaMA3-8b 27.0" in kfigs[0]["paper"]


# -- a run beside the paper: report, card section, `rolebound compare RUN --paper` ----------------
SCRIPT = __import__("pathlib").Path(__import__("sys").executable).with_name("rolebound")


@pytest.fixture(scope="module")
def charm_run(tmp_path_factory):
    from rolebound import api

    out = tmp_path_factory.mktemp("paper") / "charm"
    api.run("charm", model="fake:random", limit=60, out=out, progress=False, options={"similarity": False})
    return out


@pytest.mark.slow
def test_report_and_card_set_the_paper_beside_the_run(charm_run, tmp_path):
    from rolebound.card.build import run_metrics, section
    from rolebound.card.render import card_md, figure_rows

    md = (charm_run / "report.md").read_text()
    assert "## The paper's figures beside this run" in md
    assert "GPT-4o 72.1, GPT-5.5 50.3" in md and "departs from the paper's protocol" in md
    s = section("charm", get_suite("charm"), charm_run, run_metrics(charm_run), tmp_path, reused=True)
    gap = next(f for f in s["figures"] if f["key"] == "c_gap")
    assert gap["paper"].startswith("GPT-4o 72.1") and "Qwen3-8B 24.7" in gap["paper"]
    assert "a test stand-in model (fake:random" in s["paper_protocol"] and "--limit 60" in s["paper_protocol"]
    assert any(r["paper"].startswith("paper: GPT-4o 72.1") for r in figure_rows(s))
    card = {"model": "fake:random", "judge": None, "demo": True, "created": "", "rolebound": "", "git": None,
            "suites": [{**s, "warnings": ["bc: the picks follow position"]}]}
    text = card_md(card, {})
    assert "**Against the paper:**" in text and "**Warning:** bc: the picks follow position" in text


@pytest.mark.slow
@pytest.mark.skipif(not SCRIPT.exists(), reason="the rolebound script is not installed here")
def test_compare_paper_prints_the_run_as_one_more_row(charm_run, tmp_path):
    import subprocess

    res = subprocess.run([str(SCRIPT), "compare", str(charm_run), "--paper", "--out", str(tmp_path / "cmp")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Table 2 (CHARM" in res.stdout and "this run: fake:random" in res.stdout
    t2 = res.stdout[res.stdout.index("Table 2 (CHARM"):res.stdout.index("Table 3 (CHARM")]
    rows = [[c.strip() for c in ln.strip("│ ").split("│")] for ln in t2.splitlines() if ln.startswith("│")]
    assert rows[0] == ["GPT-4o", "91.3", "18.9", "72.1", "8.9"] and len(rows) == 7
    assert rows[-1][0].startswith("this run: fake:random")
    assert (tmp_path / "cmp" / "compare.html").exists()


@pytest.mark.slow
def test_a_paper_protocol_run_lists_only_its_real_departures(tmp_path):
    from rolebound import api

    res = api.run("charm", model="fake:random", protocol="paper", limit=40, out=tmp_path / "p", progress=False,
                  options={"similarity": False}, decoding={"top_p": 1.0})
    same, dep = papers.protocol_comparison(get_suite("charm"), res.manifest)
    assert not same and dep == ["top_p 1.0 instead of 0.95",
                                f"{res.manifest.n_items} of 2816 items, a balanced subset (--limit 40), asked of "
                                "fake:random"]
    md = (res.run_dir / "report.md").read_text()
    assert "departs from the paper's protocol (CHARM Appendix H): top\\_p 1.0 instead of 0.95; " in md
    assert "followed the paper's protocol" not in md
