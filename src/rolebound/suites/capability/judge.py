"""LM-judge scores of a role-prompted answer: role voice (RV), capability consistency (C) and
reasoning coherence (RC), each 0-2 on the anchors of RoleCapBench Table 6.

Appendix E: the judge sees the assigned role, its identity, capability and style definitions,
the question and the response with a trailing boxed answer removed; never the gold answer or
the question's level. The prompt wording around the anchors is ours.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...records import INVALID, Message
from .boxed import strip_trailing_box
from .prompts import fill, question_block

DIMENSIONS = ("RV", "C", "RC")

# Table 6, verbatim anchors.
RUBRIC = {
    "RV": ("Role voice", [
        "No role voice, or the voice is irrelevant to the assigned role",
        "Some role-appropriate voice, but it is inconsistent across the reasoning trace",
        "Voice consistently matches the assigned character, age, or role"]),
    "C": ("Capability consistency", [
        "Uses unrestricted, high-capability reasoning despite a lower-capability or restricted-role instruction",
        "Partially adapts to the requested capability level but still exhibits over-capable reasoning",
        "Consistently adapts its reasoning and output to the requested capability level"]),
    "RC": ("Reasoning coherence", [
        "No usable reasoning, or the reasoning is unsupported, circular, or confused",
        "Partly relevant reasoning with gaps, unsupported leaps, or minor contradictions",
        "Coherent, grounded, and well-supported reasoning"]),
}

SYSTEM = "You are a careful, impartial evaluator of role-played answers to exam questions."

TEMPLATE = """Assigned role: {role}
Role identity: You are {article} {role}.
Capability boundary: {capability}
Style boundary: {style}

The model was given this exam question while playing the role:
{question}

Its response:
<<<
{response}
>>>

Score the response on each criterion below with 0, 1 or 2.

{rubric}

Reply with exactly three lines and nothing else:
RV: <0, 1 or 2>
C: <0, 1 or 2>
RC: <0, 1 or 2>"""


def rubric_text() -> str:
    blocks = []
    for key, (name, anchors) in RUBRIC.items():
        blocks.append(f"{name} ({key})\n" + "\n".join(f"{i}: {a}" for i, a in enumerate(anchors)))
    return "\n\n".join(blocks)


def judge_messages(role: Any, item: Any, response: str | None) -> list[Message]:
    text = fill(TEMPLATE, {"role": role.name, "article": role.article, "capability": role.capability.strip(),
                           "style": role.style.strip(), "question": question_block(item),
                           "response": strip_trailing_box(response or "").strip() or "(empty)",
                           "rubric": rubric_text()})
    return [Message(role="system", content=SYSTEM), Message(role="user", content=text)]


_NAMES = {"RV": r"RV|role[\s_-]*voice", "C": r"C|capability[\s_-]*consistency",
          "RC": r"RC|reasoning[\s_-]*coherence"}
# a score is one digit 0-2; "0, 1 or 2", "1-2", "1/2" echo the instructions or hedge: not read
_NOT_A_SCORE = r"(?!\d)(?!\.\d)(?!\s*(?:,|or\b|-|–|/|to\b)\s*\d)"
_LINE = {k: re.compile(r"(?<![A-Za-z])(?:" + v + r")(?![A-Za-z])\s*(?:\([A-Z]+\))?\s*[*_]*\s*[:=]\s*[*_]*\s*([0-2])"
                       + _NOT_A_SCORE, re.IGNORECASE) for k, v in _NAMES.items()}


def parse_judge(text: str | None) -> dict[str, int | None] | str:
    """{"RV": 0-2|None, "C": ..., "RC": ...}; INVALID when no score can be read.

    A JSON object with the three keys wins; otherwise the last `RV: n` style line per score.
    """
    if not text:
        return INVALID
    scores: dict[str, int | None] = {k: None for k in DIMENSIONS}
    for m in re.finditer(r"\{[^{}]*\}", text):
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            for k in DIMENSIONS:
                v = obj.get(k, obj.get(k.lower()))
                if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2:
                    scores[k] = v
    if all(v is None for v in scores.values()):
        for k, pat in _LINE.items():
            found = pat.findall(text)
            if found:
                scores[k] = int(found[-1])
    return scores if any(v is not None for v in scores.values()) else INVALID
