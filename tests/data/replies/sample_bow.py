"""Draw the Beyond One World part of the reply corpus (run once; the labels were added by hand).

    python tests/data/replies/sample_bow.py SRC_DIR OUT.jsonl

SRC_DIR is the release's annotated_results/anno1 folder. For each model it draws, with a fixed
seed, 24 canon and 16 dilemma records whose prompt lists its options in a form we can read back
(canon: "A) ..." lines; dilemma: "Option N: title" lines or the title lines right before a
"Consequence:" line), and writes them unlabelled. The options are copied from the prompt; the
rest of the prompt is not kept. A second draw (6 per model and kind, from the records left) takes
replies whose answer part says "neither", "both options", "third option", "middle ground" and
the like, so that replies committing to no option are well represented. A third draw (3 per model
and kind) was labelled only after the rules were written, then read once: the "blind" split. A reasoning block longer than 1,200 characters is shortened to
its first and last 400 characters (marked "[...]"): the rules only read what follows it.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

MODELS = ["claude", "gemini2", "gemini2_thinking", "r1", "v3"]
PER_MODEL = {"canon": 24, "dilemma": 16}
SEED = 12
HARD_PER_CELL = 6
BLIND_PER_CELL = 3   # a third draw, labelled after the rules were written and read once ("blind")
_HARD = re.compile(r"\b(neither|both options|combination of|third option|third path|not a simple|option C|middle ground|"
                   r"another way)\b", re.I)

_CANON = re.compile(r"(?:^|(?<=\s\s))\(?([A-H])[\).]\s+(.+?)(?=\s{2,}\(?[A-H][\).]\s|$)", re.M)
_OPTION = re.compile(r"(?m)^[ \t#*]*(Option\s*\d+|Choice\s*\d+|Option\s+[A-C]|Choice\s+[A-C])\**\s*[:.\-–]\s*\**(.+?)\**\s*$")
_BEFORE_CONSEQUENCE = re.compile(r"(?m)^[ \t#*]*([^\n:]{3,60}?)\**\s*:\s*\**([^\n]{3,200}?)\**\s*\n\s*\n?\s*\**Consequences?\b")


def canon_options(q: str) -> list[list[str]]:
    found = [[m.group(1), m.group(2).strip()] for m in _CANON.finditer(q)]
    letters = [f[0] for f in found]
    return found if letters and letters == [chr(65 + i) for i in range(len(letters))] else []


def dilemma_options(q: str) -> list[list[str]]:
    found = [[re.sub(r"\s+", " ", m.group(1)), m.group(2).strip()] for m in _OPTION.finditer(q)]
    if 2 <= len(found) <= 3:
        return found
    found = [[m.group(1).strip(), m.group(2).strip()] for m in _BEFORE_CONSEQUENCE.finditer(q)]
    return found if 2 <= len(found) <= 3 else []


def shorten_think(reply: str) -> tuple[str, bool]:
    m = re.search(r"<think>(.*?)</think>", reply, re.S)
    if not m or len(m.group(1)) <= 1200:
        return reply, False
    body = m.group(1)
    short = body[:400] + "\n[...]\n" + body[-400:]
    return reply[:m.start(1)] + short + reply[m.end(1):], True


def main(src: str, out: str) -> None:
    rng, rng_hard, rng_blind = random.Random(SEED), random.Random(SEED + 1), random.Random(SEED + 2)
    rows = []
    for model in MODELS:
        path = Path(src) / f"merge_{model}.jsonl"
        pool: dict[str, list] = {"canon": [], "dilemma": []}
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            r = json.loads(line)
            kind = r["source_file"].split("_")[0]
            if kind not in pool or not r.get("answers"):
                continue
            opts = canon_options(r["question"] or "") if kind == "canon" else dilemma_options(r["question"] or "")
            if opts:
                pool[kind].append((n, r, opts))
        for kind, k in PER_MODEL.items():
            first = rng.sample(pool[kind], k)
            taken = {n for n, _, _ in first}
            hard = [x for x in pool[kind] if x[0] not in taken and _HARD.search(x[1]["answers"].split("</think>")[-1])]
            second = rng_hard.sample(hard, min(HARD_PER_CELL, len(hard)))
            taken |= {n for n, _, _ in second}
            third = rng_blind.sample([x for x in pool[kind] if x[0] not in taken], BLIND_PER_CELL)
            blind = {n for n, _, _ in third}
            for n, r, opts in (sorted(first, key=lambda x: x[0]) + sorted(second, key=lambda x: x[0])
                               + sorted(third, key=lambda x: x[0])):
                reply, short = shorten_think(r["answers"])
                rows.append({"id": f"bow-{model}-{n}", "suite": "multiverse", "kind": kind, "model": model,
                             "source": "beyond_one_world", "draw": "blind" if n in blind else "hard" if n in {x[0] for x in second} else "random",
                             "provenance": {"file": f"annotated_results/anno1/{path.name}", "line": n,
                                            "source_file": r["source_file"], "CID": r["CID"]},
                             "options": opts, "reply": reply, "reply_shortened": short})
    Path(out).write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows), encoding="utf-8")



# -- issue 22: a second blind split ("blind2"), drawn before the issue-22 rules were written ----------
POLES = [("save(personal sacrifice)", "sacrifice(greater good)"), ("Hero", "Villain"),
         ("Duty", "Personal Desire"), ("The Ends Justify the Means", "Moral Code")]
BLIND2_PER_CELL = 6
BLIND2_SEED = 22


def blind2(src: str, corpus: str, out: str, seed: int = BLIND2_SEED, split: str = "blind2") -> None:
    """Per model 6 canon + 6 dilemma replies not already in the corpus, unlabelled. A dilemma's type
    is its position among the file's dilemma rows modulo 4 (the release's order); its options are
    the prompt's two poles, each with the scenario option of the same position (checked by hand
    against the scenario before labelling, `options_fixed_by_hand`)."""
    have = {(json.loads(x)["provenance"]["file"].split("/")[-1], json.loads(x)["provenance"]["line"])
            for x in Path(corpus).read_text(encoding="utf-8").splitlines() if x.strip()}
    rng, rows = random.Random(seed), []
    for model in MODELS:
        path = Path(src) / f"merge_{model}.jsonl"
        pool: dict[str, list] = {"canon": [], "dilemma": []}
        k_dilemma = -1
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            r = json.loads(line)
            kind = r["source_file"].split("_")[0]
            if kind == "dilemma":
                k_dilemma += 1
            if kind not in pool or not r.get("answers") or (path.name, n) in have:
                continue
            if kind == "canon":
                opts = canon_options(r["question"] or "")
            else:
                found = dilemma_options(r["question"] or "")
                poles = POLES[k_dilemma % 4]
                opts = [[chr(65 + i), f"{poles[i]} - {t}"] for i, (_, t) in enumerate(found)] if len(found) == 2 else []
            if opts:
                pool[kind].append((n, r, opts))
        for kind in ("canon", "dilemma"):
            for n, r, opts in sorted(rng.sample(pool[kind], BLIND2_PER_CELL), key=lambda x: x[0]):
                reply, short = shorten_think(r["answers"])
                rows.append({"id": f"bow-{model}-{n}", "suite": "multiverse", "kind": kind, "model": model,
                             "source": "beyond_one_world",
                             "provenance": {"file": f"annotated_results/anno1/{path.name}", "line": n,
                                            "source_file": r["source_file"], "CID": r["CID"], "draw": split},
                             "options": opts, "options_fixed_by_hand": False, "reply": reply,
                             "reply_shortened": short, "split": split})
    Path(out).write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows), encoding="utf-8")


# -- a third blind split ("blind3"), drawn the same way after the blind2 follow-up rules, seed 23 ---------
BLIND3_SEED = 23

# -- a fourth blind split ("blind4"), drawn the same way before the rules that followed blind3's, seed 24
BLIND4_SEED = 24

# -- a fifth blind split ("blind5", issue 39), drawn the same way before issue 39's rules, seed 25
BLIND5_SEED = 25

# -- a sixth blind split ("blind6", issue 39 section 3), drawn the same way after issue 39's rules froze, seed 26
BLIND6_SEED = 26

# -- a seventh blind split ("blind7", issue 39 section 3), drawn the same way after resolves_to_act froze, seed 27
BLIND7_SEED = 27

# -- an eighth blind split ("blind8", issue 51 item 7), drawn the same way before issue 51's rules, seed 28
BLIND8_SEED = 28

# -- a ninth blind split ("blind9", issue 51 item 7), drawn the same way after blind8's first read, seed 29
BLIND9_SEED = 29


if __name__ == "__main__":
    # sample_bow.py SRC OUT  |  sample_bow.py blind2|...|blind9 SRC CORPUS OUT
    if sys.argv[1] == "blind2":
        blind2(*sys.argv[2:5])
    elif sys.argv[1] == "blind3":
        blind2(*sys.argv[2:5], seed=BLIND3_SEED, split="blind3")
    elif sys.argv[1] == "blind4":
        blind2(*sys.argv[2:5], seed=BLIND4_SEED, split="blind4")
    elif sys.argv[1] == "blind5":
        blind2(*sys.argv[2:5], seed=BLIND5_SEED, split="blind5")
    elif sys.argv[1] == "blind6":
        blind2(*sys.argv[2:5], seed=BLIND6_SEED, split="blind6")
    elif sys.argv[1] == "blind7":
        blind2(*sys.argv[2:5], seed=BLIND7_SEED, split="blind7")
    elif sys.argv[1] == "blind8":
        blind2(*sys.argv[2:5], seed=BLIND8_SEED, split="blind8")
    elif sys.argv[1] == "blind9":
        blind2(*sys.argv[2:5], seed=BLIND9_SEED, split="blind9")
    else:
        main(*sys.argv[1:3])
