"""Import the public Beyond One World files into the multiverse suite's format.

    rolebound data import beyond-one-world ../shared/data/external/Beyond_One_World --out bow.json
    rolebound run multiverse --data bow.json

What the public files need (their SOURCE.md):
- names are not normalised (curly/straight quotes, extra spaces), so heroes and versions are keyed
  on UID and CID; the hero's display name is its versions' most common normalised name;
- options carry their own letters ("A) ", sometimes "A. " or double spaces): the letters are
  stripped and re-rendered by the suite;
- 44 canon items do not have exactly four options. Rule: strings without a letter that come
  *before* option A are a sub-question when they end with "?" or are longer than 40 characters
  (joined to the question) and a source label otherwise (dropped); unlettered strings after the
  last option are labels (dropped); a lettered option holding the next option inline ("A. ... B.
  ...") is split. The item is kept when this leaves exactly A, B, C, D in order, else skipped.
  Every such item is listed in the output's `import_report` (and by `rolebound data stats`);
- trailing "****" marks on an option (they give the answer away) are removed and counted;
- character_dilemmas.json has no gold choice: every dilemma is imported with `canonical: null`.
  The only dilemma labels in the release (dilemma_gt*.csv, annotated_results/) belong to an
  earlier 56-version authoring set with different, free-text dilemmas and pdb ids for CIDs, so
  they do not map onto these 1,080 items.
"""

from __future__ import annotations

import ast
import csv
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ...records import ABCD
from ...errors import InputError
from ...importers import writes
from ...io import check_file, json_loads

CANON_FILE = "characters_canon_events.json"
DILEMMA_FILE = "character_dilemmas.json"
PROFILE_FILE = "heros_profile_aa.csv"
STAGES = {"Childhood": ("childhood", None), "Pre-Hero": ("pre-hero", None), "Hero1": ("hero", 1),
          "Hero2": ("hero", 2), "Hero3": ("hero", 3)}
DILEMMA_TYPES = {
    "Save the One You Love vs. Save the Greater Good": "save-one-vs-greater-good",
    "Hero or Villain": "hero-or-villain",
    "Duty vs. Personal Desire": "duty-vs-desire",
    "The Ends Justify the Means vs. Moral Code": "ends-vs-moral-code",
}
SOURCE_NOTE = "Beyond One World public release (github.com/Augustus2011/Beyond_One_World), imported as published"
_LETTERED = re.compile(r"^\s*\(?([A-Da-d])\s*[\)\.:]\s*(.*)$", re.DOTALL)
_MARK = re.compile(r"\s*\*{2,}\s*$")


def norm_name(name: str) -> str:
    s = str(name).replace("\u201c", '"').replace("\u201d", '"').replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", s).strip()


def parse_source(value: Any) -> tuple[list[str], bool]:
    """(parts, repaired). Lists pass through; a stringified list is read literally, or, where its
    quoting is broken ('Marvel"s ...'), split on its separators."""
    if isinstance(value, list):
        return [str(x).strip() for x in value if str(x).strip()], False
    s = str(value or "").strip()
    try:
        got = ast.literal_eval(s)
        if isinstance(got, list):
            return [str(x).strip() for x in got if str(x).strip()], False
    except (ValueError, SyntaxError):
        pass
    inner = s[1:-1] if s.startswith("[") and s.endswith("]") else s
    parts = [re.sub(r"(\w)[\"'](\w)", r"\1'\2", p.strip().strip("\"'").strip())
             for p in re.split(r"[\"']\s*,\s*[\"']", inner)]
    return [p for p in parts if p], True


def parse_attributes(text: str) -> dict[str, str]:
    """'Age:53,\\nPower:...,\\nMbti:ENTP,...' -> {'age': '53', 'power': ..., 'mbti': ...}."""
    out: dict[str, str] = {}
    last = None
    for line in str(text or "").splitlines():
        line = line.strip().rstrip(",").strip()
        if not line:
            continue
        key, sep, val = line.partition(":")
        k = key.strip().lower()
        if sep and k in ("age", "power", "mbti", "race", "enneagram"):
            last = k
            val = val.strip().rstrip(".").strip()
            if val and val != "-":
                out[k] = val
        elif last and last in out:
            out[last] += " " + line
    return out


def normalise_options(question: str, options: list[str]) -> tuple[str, list[str] | None, str]:
    """(question, four option texts or None, what was done). See the module docstring."""
    lettered: list[tuple[str, str]] = []
    before: list[str] = []
    notes = []
    for raw in options:
        s = str(raw)
        m = _LETTERED.match(s)
        if m:
            lettered.append((m.group(1).upper(), m.group(2)))
        elif not lettered:
            before.append(s.strip())
        else:
            notes.append(f"dropped trailing label {s.strip()[:40]!r}")
    # "A. first B. second" in one string: split at the next expected letter
    split: list[tuple[str, str]] = []
    for letter, text in lettered:
        while True:
            nxt = chr(ord(letter) + 1)
            m = re.search(rf"(?<=\s){nxt}[\.\)]\s+", text) if nxt <= "D" else None
            if not m:
                break
            split.append((letter, text[:m.start()].strip()))
            notes.append(f"split option {letter} at inline {nxt}")
            letter, text = nxt, text[m.end():]
        split.append((letter, text))
    for s in before:
        if not s:
            continue
        if s.rstrip("\"'").endswith("?") or len(s) > 40:
            question = f"{question.strip()}\n{s}"
            notes.append("joined a sub-question to the question")
        else:
            notes.append(f"dropped label {s[:40]!r}")
    if [L for L, _ in split] != list(ABCD):
        return question, None, "; ".join(notes + [f"letters {''.join(L for L, _ in split) or 'none'}, not ABCD"])
    texts = [re.sub(r"\s+", " ", t).strip() for _, t in split]
    if any(not t for t in texts):
        return question, None, "; ".join(notes + ["an empty option"])
    return question, texts, "; ".join(notes)


def _load_json(path: Path) -> Any:
    if not path.exists():
        raise InputError("file not found (expected the Beyond One World release folder)", file=str(path))
    try:
        return json_loads(check_file(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=str(path), line=exc.lineno) from None


def _profiles(folder: Path) -> dict[int, dict[str, Any]]:
    path = folder / PROFILE_FILE
    if not path.exists():
        return {}
    with check_file(path).open(encoding="utf-8-sig", newline="") as fh:
        rows = list(csv.DictReader(fh))
    out = {}
    for row in rows:
        try:
            out[int(row["CID"])] = row
        except (KeyError, ValueError):
            continue
    return out


def _canon_questions(questions: list, cid: int, stage: str, phase: str, part, counts: Counter,
                     irregular: list) -> list[dict[str, Any]]:
    """One version's canon questions of one life stage; the irregular ones noted or skipped."""
    canon = []
    for qi, q in enumerate(questions):
        counts["canon questions in the release"] += 1
        qid = f"cid-{cid}-{stage.lower()}-{qi + 1}"
        raw_opts = list(q.get("options") or [])
        question, opts, how = normalise_options(str(q.get("question", "")), raw_opts)
        answer = str(q.get("correct_answer", "")).strip().upper()
        if opts is not None:
            marked = [o for o in opts if _MARK.search(o)]
            if marked:
                counts["answer marks '****' removed"] += len(marked)
                opts = [_MARK.sub("", o) for o in opts]
                how = (how + "; " if how else "") + "removed a '****' mark that gave the answer away"
            if len({o.lower() for o in opts}) != 4:
                opts, how = None, (how + "; " if how else "") + "duplicate options"
        if answer not in ("A", "B", "C", "D"):
            opts, how = None, (how + "; " if how else "") + f"answer {answer!r} is not A-D"
        if len(raw_opts) != 4 or opts is None or how:
            irregular.append({"id": qid, "options given": len(raw_opts),
                              "action": "kept" if opts is not None else "skipped", "why": how or "-"})
        if opts is None:
            counts["canon skipped"] += 1
            continue
        counts["canon imported"] += 1
        canon.append({"id": qid, "version": f"cid-{cid}", "phase": phase, "part": part,
                      "question": question.strip(), "options": opts, "answer": answer,
                      "source": f"{SOURCE_NOTE}; {CANON_FILE} CID {cid} {stage} #{qi + 1}",
                      "validated": False})
    return canon


def _dilemmas(dil_raw: list, known: set[str], counts: Counter) -> list[dict[str, Any]]:
    """The release's dilemmas of known versions and types (no gold choice: the release has none)."""
    dilemmas: list[dict[str, Any]] = []
    for di, d in enumerate(dil_raw):
        counts["dilemmas in the release"] += 1
        kind, _, n = str(d.get("dilemma_type", "")).rpartition("_")
        conflict = DILEMMA_TYPES.get(kind.strip())
        vid = f"cid-{d.get('CID')}"
        fields = [d.get(k) for k in ("situation", "choice_A", "consequence_A", "choice_B", "consequence_B")]
        if conflict is None or vid not in known or not all(isinstance(f, str) and f.strip() for f in fields):
            counts["dilemmas skipped (unknown type or version, or an empty field)"] += 1
            continue
        it = d.get("iteration") if isinstance(d.get("iteration"), int) else (int(n) if n.isdigit() else None)
        dilemmas.append({"id": f"{vid}-{conflict}-{it if it is not None else di}", "version": vid,
                         "conflict": conflict, "situation": fields[0].strip(),
                         "choices": [{"text": fields[1].strip(), "consequence": fields[2].strip()},
                                     {"text": fields[3].strip(), "consequence": fields[4].strip()}],
                         "canonical": None, "iteration": it,
                         "source": f"{SOURCE_NOTE}; {DILEMMA_FILE} #{di + 1}", "validated": False})
        counts["dilemmas imported (no gold choice)"] += 1
    return dilemmas


def convert(folder: str | Path) -> dict[str, Any]:
    """The suite's document (heroes, canon, dilemmas, import_report) from the release folder."""
    folder = Path(folder)
    if folder.is_file():
        folder = folder.parent
    canon_raw = _load_json(folder / CANON_FILE)
    dil_raw = _load_json(folder / DILEMMA_FILE)
    profiles = _profiles(folder)
    counts: Counter = Counter()
    irregular: list[dict[str, Any]] = []

    heroes: dict[int, dict[str, Any]] = {}
    names: dict[int, Counter] = {}
    canon: list[dict[str, Any]] = []
    for vi, entry in enumerate(canon_raw):
        try:
            uid, cid = int(entry["UID"]), int(entry["CID"])
        except (KeyError, TypeError, ValueError):
            raise InputError("a version without integer UID/CID", file=str(folder / CANON_FILE),
                             field=f"[{vi}]") from None
        source, repaired = parse_source(entry.get("Source"))
        counts["version sources repaired"] += repaired
        name = norm_name(entry.get("Name", ""))
        names.setdefault(uid, Counter())[name] += 1
        prof = profiles.get(cid, {})
        version = {"id": f"cid-{cid}", "name": name or f"CID {cid}", "universe": source[0] if source else "unknown",
                   "work": ", ".join(source[1:]) or None, "attributes": parse_attributes(prof.get("Attributes", "")),
                   "source": f"{SOURCE_NOTE}; UID {uid}, CID {cid}", "validated": False}
        heroes.setdefault(uid, {"id": f"uid-{uid}", "versions": []})["versions"].append(version)
        for stage, questions in (entry.get("Events") or {}).items():
            if stage not in STAGES:
                counts[f"unknown stage '{stage}' skipped"] += len(questions)
                continue
            phase, part = STAGES[stage]
            canon += _canon_questions(questions, cid, stage, phase, part, counts, irregular)
    for uid, hero in heroes.items():
        hero["name"] = names[uid].most_common(1)[0][0] if names.get(uid) else f"UID {uid}"
        hero["source"] = f"{SOURCE_NOTE}; UID {uid}"
    counts["distinct raw version names"] = len({str(e.get("Name")) for e in canon_raw})
    counts["distinct normalised version names"] = len({n for c in names.values() for n in c})

    known = {f"cid-{int(e['CID'])}" for e in canon_raw}
    dilemmas = _dilemmas(dil_raw, known, counts)
    counts["heroes"] = len(heroes)
    counts["versions"] = sum(len(h["versions"]) for h in heroes.values())
    report = {"source": str(folder), "counts": dict(counts), "irregular": irregular,
              "rule": "canon items without exactly four lettered options: see rolebound/suites/multiverse/importers.py"}
    return {"heroes": [heroes[k] for k in sorted(heroes)], "canon": canon, "dilemmas": dilemmas,
            "import_report": report}


@writes(".json", kind="JSON")
def import_beyond_one_world(src: str, out: str) -> str:
    doc = convert(src)
    Path(out).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    c = doc["import_report"]["counts"]
    lines = [f"wrote {out}: {c['heroes']} heroes, {c['versions']} versions, {len(doc['canon'])} canon questions "
             f"(of {c.get('canon questions in the release', 0)}), {len(doc['dilemmas'])} dilemmas "
             f"(of {c.get('dilemmas in the release', 0)}, none with a gold choice)"]
    lines += [f"  {k}: {v}" for k, v in c.items()]
    irr = doc["import_report"]["irregular"]
    lines.append(f"{len(irr)} canon items needed attention:")
    lines += [f"  {r['id']}: {r['options given']} options given -> {r['action']} ({r['why']})" for r in irr]
    return "\n".join(lines)


IMPORTERS = {"beyond-one-world": (import_beyond_one_world,
                                  "Beyond One World release folder -> multiverse suite data (JSON)")}
