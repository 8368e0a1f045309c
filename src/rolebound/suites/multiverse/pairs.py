"""Multiverse's preference pairs (`rolebound data pairs`), from a run's records alone.

`multiverse.canon`: a canon question a version answered wrongly about its own story (not the
cross-version probes, whose gold is another version's): chosen is the canon option, rejected the
model's reply. Dilemmas have no right answer and make no pair. The held-out split keeps whole
heroes (every version of one), so that a fix is measured on heroes it never saw.
"""

from __future__ import annotations

import re

from ...pairs import Draft, chat_prompt
from ...records import INVALID

NOTE = "rolebound's own template (unvalidated): the canon option, as the question lists it"
_OPTION = re.compile(r"^([A-Z])\) (.*)$", re.M)


def _option_text(rec, letter: str) -> str:
    last = [m for m in rec.prompt if (m["role"] if isinstance(m, dict) else m.role) == "user"][-1]
    text = last["content"] if isinstance(last, dict) else last.content
    found = dict(_OPTION.findall(text))
    return found.get(letter, "").replace("<question/>", "").strip()


def make_pairs(records, manifest) -> tuple[list[Draft], dict[str, int]]:
    drafts, skipped = [], {}

    def skip(why: str) -> None:
        skipped[why] = skipped.get(why, 0) + 1

    for r in records:
        if r.role != "model" or r.meta.get("task") != "canon" or "~" in r.stage:
            continue
        if r.error is not None or r.meta.get("cross") or not isinstance(r.gold, str):
            skip("failed call, cross-version probe or no gold")
        elif r.parsed in (None, INVALID) or r.correct:
            skip("right, or read as no answer")
        elif not chat_prompt(r):
            skip("no chat prompt")
        else:
            gold = r.gold.strip()
            if r.kind == "score":     # the continuation as scored (" C" after "Answer:")
                chosen = next((c for c in r.continuations or [] if c.strip() == gold), f" {gold}")
            else:
                chosen = f"{gold}) {_option_text(r, gold)}"
            drafts.append(Draft(r, chosen, r.response or "", "multiverse.canon", str(r.meta.get("hero") or "")))
    return drafts, skipped
