"""CHARM's prompts (Tables 19 and 20, Appendix N), in one place."""

from __future__ import annotations

import re
from typing import Iterable

from ...constants import INVALID
from ...reading import Reading
from ...scoring.extract import Extractor, register_kind
from ...scoring.parsers import MD
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
TEMPLATES = {"ba": BA_PROMPT, "mcq": MCQ_PROMPT, "no_role": NO_ROLE_PROMPT, "answer_prefix": ANSWER_PREFIX,
             "dialogue_opener": DIALOGUE_OPENER}


def choices_text(options: list[str]) -> str:
    return "\n".join(f"{i}. {o}" for i, o in enumerate(options, 1))


def ba_prompt(item: CharmItem, question: str | None = None) -> str:
    return BA_PROMPT.format(character=item.role_name, profile=item.profile, question=question or item.question)


def mcq_prompt(item: CharmItem, options: list[str] | None = None) -> str:
    """Table 20; `options`: the item's options in another order (position controls)."""
    return MCQ_PROMPT.format(character=item.role_name, profile=item.profile, question=item.question,
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


def answer_number(options: Iterable[tuple[str, str]]) -> Extractor:
    """The strict reader of an MCQ shown as "1. ...", "2. ...": the value is the 1-based number."""
    return Extractor("answer_number", tuple((str(a), str(b)) for a, b in options), "number")
