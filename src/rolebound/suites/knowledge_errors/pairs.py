"""Knowledge-errors' preference pairs (`rolebound data pairs`), from a run's records alone.

`knowledge_errors.correction`: a final answer the judge (its newest round) marked as missing the
error. Chosen is an in-character reply built from the release's true memory (the record's
`correct_memory`): for a known error (KKE) a correction, for an unknown one (UKE) the character's
confusion with what it does remember; rejected is the model's reply.
"""

from __future__ import annotations

from ...pairs import Draft, chat_prompt
from ...rejudge import verdicts
from .metrics import ANSWER_STAGE, _is_item

NOTE = ("rolebound's own templates (unvalidated) around the release's true memory: a correction (KKE) or "
        "confusion (UKE) in the first person")
CHOSEN = {
    "KKE": "No, that is not how it was. {memory}",
    "UKE": "I am not sure what you mean; that is nothing I have ever known. What I do remember is this: {memory}",
}


def make_pairs(records, manifest) -> tuple[list[Draft], dict[str, int]]:
    drafts, skipped = [], {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    verdict = {(r.item_id, r.strategy, r.repeat): r.parsed for r in verdicts(records) if r.error is None}
    for r in records:
        if r.stage != ANSWER_STAGE or r.role != "model" or not _is_item(r):
            continue
        j = verdict.get((r.item_id, r.strategy, r.repeat))
        memory = str(r.meta.get("correct_memory") or "").strip()
        if r.error is not None or j is None:
            skip("failed or unjudged answer")
        elif j != "no":
            skip("judged as finding the error (or unreadable)")
        elif not chat_prompt(r) or not memory:
            skip("no chat prompt or no true memory")
        else:
            drafts.append(Draft(r, CHOSEN[r.meta["error_type"]].format(memory=memory), r.response or "",
                                "knowledge_errors.correction", str(r.meta.get("character") or "")))
    return drafts, skipped
