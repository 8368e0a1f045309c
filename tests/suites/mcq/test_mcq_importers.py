"""mcq-csv: multiple-choice questions from CSV into mcq JSONL that the suite loads and runs; bad
rows stop the import with one line naming the file, line and column. mcq has no build command and
no card section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import needs_script, rolebound as rb
from rolebound.errors import InputError
from rolebound.importers import all_importers
from rolebound.suites.mcq.data import load_items
from rolebound.suites.mcq.suite import MCQSuite


SHEET = """Question,A,B,C,D,Answer,Name,Exam Year
What is 2+2?,3,4,5,,B,Sherlock Holmes,2020
Capital of France?,Paris,Rome,Berlin,Madrid,Paris,,2021
Pick one,x,y,,,1,,
Which number?,1,2,3,4,3,,
"""


def sheet(tmp_path: Path, text: str = SHEET) -> Path:
    src = tmp_path / "exam.csv"
    src.write_text(text, encoding="utf-8")
    return src


def test_a_sheet_round_trips_through_the_suite_loader(tmp_path):
    out = tmp_path / "exam.jsonl"
    summary = all_importers()["mcq-csv"][0](str(sheet(tmp_path)), str(out))
    assert summary.startswith("4 questions") and "all validated: false" in summary
    items = load_items(str(out))
    assert [i.id for i in items] == ["exam-00001", "exam-00002", "exam-00003", "exam-00004"]
    assert [len(i.options) for i in items] == [3, 4, 2, 4]               # trailing empty cells are no option
    # a letter, an option's text, a 0-based index, and digits that are an option's text
    assert [i.answer for i in items] == ["B", "A", "B", "C"]
    first = items[0].model_dump()
    assert first["name"] == "Sherlock Holmes" and first["exam_year"] == "2020"
    assert first["note"] == "imported from exam.csv, line 2" and first["validated"] is False
    assert "source" not in first                 # `source` is the template's; provenance is in the note


def test_an_options_list_column_and_ids(tmp_path):
    src = sheet(tmp_path, 'qid,stem,choices,gold,validated\n7,Sky?,"[""blue"", ""green""]",0,true\n')
    out = tmp_path / "o.jsonl"
    all_importers()["mcq-csv"][0](str(src), str(out))
    (item,) = load_items(str(out))
    assert (item.id, item.question, item.options, item.answer, item.validated) == ("7", "Sky?", ["blue", "green"],
                                                                                  "A", True)


@pytest.mark.parametrize("text,line,column,msg", [
    (SHEET.replace("Paris,,2021", "Lyon,,2021"), 3, "answer", "not a letter A-D"),
    (SHEET.replace("4,5,,B", "4,5,,E"), 2, "answer", "not a letter A-C"),
    (SHEET.replace("Pick one,x,y,,,1", "Pick one,x,,z,,1"), 4, "b", "empty option"),
    (SHEET.replace("Pick one,x,y,,,1", "Pick one,x,,,,0"), 4, "a..d", "at least 2"),
    (SHEET.replace("Pick one,", ","), 4, "question", "no question"),
    (SHEET.replace("Answer,", "Solution,"), 1, "answer", "no answer column"),
    ("question,A,B,answer,options\nQ,x,y,A,[]\n", 1, "options", "options given twice"),
    ('question,options,answer\nQ,"x, y",A\n', 2, "options", "JSON list"),
    ("id,question,A,B,answer\nq1,Q,x,y,A\nq1,Q2,x,y,B\n", 3, "id", "duplicate id 'q1'"),
    ("question,A,B,answer,validated\nQ,x,y,A,maybe\n", 2, "validated", "true or false"),
], ids=["answer-text", "answer-letter", "gap", "one-option", "no-question", "no-answer-column", "options-twice",
        "options-not-json", "duplicate-id", "validated"])
def test_a_bad_row_names_file_line_and_column(tmp_path, text, line, column, msg):
    out = tmp_path / "o.jsonl"
    with pytest.raises(InputError, match=msg) as e:
        all_importers()["mcq-csv"][0](str(sheet(tmp_path, text)), str(out))
    assert (Path(e.value.file).name, e.value.line, e.value.field) == ("exam.csv", line, column)
    assert not out.exists()


def test_mcq_has_no_build_command_and_no_card_section():
    import typer

    from rolebound.card.build import card_suites

    app = typer.Typer()
    MCQSuite().build_commands(app)
    assert not app.registered_commands and not app.registered_groups
    assert MCQSuite().card_figures({"by_strategy": {}}) is None
    assert not MCQSuite.on_card and "mcq" not in card_suites()


@pytest.mark.slow
@needs_script
def test_cli_imports_lists_and_runs_the_file(tmp_path):
    formats = rb("data", "formats")
    assert formats.returncode == 0 and "mcq-csv" in formats.stdout
    out = tmp_path / "exam.jsonl"
    res = rb("data", "import", "mcq-csv", sheet(tmp_path), "--out", out)
    assert res.returncode == 0 and res.stdout.startswith("4 questions"), res.stderr
    run = rb("run", "mcq", "--model", "fake:random", "--data", out, "--out", tmp_path / "run")
    assert run.returncode == 0, run.stderr
    recs = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert sorted(r["item_id"] for r in recs) == ["exam-00001", "exam-00002", "exam-00003", "exam-00004"]
    build = rb("build", "--help")
    assert build.returncode == 0 and " mcq " not in build.stdout


@needs_script
def test_cli_bad_row_is_one_line_with_exit_2(tmp_path):
    src = sheet(tmp_path, SHEET.replace("Paris,,2021", "Lyon,,2021"))
    res = rb("data", "import", "mcq-csv", src, "--out", tmp_path / "o.jsonl")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "exam.csv:3" in lines[0] and "field 'answer'" in lines[0]
