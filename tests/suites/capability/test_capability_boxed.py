"""Appendix D answer extraction: one test per rule, plus the invalid-answer kinds."""

from __future__ import annotations

import pytest

from rolebound.suites.capability.boxed import last_boxed, normalize_gold, outcome, parse_boxed_letter, strip_trailing_box
from rolebound.scoring.parsers import INVALID


def test_reads_the_boxed_letter():
    assert parse_boxed_letter("So the answer is \\boxed{B}.") == "B"
    assert outcome("So the answer is \\boxed{B}.") == "valid"


def test_last_box_wins_so_a_model_can_revise():
    assert parse_boxed_letter("First \\boxed{A}, but wait, it is \\boxed{C}") == "C"


def test_no_box_is_missing():
    assert parse_boxed_letter("The answer is B.") == INVALID
    assert outcome("The answer is B.") == "missing"
    assert outcome("") == "missing" and outcome(None) == "missing"


def test_unboxed_prose_is_never_used():
    # 'Answer: A' or a bold letter is not an answer under Appendix D
    assert parse_boxed_letter("Answer: A\n**A**") == INVALID


def test_only_the_literal_macro_counts():
    assert parse_boxed_letter("\\boxed {A}") == INVALID
    assert parse_boxed_letter("boxed{A}") == INVALID
    assert parse_boxed_letter("\\fbox{A}") == INVALID


def test_unclosed_last_box_gives_no_answer_even_after_a_good_one():
    text = "\\boxed{A} hmm, actually \\boxed{B"
    assert parse_boxed_letter(text) == INVALID
    assert outcome(text) == "unclosed"


def test_nested_braces_are_balanced():
    assert last_boxed("\\boxed{\\frac{1}{2}} done") == ("\\frac{1}{2}", "ok")
    assert parse_boxed_letter("\\boxed{\\text{B}}") == INVALID      # content is '\text{B}', not a letter
    assert outcome("\\boxed{\\text{B}}") == "other"
    assert parse_boxed_letter("\\boxed{{B}}") == INVALID


def test_escaped_braces_do_not_close_the_box():
    assert last_boxed("\\boxed{\\}A}") == ("\\}A", "ok")
    assert outcome("\\boxed{A\\}") == "unclosed"
    assert parse_boxed_letter("\\boxed{A\\}") == INVALID


def test_whitespace_inside_the_box_is_stripped():
    assert parse_boxed_letter("\\boxed{  C \n}") == "C"


def test_content_is_uppercased():
    assert parse_boxed_letter("\\boxed{d}") == "D"


def test_only_a_to_d_are_valid():
    assert parse_boxed_letter("\\boxed{E}") == INVALID
    assert outcome("\\boxed{E}") == "other"
    assert outcome("\\boxed{}") == "other"


@pytest.mark.parametrize("content", ["(A)", "A.", "Option A", "A)", "'A'"])
def test_punctuation_is_not_removed(content):
    assert parse_boxed_letter(f"\\boxed{{{content}}}") == INVALID
    assert outcome(f"\\boxed{{{content}}}") == "other"


@pytest.mark.parametrize("content", ["AB", "A, B", "A or C"])
def test_several_letters_are_invalid(content):
    assert parse_boxed_letter(f"\\boxed{{{content}}}") == INVALID


@pytest.mark.parametrize("content", ["IDK", "idk", " I don't know ", "\\text{IDK}"])
def test_idk_is_invalid_and_counted_as_idk(content):
    text = f"Too hard for me. \\boxed{{{content}}}"
    assert parse_boxed_letter(text) == INVALID
    assert outcome(text) == "idk"


def test_gold_is_stripped_and_uppercased():
    assert normalize_gold(" b ") == "B"


def test_judge_sees_the_response_without_its_trailing_box():
    assert strip_trailing_box("I count apples.\n\n$\\boxed{B}$") == "I count apples."
    assert strip_trailing_box("I count. \\boxed{B}\n") == "I count."
    # a box in the middle is reasoning, not the trailing answer: kept
    assert strip_trailing_box("\\boxed{B} is my guess, then I stop") == "\\boxed{B} is my guess, then I stop"
    assert strip_trailing_box("no box") == "no box"
