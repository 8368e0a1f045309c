"""CHARM's preference pairs (`rolebound data pairs`), from a run's records alone.

- `charm.bc_abstain`: a BC question the model answered instead of abstaining (Compliance Gap or
  Recognition Failure): chosen is an in-character abstention ending on the abstention option in
  the paper's answer format (Table 20: "Answer: <number>"), rejected is the model's reply.
- `charm.kv_answer`: a KV question, asked as the target who knows the answer: chosen is the right
  option, rejected the abstention, so that a fix keeps what a character does know.
- `charm.ba_yes`: a BA Yes-control question (stage ba~yes: something the character does know):
  chosen "Yes", rejected "No", for the same reason.
The no-role strategy plays no character and makes no pair; neither do the reordered controls.
The held-out strata are the region and the kind of persona: the historical roles (BA, BC, the Yes
control) and the targets KV is asked as, so that the held-out roles are spread over the regions.
"""

from __future__ import annotations

import re

from ...pairs import Draft, chat_prompt
from .data import is_abstain

NOTE = ("rolebound's own templates (unvalidated): an in-character abstention for an out-of-boundary BC "
        "question, and a plain statement of the right option for a KV question; both end in CHARM's answer "
        "line (Table 20)")
ABSTAIN_TEXT = {
    "temporal": "That is something from long after my own time. I have never known such a thing, so I "
                "cannot answer it.",
    "cross": "That belongs to a world other than my own. I have never known such a thing, so I cannot "
             "answer it.",
}
KNOW_TEXT = "I know this from my own life: {option}."
YES_TEXT = "Yes. I know it well from my own life."
NO_TEXT = "No. I have never known such a thing."
YES_STAGE = "ba~yes"
_CHOICE = re.compile(r"^(\d+)\. (.*)$", re.M)


def options_of(rec) -> dict[int, str]:
    """The numbered options of the question the record asked (its last user turn)."""
    last = [m for m in rec.prompt if (m["role"] if isinstance(m, dict) else m.role) == "user"][-1]
    text = last["content"] if isinstance(last, dict) else last.content
    return {int(n): t.strip() for n, t in _CHOICE.findall(text.split("Choices:", 1)[-1])}


def _answer(rec, n: int, text: str) -> str:
    return str(n) if rec.kind == "score" else f"{text}\nAnswer: {n}"


def make_pairs(records, manifest) -> tuple[list[Draft], dict[str, int]]:
    drafts, skipped = [], {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for r in records:
        if r.role != "model" or r.stage not in ("bc", "seq.bc", "kv", YES_STAGE):
            continue
        if r.error is not None:
            skip("failed call")
            continue
        if r.stage == YES_STAGE:
            character, region = str(r.meta.get("role") or ""), str(r.meta.get("region") or "")
            if not chat_prompt(r) or not character:
                skip("no chat prompt or no character")
            elif r.kind == "score":
                drafts.append(Draft(r, "Yes", "No", "charm.ba_yes", character, f"{region}/role"))
            else:
                drafts.append(Draft(r, YES_TEXT, NO_TEXT, "charm.ba_yes", character, f"{region}/role"))
            continue
        if not chat_prompt(r) or not isinstance(r.gold, int):
            skip("no chat prompt or no gold")
            continue
        opts = options_of(r)
        abstain = next((n for n, t in opts.items() if is_abstain(t)), None)
        character, region = str(r.meta.get("role") or ""), str(r.meta.get("region") or "")
        if abstain is None or not character:
            skip("no abstention option or no character")
            continue
        refuse = ABSTAIN_TEXT.get(str(r.meta.get("boundary")), ABSTAIN_TEXT["temporal"])
        if r.stage == "kv":
            right = opts.get(r.gold, "")
            drafts.append(Draft(r, _answer(r, r.gold, KNOW_TEXT.format(option=right)),
                                _answer(r, abstain, refuse), "charm.kv_answer", character, f"{region}/target"))
        elif not isinstance(r.parsed, int):
            skip("BC reply read as no answer")
        elif r.parsed == r.gold:
            skip("BC abstained (no failure)")
        else:
            drafts.append(Draft(r, _answer(r, r.gold, refuse), r.response or "", "charm.bc_abstain", character,
                                f"{region}/role"))
    return drafts, skipped
