"""CHARM's prompts (Tables 19 and 20, Appendix N), in one place."""

from __future__ import annotations

import re
from typing import Iterable

from ...records import INVALID, Reading
from ...scoring.extract import Extractor, register_kind
from .data import CharmItem

# Table 19 (BA). Line breaks restored where the paper's table layout had them.
BA_PROMPT = ("You are {character}. Please answer the following question as {character}. "
             "And there is a {character} profile: {profile}.\n"
             "Question: {question}\n"
             "Answer only \u201cYes\u201d or \u201cNo\u201d.\n"
             "Answer:")
# Table 20 (BC and KV).
MCQ_PROMPT = ("You are {character}. Please read the following multiple-choice question and select the correct "
              "answer. Your response should be made as if you are {character}, and you must choose the answer that "
              "{character} would most likely provide. And there is a {character} profile: {profile}. "
              "Now select the correct answer.\n"
              "Question: {question}\n"
              "Choices:\n{choices}\n"
              "First, briefly explain your reasoning. Then, state your final answer on the last line in the "
              "format: Answer: <number>")
# Appendix N: the same MCQ with no role assigned (the paper gives no template; Table 20 minus the role).
NO_ROLE_PROMPT = ("Please read the following multiple-choice question and select the correct answer.\n"
                  "Question: {question}\n"
                  "Choices:\n{choices}\n"
                  "First, briefly explain your reasoning. Then, state your final answer on the last line in the "
                  "format: Answer: <number>")
ANSWER_PREFIX = "Answer: "
# The dialogue strategy's first user turn (our wording, after Table 19): the role and profile once,
# then the warm-up question; later turns are the questions alone.
DIALOGUE_OPENER = ("You are {character}. Please answer the following questions as {character}. "
                   "And there is a {character} profile: {profile}.\nQuestion: {text}")


def _authors_prompt() -> str:
    """`--set prompt=authors`: the authors' own template (data/authors_prompt.yaml, its source there)."""
    from importlib import resources

    from ..base import Authored
    from ...io import read_yaml, validate_yaml

    class AuthorsPrompt(Authored):
        template: str

    path = resources.files(__package__) / "data" / "authors_prompt.yaml"
    return validate_yaml(AuthorsPrompt, read_yaml(str(path)), file=str(path)).template


AUTHORS_MCQ_PROMPT = _authors_prompt()
MCQ_PROMPTS = {"paper": MCQ_PROMPT, "authors": AUTHORS_MCQ_PROMPT}
TEMPLATES = {"ba": BA_PROMPT, "mcq": MCQ_PROMPT, "mcq_authors": AUTHORS_MCQ_PROMPT, "no_role": NO_ROLE_PROMPT,
             "answer_prefix": ANSWER_PREFIX, "dialogue_opener": DIALOGUE_OPENER}


def choices_text(options: list[str]) -> str:
    return "\n".join(f"{i}. {o}" for i, o in enumerate(options, 1))


def ba_prompt(item: CharmItem, question: str | None = None) -> str:
    return BA_PROMPT.format(character=item.role_name, profile=item.profile, question=question or item.question)


def mcq_prompt(item: CharmItem, options: list[str] | None = None, variant: str = "paper") -> str:
    """Table 20 (variant "authors": the authors' own template); `options`: the item's options in
    another order (position controls)."""
    return MCQ_PROMPTS[variant].format(character=item.role_name, profile=item.profile, question=item.question,
                             choices=choices_text(item.options or [] if options is None else options))


def no_role_prompt(item: CharmItem) -> str:
    return NO_ROLE_PROMPT.format(question=item.question, choices=choices_text(item.options or []))


def dialogue_opener(item) -> str:
    """The first user turn of a dialogue ("{text}" stays for the warm-up question)."""
    return DIALOGUE_OPENER.replace("{character}", item.role_name).replace("{profile}", item.profile)


# Table 20's answer line as the paper reads it (extraction=strict): the number in the last
# "Answer: <n>"; also "**Answer:** 3", "Answer: [3]", "Answer: (3).", "final answer: <3>"
_ANSWER_NUM = re.compile(r"answer\s*[:：]\s*[\[\(<{]?\s*(\d+)\s*[\]\)>}]?", re.IGNORECASE)


def parse_answer_number(text: str | None, n_options: int) -> int | str:
    """The number in the last `Answer: <n>`; INVALID unless 1..n_options."""
    from ...scoring.parsers import MD

    if not text:
        return INVALID
    found = _ANSWER_NUM.findall(MD.sub("", text))
    if not found:
        return INVALID
    n = int(found[-1])
    return n if 1 <= n <= n_options else INVALID


def _answer_number_reading(text: str | None, ex: Extractor) -> Reading:
    got = parse_answer_number(text, len(ex.options))
    return Reading(None, "none:strict_no_answer_number") if got == INVALID else Reading(got, "strict_answer_number")


register_kind("answer_number", _answer_number_reading)


# The authors' evaluation script reads the first standalone digit 1-5 of the reply (their prompt
# ends with "Answer:"): extraction=strict with prompt=authors.
_DIGIT = re.compile(r"(?<!\d)([1-5])(?!\d)")


def _first_digit_reading(text: str | None, ex: Extractor) -> Reading:
    m = _DIGIT.search(text or "")
    if not m or not 1 <= int(m.group(1)) <= len(ex.options):
        return Reading(None, "none:strict_no_digit")
    return Reading(int(m.group(1)), "strict_first_digit")


register_kind("first_digit", _first_digit_reading)


def first_digit(options: Iterable[tuple[str, str]]) -> Extractor:
    return Extractor("first_digit", tuple((str(a), str(b)) for a, b in options), "number")


def answer_number(options: Iterable[tuple[str, str]]) -> Extractor:
    """The strict reader of an MCQ shown as "1. ...", "2. ...": the value is the 1-based number."""
    return Extractor("answer_number", tuple((str(a), str(b)) for a, b in options), "number")
