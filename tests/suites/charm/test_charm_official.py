"""charm-official: the CHARM authors' release (../shared/data/external/charm-official) imported as
written, Table 7's counts, a run on it, and one line for a damaged release file. The release is
read where it lies: these tests skip, naming the path, when this checkout has no ../shared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import shared_path
from helpers import needs_script, rolebound as rb
from rolebound.errors import InputError
from rolebound.suites.base import validate_options
from rolebound.suites.charm import prompts
from rolebound.suites.charm.official import COMMIT, import_official
from rolebound.suites.charm.release import load_release, table7_counts
from rolebound.suites.charm.suite import CharmSuite

REGIONS = ("EN", "China", "Korea", "Spain", "Indonesia")
BC_CROSS = {"EN": 124, "China": 160, "Korea": 160, "Spain": 160, "Indonesia": 128}   # Table 7 exactly
KV = {"EN": 128, "China": 160, "Korea": 160, "Spain": 160, "Indonesia": 128}         # the release's, not the paper's
KEYS = ("one", "two", "three", "four", "five")


def release() -> Path:
    return shared_path("data", "external", "charm-official")


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("charm-official") / "charm-official.jsonl"
    import_official(str(release()), str(out))
    return out


def test_table7_counts_and_provenance(imported):
    header, items = load_release(imported)
    counts = table7_counts(items)
    for r in REGIONS:
        assert (counts[r]["BA Temp"], counts[r]["BA Cross"], counts[r]["BC Temp"]) == (120, 16, 120), r
        assert counts[r]["BC Cross"] == BC_CROSS[r] and counts[r]["KV Cross"] == KV[r], r
    assert len(items) == 2748
    assert len(header.characters) == 40 and {c.region for c in header.characters} == set(REGIONS)
    p = header.provenance
    assert p.commit == COMMIT
    assert "Table 7 KV Cross, EN: 128 here, 152 in the paper" in p.differences
    assert any("'mexico'" in x and "8 characters" in x for x in p.left_out)
    assert any("BA Temporal" in x and "validated: false" in x for x in p.ours)
    # the BA Yes control is ours too, for every historical character of the release, under its profiles
    [yes] = [x for x in p.ours if "BA Yes control" in x]
    assert "60 in-boundary awareness questions" in yes and "20 historical characters" in yes
    assert "validated: false" in yes and "none for" not in yes
    from rolebound.suites.charm.data import load_ba_control

    assert {c.id for c in header.characters if c.period == "historical"} == set(load_ba_control().roles)
    # the spaces the import strips are a listed difference, with their count (of the strings it reads)
    assert any(x.startswith("848 of the release's 6156 question and option strings have leading or trailing "
                            "spaces, stripped") for x in p.differences), p.differences
    assert not any(o != o.strip() for i in items for o in [i.question, *(i.options or [])])
    # every BC question pairs with its BA question, every cross one with its KV question
    ids = {i.id for i in items}
    assert all(i.ba_id in ids for i in items if i.stage == "bc")
    assert all(i.kv_id in ids for i in items if i.stage == "bc" and i.boundary == "cross")
    assert sum(1 for i in items if i.stage == "kv" and i.bc_id is None) == 4     # the repeated Emma Watson fact


def _at(doc, path: str):
    for key in json.loads("[" + path[1:].replace("][", ",").strip("[]") + "]"):
        doc = doc[key]
    return doc


@pytest.mark.slow
def test_questions_options_and_gold_are_the_releases(imported):
    """Every question taken from the release equals its record there: text, options in order, gold."""
    src = release()
    files: dict[str, object] = {}
    _, items = load_release(imported)
    checked = 0
    for item in items:
        if not item.source or item.source.startswith("ours"):
            assert item.stage == "ba" and item.boundary == "temporal" and "ours" in (item.note or "")
            continue
        rel, path = item.source.split(" ", 1)
        doc = files.setdefault(rel, json.loads((src / rel).read_text(encoding="utf-8")))
        raw = _at(doc, path)
        assert item.question == raw["Question"].strip()
        if item.stage == "ba":                           # the awareness items: asked as Yes/No
            assert item.gold == "No" and item.options is None and "Yes/No" in item.note
            continue
        assert item.options == [raw[k].strip() for k in KEYS] and item.gold == raw["True Label"]
        if item.stage == "bc" and item.boundary == "cross":
            assert item.options[item.fact_option - 1] == raw["real_fact"].strip()
        checked += 1
    assert checked == 600 + 732 + 736
    one = next(i for i in items if i.id == "bc/temporal/william-shakespeare/smartphone")
    assert one.question == "What do you usually do when your smartphone battery dies?" and one.gold == 4
    assert one.ba_question == "Do you know what a smartphone is?"          # Table 8's example


@needs_script
@pytest.mark.slow
def test_import_stats_and_a_fake_run_end_to_end(tmp_path):
    out = tmp_path / "charm-official.jsonl"
    r = rb("data", "import", "charm-official", release(), "--out", out)
    assert r.returncode == 0, r.stderr
    assert "2748 questions" in r.stdout and "'mexico'" in r.stdout
    r = rb("data", "stats", "charm", "--data", out, env={**_env(), "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    assert "128 (paper 152)" in r.stdout and "508 (paper 532)" in r.stdout      # KV and the EN total differ
    assert "(paper 124)" not in r.stdout and "(paper 2748)" not in r.stdout     # BC Cross and the total do not
    run = tmp_path / "run"
    r = rb("run", "charm", "--data", out, "--model", "fake:random", "--strategy", "independent,no-role",
           "--set", "similarity=false", "--out", run, "--quiet")
    assert r.returncode == 0, r.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["dataset_provenance"]["commit"] == COMMIT and manifest["n_items"] == 2748
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["matrix"]["all"]["n"] == 600 + 732               # every BC question has its BA pair
    assert metrics["no_role"]["nr_all"]["n"] == 732                  # no-role: every BC Cross question
    assert metrics["override"]["n_cross"] == 732
    assert (metrics["ba_control"]["n"], metrics["ba_control"]["roles"]) == (60, 20)   # ours: 3 per historical role
    report = (run / "report.md").read_text()
    assert "Data: an imported release" in report and COMMIT in report
    # issue 51: KV clustered by its 184 distinct prompts (each asked of 4 characters; the fake model,
    # like greedy decoding, answers a prompt alike), wider than the interval with the 736 independent
    from rolebound.stats import rate_ci

    kv = metrics["stage_accuracy"]["kv/all"]
    assert (kv["n"], kv["clusters"]) == (736, 184) and kv["deff"] > 2
    answers = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    item = rate_ci([bool(r["correct"]) for r in answers if r["stage"] == "kv" and r["strategy"] == "independent"])
    assert kv["hi"] - kv["lo"] >= 1.5 * (item["hi"] - item["lo"])
    assert metrics["stage_accuracy"]["ba/all"]["clusters"] == 50 and metrics["no_role"]["nr_all"]["clusters"] == 20
    row = next(line for line in report.splitlines() if line.startswith("| KV accuracy |"))
    assert "| fact, within boundary | 184 |" in row and f"| {kv['deff']:.2f} |" in row


def _env():
    import os

    return dict(os.environ)


@needs_script
@pytest.mark.slow
def test_a_damaged_release_file_is_one_line_naming_file_path_and_field(tmp_path):
    src = tmp_path / "release"
    shutil.copytree(release(), src, ignore=shutil.ignore_patterns("cultural_mc.json", "*.csv"))
    cross = src / "test_data" / "cross_mc.json"
    doc = json.loads(cross.read_text(encoding="utf-8"))
    del doc["en"]["William Shakespeare"][5]["True Label"]
    cross.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    r = rb("data", "import", "charm-official", src, "--out", out)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert len(lines) == 1, lines
    assert str(cross) in lines[0] and '$["en"]["William Shakespeare"][5]' in lines[0] and "'True Label'" in lines[0]
    assert not out.exists()


def test_the_authors_prompt_is_a_variant_with_all_five_options():
    from rolebound.suites.charm.data import CharmItem

    item = CharmItem(id="x", stage="bc", boundary="temporal", role="r", role_name="Rosa", profile="Rosa, a poet",
                     region="EN", target="t", target_name="t", question="Why?", options=list("ABCDE"), gold=5)
    text = prompts.mcq_prompt(item, variant="authors")
    assert "5. E" in text and text.endswith("Answer:") and "You are Rosa." in text
    assert prompts.mcq_prompt(item) == prompts.MCQ_PROMPT.format(character="Rosa", profile="Rosa, a poet",
                                                                  question="Why?", choices=prompts.choices_text(list("ABCDE")))
    read = prompts.first_digit([(str(k), o) for k, o in enumerate("ABCDE", 1)])
    assert read("3").value == 3 and read("I choose 4. D").value == 4 and read("Option 12 or 7").value is None
    assert "mcq_authors" in CharmSuite().prompt_templates()
    with pytest.raises(InputError):
        validate_options(CharmSuite(), {"prompt": "theirs"})


def test_a_release_file_stands_alone(imported, tmp_path):
    suite = CharmSuite()
    other = tmp_path / "mine.yaml"
    other.write_text("regions: []\n", encoding="utf-8")
    for data, opts in ((f"{imported},{other}", {}), (str(imported), {"builtin": "true"})):
        with pytest.raises(InputError, match="whole dataset"):
            suite.load(data, suite.run_settings(["independent"], options=opts))
    ds = suite.load(str(imported), suite.run_settings(["independent"]))
    assert len(ds.items) == 2748 and ds.provenance["commit"] == COMMIT
    titles = [t for t, _ in suite.stats(ds)]
    assert titles[0].startswith("Table 7") and "Provenance" in titles
