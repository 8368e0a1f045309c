"""charm-csv: a user's characters, facts and concepts from CSV into charm YAML that the suite loads;
bad rows stop the import with one line naming the file, line and column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import needs_script, rolebound as rb
from rolebound.errors import InputError
from rolebound.importers import all_importers
from rolebound.suites.charm.data import load_data
from rolebound.suites.charm.suite import CharmSuite


CHARACTERS = """Name,Region,Region Name,Profile,Reality,Period,Era_End,Known_Since,Universe,Source
Ada Lovelace,Nordic,Nordic countries,"Ada Lovelace, a mathematician",Real,Historical,1852,,Victorian England,
Greta Example,Nordic,,"Greta Example, a climate activist",real,contemporary,,2018,Real world,Her biography
Tove Troll,Nordic,,"Tove Troll, a troll of the valley",Fictional,historical,1900,,The valley,
"""
FACTS = """target,bc_question,kv_question,answer,distractor_1,distractor_2,distractor_3,validated
greta-example,Where was Greta Example born?,Where were you born?,Stockholm,Oslo,Helsinki,Copenhagen,
greta-example,What did Greta Example start?,What did you start?,A school strike,A band,A bakery,A party,yes
"""
CONCEPTS = """name,year,ba_template_1,ba_template_2,bc_question,answer,distractors
Zorbl app,2016,Do you know the Zorbl app?,Have you used Zorbl?,How long is a Zorbl clip?,Under a minute,"[""Three hours"", ""A day"", ""A week""]"
"""


def folder(tmp_path: Path, **files: str) -> Path:
    src = tmp_path / "mine"
    src.mkdir()
    for name, text in {"characters": CHARACTERS, "facts": FACTS, "concepts": CONCEPTS, **files}.items():
        if text is not None:
            (src / f"{name}.csv").write_text(text, encoding="utf-8")
    return src


def test_a_folder_round_trips_through_the_suite_loader(tmp_path):
    fn, _ = all_importers()["charm-csv"]
    out = tmp_path / "mine.yaml"
    summary = fn(str(folder(tmp_path)), str(out))
    assert "characters: 3, facts: 2, concepts: 1" in summary and "new regions: Nordic" in summary
    d, _ = load_data([out], builtin=False)
    assert [c.id for c in d.characters] == ["ada-lovelace", "greta-example", "tove-troll"]
    assert [(r.id, r.name) for r in d.regions] == [("Nordic", "Nordic countries")]
    ada, greta, tove = d.characters
    assert (ada.reality, ada.period, ada.era_end, tove.reality) == ("real", "historical", 1852, "fiction")
    assert greta.known_since == 2018 and not ada.validated
    assert ada.source == "characters.csv, line 2"
    assert greta.source == "Her biography" and greta.note == "imported from characters.csv, line 3"
    assert [f.id for f in d.facts] == ["greta-example-01", "greta-example-02"]
    assert [f.validated for f in d.facts] == [False, True]          # the sheet said yes
    assert d.concepts[0].ba_templates == ["Do you know the Zorbl app?", "Have you used Zorbl?"]
    assert d.concepts[0].distractors == ["Three hours", "A day", "A week"]
    # with the starter set too (the default), through the suite itself
    suite = CharmSuite()
    ds = suite.load(str(out), suite.run_settings(["independent"]))
    roles = {i.role for i in ds.items}
    assert {"ada-lovelace", "tove-troll", "greta-example"} <= roles
    assert any(i.target == "zorbl-app" and i.role == "william-shakespeare" for i in ds.items)


def test_a_single_csv_is_characters_and_may_use_built_in_regions(tmp_path):
    src = tmp_path / "chars.csv"
    src.write_text("id,name,region,profile,reality,period,era_end,universe,note,validated\n"
                   "ben,Ben Quill,EN,\"Ben Quill, a scribe\",fiction,historical,1700,London,my own,true\n")
    out = tmp_path / "chars.yaml"
    summary = all_importers()["charm-csv"][0](str(src), str(out))
    assert "uses the starter set's EN" in summary and "0 validated: false" in summary
    d, _ = load_data([out])
    ben = next(c for c in d.characters if c.id == "ben")
    assert ben.validated and ben.note == "my own" and ben.source == "chars.csv, line 2"


@pytest.mark.parametrize("name,text,line,column,msg", [
    ("characters", CHARACTERS.replace(",1852,", ",,"), 2, "era_end", "needs era_end"),
    ("characters", CHARACTERS.replace("Fictional", "Myth"), 4, "reality", "'real' or 'fiction'"),
    ("characters", CHARACTERS.replace('"Tove Troll, a troll of the valley"', ""), 4, "profile", "is empty"),
    ("characters", CHARACTERS.replace("Universe,Source", "Universe,Sauce"), 1, "sauce", "unknown column 'sauce'"),
    ("characters", CHARACTERS.replace("Tove Troll,Nordic", "Ada Lovelace,Nordic"), 4, "id", "duplicate id 'ada-lovelace'"),
    ("characters", CHARACTERS.replace("Tove Troll,Nordic", "Sherlock Holmes,Nordic"), 4, "id", "built-in"),
    ("facts", FACTS.replace(",Copenhagen,", ",Stockholm,"), 2, "distractor_1..distractor_3", "repeats the answer"),
    ("facts", FACTS.replace("greta-example,What", "ada-lovelace,What"), 3, "target", "is historical"),
    ("facts", FACTS.replace("greta-example,What", "nobody,What"), 3, "target", "unknown character 'nobody'"),
    ("concepts", CONCEPTS.replace(",2016,", ",soon,"), 2, "year", "valid integer"),
    ("concepts", CONCEPTS.replace('"[""Three hours"", ""A day"", ""A week""]"', "Three hours"), 2, "distractors",
     "JSON list"),
], ids=["no-era-end", "bad-reality", "no-profile", "unknown-column", "duplicate-id", "built-in-id",
        "distractor-repeats-answer", "historical-target", "unknown-target", "bad-year", "distractors-not-json"])
def test_a_bad_row_names_file_line_and_column(tmp_path, name, text, line, column, msg):
    src = folder(tmp_path, **{name: text})
    out = tmp_path / "out.yaml"
    with pytest.raises(InputError, match=msg) as e:
        all_importers()["charm-csv"][0](str(src), str(out))
    assert (Path(e.value.file).name, e.value.line, e.value.field) == (f"{name}.csv", line, column)
    assert not out.exists()                    # nothing half-written


def test_a_stray_csv_in_the_folder_is_named(tmp_path):
    src = folder(tmp_path, notes="a,b\n1,2\n")
    with pytest.raises(InputError, match="unexpected CSV 'notes.csv'"):
        all_importers()["charm-csv"][0](str(src), str(tmp_path / "o.yaml"))


@pytest.mark.slow
@needs_script
def test_cli_imports_lists_and_runs_the_file(tmp_path):
    formats = rb("data", "formats")
    assert formats.returncode == 0 and "charm-csv" in formats.stdout
    out = tmp_path / "mine.yaml"
    res = rb("data", "import", "charm-csv", folder(tmp_path), "--out", out)
    assert res.returncode == 0, res.stderr
    run = rb("run", "charm", "--model", "fake:random", "--data", out, "--set", "builtin=false",
             "--set", "similarity=false", "--limit", "4", "--out", tmp_path / "run")
    assert run.returncode == 0, run.stderr
    recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert recs and {r["meta"]["region"] for r in recs} == {"Nordic"}


@needs_script
def test_cli_bad_row_is_one_line_with_exit_2(tmp_path):
    src = folder(tmp_path, facts=FACTS.replace("greta-example,What", "nobody,What"))
    res = rb("data", "import", "charm-csv", src, "--out", tmp_path / "o.yaml")
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr
    assert "facts.csv:3" in lines[0] and "field 'target'" in lines[0] and "unknown character 'nobody'" in lines[0]
