"""Answer-extraction figures on the labelled reply corpus (tests/data/replies/).

    python bench/extraction.py            # figures per suite, kind and model, dev and held-out
    python bench/extraction.py --show     # also every reply read wrongly or not read
    python bench/extraction.py --split blind5 --show   # one split only (a blind split's figure)

recall: committed replies (label is an option / Yes / No) read as their label.
wrong: committed replies read as something else. false commit: a "none" reply read as a value.
No model calls; the corpus holds the replies.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rolebound.scoring.choice import choice_reading, yes_no_reading  # noqa: E402

CORPUS = ROOT / "tests/data/replies"


def load(corpus: Path = CORPUS) -> list[dict]:
    rows = []
    for f in sorted(corpus.glob("*.jsonl")):
        rows += [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    return rows


def read(row: dict):
    if "options" in row:
        return choice_reading(row["reply"], [tuple(o) for o in row["options"]])
    return yes_no_reading(row["reply"], row.get("question"))


# The multiverse parser on main before issue 12 (removed from the package since), kept here
# unchanged so that --baseline still shows what it read.
_OLD_MD = re.compile(r"[*_`~#]+")
_OLD_AFTER = r"(?![A-Za-z0-9'’])"
_OLD_DECISION = re.compile(
    r"(?i:\b(?:final\s+answer|answer|my\s+(?:final\s+)?(?:choice|decision|pick)|i\s+(?:would\s+|will\s+|'ll\s+|must\s+|have\s+to\s+)?"
    r"(?:choose|chose|pick|select|go\s+with|take|opt\s+for)|choosing|picking|going\s+with|selecting)\b)"
    r"\s*(?i:is|would\s+be|will\s+be|has\s+to\s+be)?\s*[:=\-]?\s*(?i:to\s+)?(?i:option|choice)?\s*[\(\[]?([A-Z])" + _OLD_AFTER)
_OLD_MENTION = re.compile(r"(?i:\b(?:option|choice))\s*[\(\[]?([A-Z])" + _OLD_AFTER)
_OLD_LEADING = re.compile(r"^\s*[\(\[]?([A-Z])(?:[\)\].:]|\s*$)")


def old_parse_choice(text: str | None, letters: str) -> str | None:
    if not text:
        return None
    clean = _OLD_MD.sub("", text)
    found = [m.group(1) for m in _OLD_DECISION.finditer(clean) if m.group(1) in letters]
    if found:
        return found[-1]
    m = _OLD_LEADING.match(clean)
    if m and m.group(1) in letters and not (m.group(1) == "A" and m.group(0).rstrip().endswith(":")):
        return m.group(1)
    named = {m.group(1) for m in _OLD_MENTION.finditer(clean) if m.group(1) in letters}
    return named.pop() if len(named) == 1 else None


def baseline(row: dict):
    """What the parsers on main before issue 12 read (multiverse parse_choice, CHARM
    parse_answer_number and parse_yes_no), as an option index / "Yes" / "No" / None."""
    from rolebound.scoring.parsers import INVALID, parse_yes_no
    from rolebound.suites.charm.prompts import parse_answer_number
    if "options" not in row:
        got = parse_yes_no(row["reply"])
        return None if got == INVALID else got
    labels = [str(o[0]).strip() for o in row["options"]]
    if all(lb.isdigit() for lb in labels):
        got = parse_answer_number(row["reply"], len(labels))
        return None if got == INVALID else labels.index(str(got))
    letters = "".join(lb if len(lb) == 1 and lb.isalpha() else chr(65 + i) for i, lb in enumerate(labels))
    got = old_parse_choice(row["reply"], letters)
    return None if got is None else letters.index(got)


class _Value:
    def __init__(self, value):
        self.value = value


def tally(rows: list[dict], reader=None) -> dict:
    t = {"n": 0, "committed": 0, "read": 0, "wrong": 0, "none": 0, "false_commit": 0}
    for r in rows:
        got = (reader or read)(r).value
        t["n"] += 1
        if r["label"] is None:
            t["none"] += 1
            t["false_commit"] += got is not None
        else:
            t["committed"] += 1
            t["read"] += got == r["label"]
            t["wrong"] += got is not None and got != r["label"]
    return t


def fmt(name: str, t: dict) -> str:
    rec = t["read"] / t["committed"] if t["committed"] else float("nan")
    fc = t["false_commit"] / t["none"] if t["none"] else float("nan")
    return (f"{name:<34} {t['n']:>4} {t['committed']:>5} {rec:>7.3f} {t['wrong']:>6} {t['none']:>5} "
            f"{t['false_commit']:>4} ({fc:.3f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--show", action="store_true", help="print the replies read wrongly or not read")
    ap.add_argument("--baseline", action="store_true", help="the same figures for the parsers on main before issue 12")
    ap.add_argument("--split", help="only the replies of this split (dev, heldout, blind, blind2, ...)")
    args = ap.parse_args(argv)
    using = (lambda r: _Value(baseline(r))) if args.baseline else None
    rows = load()
    if args.split:
        rows = [r for r in rows if r.get("split", "dev") == args.split]
        if not rows:
            print(f"bench/extraction.py: no reply in split {args.split!r}", file=sys.stderr)
            return 2
    print(f"{'group':<34} {'n':>4} {'commit':>5} {'recall':>7} {'wrong':>6} {'none':>5} false commits")
    groups: dict[str, list] = defaultdict(list)
    for r in rows:
        reader = "choice" if "options" in r else "yes_no"
        groups["all"].append(r)
        groups[f"split {r.get('split', 'dev')}"].append(r)
        groups[f"suite {r['suite']} / {reader}"].append(r)
        groups[f"model {r['model']} / {reader}"].append(r)
        if r["suite"] == "multiverse":
            groups[f"multiverse {r['kind']}"].append(r)
        if r.get("source") == "written":
            groups["source written"].append(r)
        if r["suite"] == "charm" and "options" in r:
            groups[f"charm {r['kind']}"].append(r)
    for name in sorted(groups, key=lambda k: (k != "all", not k.startswith("split"), k)):
        print(fmt(name, tally(groups[name], using)))
    if args.show:
        for r in rows:
            rd = read(r)
            if rd.value != r["label"]:
                kind = "FALSE COMMIT" if r["label"] is None else ("WRONG" if rd.value is not None else "missed")
                print(f"\n## {kind}: {r['id']} label={r['label']} read={rd.value} rule={rd.rule} | {r.get('note', '')}")
                print(f"   span: {rd.span!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
