"""Answer parsers (CHARM Table 19/20 formats) and the shared statistics."""

from __future__ import annotations

import pytest

from rolebound.stats import bootstrap_ci, mean_sem, mean_std, rate, rate_ci
from rolebound.scoring.parsers import INVALID, parse_first_letter, parse_yes_no
from rolebound.suites.charm.prompts import parse_answer_number


@pytest.mark.parametrize("text,expected", [
    ("Answer: 3", 3),
    ("Shakespeare would not know.\nAnswer: 4", 4),
    ("**Answer:** 2", 2),
    ("Answer: **5**", 5),
    ("Answer: [1]", 1),
    ("Answer: (3).", 3),
    ("Final Answer: <2>", 2),
    ("answer: 5 because it is the only one", 5),
    ("Answer: 1\nOn reflection...\nAnswer: 4", 4),          # the last one counts
    ("Answer：2", 2),                                        # full-width colon
])
def test_answer_number_valid(text, expected):
    assert parse_answer_number(text, 5) == expected


@pytest.mark.parametrize("text", [
    "", None, "The answer is 3", "Answer: 6", "Answer: 0", "Answer: three", "3", "I cannot answer that question",
    "Answer: ", "My choice: 2",
])
def test_answer_number_invalid(text):
    assert parse_answer_number(text, 5) == INVALID


@pytest.mark.parametrize("text,expected", [
    ("Yes", "Yes"), ("No.", "No"), ("no, I have never heard of it", "No"), ("**No**", "No"),
    ("Answer: Yes", "Yes"), ("  yes!", "Yes"), ("\u201cNo\u201d", "No"),
    ("I don't know", INVALID), ("Nope", INVALID), ("Not really", INVALID), ("", INVALID),
    ("As Shakespeare, no.", INVALID),
])
def test_yes_no(text, expected):
    assert parse_yes_no(text) == expected


def test_first_letter():
    assert parse_first_letter(" B. because", "ABCD") == "B"
    assert parse_first_letter("I think E or A", "ABCD") == "A"
    assert parse_first_letter("none", "ABCD") == INVALID


def test_rate_and_bootstrap_ci():
    vals = [True] * 30 + [False] * 70
    assert rate(vals) == 30.0 and rate([]) is None
    lo, hi = bootstrap_ci(vals, seed=1)
    assert lo < 30.0 < hi and 18 < lo < 30 and 30 < hi < 42
    assert bootstrap_ci(vals, seed=1) == (lo, hi)           # seeded: reproducible
    assert bootstrap_ci([True, True]) == (100.0, 100.0)
    assert bootstrap_ci([]) == (None, None)
    d = rate_ci(vals)
    assert d["n"] == 100 and d["rate"] == 30.0


def test_mean_sem_and_std():
    m, sem = mean_sem([60.0, 70.0, 80.0])
    assert m == 70.0 and sem == pytest.approx(10.0 / 3 ** 0.5)   # sd 10, n 3
    assert mean_sem([5.0]) == (5.0, 0.0) and mean_sem([]) == (None, None)
    m, sd = mean_std([1.0, 3.0])
    assert m == 2.0 and sd == pytest.approx(2 ** 0.5)


def test_bootstrap_ci_ignores_order():
    import random

    vals = [True] * 13 + [False] * 29
    shuffled = vals[:]
    random.Random(3).shuffle(shuffled)
    assert bootstrap_ci(vals) == bootstrap_ci(shuffled)


def test_the_one_formatting_module():
    from rolebound.report.fmt import fmt_diff, fmt_mean_n, fmt_mean_sd, fmt_num, fmt_pm, fmt_rate

    assert fmt_rate({"rate": 72.14, "lo": 68.0, "hi": 76.25}) == "72.1 [68.0, 76.2]"
    assert fmt_rate({"rate": None}) == fmt_rate(None) == fmt_num(None) == fmt_num(float("nan")) == "-"
    assert fmt_diff({"diff": 3.2, "lo": -1.0, "hi": 7.5}) == "+3.2 [-1.0, +7.5]"
    assert fmt_mean_sd(0.8844, 0.0091) == "0.884 (0.009)" and fmt_mean_sd(float("nan")) == "-"
    assert fmt_pm((12.5, 1.25)) == "12.5 \u00b1 1.2" and fmt_pm((None, None)) == "-"
    assert fmt_mean_n({"mean": 1.254, "n": 40}) == "1.25 (n=40)"


def test_one_definition_of_the_shared_constants():
    import re
    from pathlib import Path

    import rolebound
    from rolebound.records import ABCD, INVALID, LETTERS

    assert ABCD == LETTERS[:4] == "ABCD" and INVALID == "invalid"
    src = Path(rolebound.__file__).parent
    again = [str(p.relative_to(src)) for p in src.rglob("*.py") if p.name != "records.py"
             and re.search(r'^\s*(LETTERS|INVALID)\s*=|"ABCD"', p.read_text(encoding="utf-8"), re.MULTILINE)]
    assert again == []
