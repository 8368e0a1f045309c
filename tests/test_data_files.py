"""Files named for what they hold: `data import` writes the format its --out's suffix names, or
refuses the name in one line (the --data readers go by the suffix, so a JSONL file named .yaml
could not be read back)."""

from __future__ import annotations

import pytest
from helpers import needs_script, rolebound

from rolebound.importers import all_importers

CSV = "question,A,B,answer\nWhat?,x,y,A\n"


def test_every_built_in_importer_names_the_suffixes_it_writes():
    imps = all_importers()
    assert {"mcq-csv", "charm-csv", "charm-official", "roleke-bench", "character-llm-profiles",
            "capability-csv", "capability-jsonl", "beyond-one-world"} <= set(imps)
    for fmt in imps:
        suffixes, kind = imps[fmt][0].writes
        assert suffixes and all(s.startswith(".") and s == s.lower() for s in suffixes) and kind, fmt


@needs_script
@pytest.mark.parametrize("fmt,out,want", [("mcq-csv", "exam.yaml", "*.jsonl"), ("charm-csv", "mine.jsonl", "*.yaml"),
                                          ("charm-official", "charm.yaml", "*.jsonl"),
                                          ("beyond-one-world", "mv.yaml", "*.json")])
def test_an_out_named_for_another_format_is_refused_in_one_line(tmp_path, fmt, out, want):
    src = tmp_path / "src.csv"
    src.write_text(CSV)
    res = rolebound("data", "import", fmt, src, "--out", tmp_path / out)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --out: ") and out in lines[0] and want in lines[0]
    assert not (tmp_path / out).exists()


@needs_script
def test_an_out_with_the_right_suffix_any_case_is_written(tmp_path):
    src = tmp_path / "src.csv"
    src.write_text(CSV)
    res = rolebound("data", "import", "mcq-csv", src, "--out", tmp_path / "exam.JSONL")
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "exam.JSONL").read_text().startswith("{")
