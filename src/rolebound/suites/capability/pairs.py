"""Capability's preference pairs (`rolebound data pairs`), from a run's records alone.

- `capability.above_abstain`: a question above the role's ceiling that the model solved (the
  leak the paper's A counts): chosen is an in-role abstention in the paper's boxed format
  (`\\boxed{IDK}`, C.5), rejected the model's reply.
- `capability.within_answer`: a question at or below the ceiling: chosen is the right boxed
  answer, rejected the abstention, so that a fix does not teach the role to refuse what it knows.
The no-role baseline plays no role; the raw-completion variants (injection, injection-syllabus)
have no chat prompt for TRL's conversational format: neither makes a pair.
"""

from __future__ import annotations

from ...pairs import Draft, chat_prompt
from .metrics import answer_records

NOTE = ("rolebound's own templates (unvalidated): an in-role abstention and a plain right answer, each "
        "ending in the paper's boxed answer")
ABSTAIN_TEXT = "This is beyond what I have learned so far, so I cannot solve it.\n\\boxed{IDK}"
ANSWER_TEXT = "I have learned how to do this one.\n\\boxed{{{gold}}}"


def make_pairs(records, manifest) -> tuple[list[Draft], dict[str, int]]:
    drafts, skipped = [], {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for r in answer_records(records):
        role = r.meta.get("role")
        if not role:
            skip("no role (baseline)")
            continue
        if not chat_prompt(r) or r.kind != "chat" or not isinstance(r.gold, str):
            skip("no chat prompt (raw completion) or no gold")
            continue
        if r.meta.get("in_role"):
            drafts.append(Draft(r, ANSWER_TEXT.format(gold=r.gold), ABSTAIN_TEXT, "capability.within_answer",
                                str(role)))
        elif r.correct:
            drafts.append(Draft(r, ABSTAIN_TEXT, r.response or "", "capability.above_abstain", str(role)))
        else:
            skip("above the ceiling, not solved (no leak)")
    return drafts, skipped
