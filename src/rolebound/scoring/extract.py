"""Extractors: a parse callable that suites hand to ctx.chat, and that a record can rebuild.

An Extractor reads a reply with scoring.choice and returns a Reading whose value is in the form the
suite scores (an option letter, a 1-based number, "Yes"/"No", "yes"/"no"). The runner stores the
reading's rule and span in the record's meta["extraction"] and the extractor's spec in
meta["extract"], so `rolebound report` can read the stored replies again (reextract) without a
model call.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterable

from ..records import INVALID, Reading

KINDS = ("choice", "yes_no", "yes_no_strict")
# Kinds a suite adds (register_kind): a reader of its own format, e.g. a judge's verdict line, called
# with the reply and the Extractor (its options, form and question: what a format may need).
_READERS: dict[str, Callable[[str | None, "Extractor"], Reading]] = {}


@dataclass(frozen=True)
class Extractor:
    kind: str                                   # one of KINDS
    options: tuple[tuple[str, str], ...] = ()   # choice: (label as the prompt shows it, text)
    form: str = "index"                         # choice: "index" (0-based), "number" (1-based), "label"
    question: str | None = None                 # yes_no: the question, when the prompt had one

    def __call__(self, text: str | None) -> Reading:
        from .choice import choice_reading, yes_no_reading, yes_no_strict   # generated replies only

        if self.kind == "choice":
            r = choice_reading(text, list(self.options))
            if r.value is None:
                return r
            v = {"index": r.value, "number": r.value + 1, "label": self.options[r.value][0]}[self.form]
            return replace(r, value=v)
        if self.kind == "yes_no":
            return yes_no_reading(text, self.question)
        if self.kind == "yes_no_strict":
            return yes_no_strict(text)
        if self.kind in _READERS:
            return _READERS[self.kind](text, self)
        raise ValueError(f"unknown extractor kind {self.kind!r}")

    def spec(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.options:
            out["options"] = [list(o) for o in self.options]
            out["form"] = self.form
        if self.question:
            out["question"] = self.question
        return out

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "Extractor":
        return cls(kind=spec["kind"], options=tuple(tuple(o) for o in spec.get("options") or ()),
                   form=spec.get("form", "index"), question=spec.get("question"))


def choice(options: Iterable[tuple[str, str]], form: str = "index") -> Extractor:
    return Extractor("choice", tuple((str(a), str(b)) for a, b in options), form)


def yes_no(question: str | None = None, strict: bool = False) -> Extractor:
    return Extractor("yes_no_strict" if strict else "yes_no", question=question)


def register_kind(kind: str, read: Callable[[str | None, Extractor], Reading]) -> None:
    """Let Extractor(kind, options, form, question) read replies with `read(text, extractor)` (a suite's
    own format); its spec keeps the kind and options, so `rolebound report` reads stored replies
    again once the suite is imported."""
    if kind in KINDS:
        raise ValueError(f"extractor kind {kind!r} is built in")
    _READERS[kind] = read


# -- reading stored replies again ------------------------------------------------------------------
def reextract(run_dir: str | Path, rebuild=None) -> tuple[int, int]:
    """Read every stored reply whose record carries an extractor spec again with today's rules;
    append the records whose reading changed (records.jsonl: the last record per call wins).
    `rebuild(record) -> Extractor | None` (a suite's extractor_for) covers records written before
    specs were stored. Returns (replies read, readings changed)."""
    from ..store import RunDir, load_records

    rd = RunDir(run_dir)
    records = load_records(run_dir)
    changed, n = [], 0
    for rec in records:
        if rec.error or rec.kind == "score" or rec.response is None or rec.role == "extractor":
            continue
        spec = (rec.meta or {}).get("extract")
        ex = Extractor.from_spec(spec) if spec else (rebuild(rec) if rebuild else None)
        if ex is None:
            continue
        n += 1
        r = ex(rec.response)
        value = INVALID if r.value is None else r.value
        if value != rec.parsed or (rec.meta.get("extraction") or {}).get("rule") != r.rule:
            new = rec.model_copy(deep=True)
            new.parsed = value
            new.meta["extraction"] = r.as_meta()
            new.meta["extract"] = ex.spec()
            if rec.gold is not None and rec.correct is not None and not rec.meta.get("checked"):
                new.correct = value != INVALID and value == rec.gold
            changed.append((rec.parsed != value, new))
    if changed:
        rd.lock()
        try:
            rd.open_for_append()
            for _, new in changed:
                rd.append(new)
        finally:
            rd.close()
            rd.unlock()
    return n, sum(1 for diff, _ in changed if diff)


def rule_counts(records: Iterable) -> Counter:
    """(stage, rule) -> how many readings that rule made."""
    c: Counter = Counter()
    for r in records:
        ex = (r.meta or {}).get("extraction")
        if ex:
            c[(r.stage, ex["rule"])] += 1
    return c
