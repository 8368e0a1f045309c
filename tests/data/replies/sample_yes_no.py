"""Draw the yes/no part of the reply corpus (run once; the labels were added by hand).

    python tests/data/replies/sample_yes_no.py EXTERNAL_DIR OUT.jsonl

EXTERNAL_DIR holds timechara/ and trainable-agents/ as /work/shared/data/external does.
- TimeChara few-shot demos: yes/no questions ("Were you present when ...?") answered in character
  at a point in time, many of them boundary answers ("I don't know what you are talking about").
  Written by the TimeChara authors. Distinct replies only; 36 drawn.
- Character-LLM interview replies (alpaca-7b, vicuna-7b, chatgpt, Character-LLM "sft") to the
  interview questions that ask yes or no ("Did you ...?", "Have you ever ...?"; not "A or B?");
  24 drawn.
Only the question and the reply are kept.
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

SEED = 12
_YN = re.compile(r"(Do|Did|Have|Has|Are|Is|Were|Was|Would|Will)\b")


def timechara(root: Path, rng: random.Random, k: int) -> list[dict]:
    seen, pool = set(), []
    for f in sorted((root / "timechara/methods/few_shot").glob("*.json")):
        for key, value in json.loads(f.read_text(encoding="utf-8")).items():
            for i, demo in enumerate(value.split("\n***\n")):
                m = re.match(r"Question: (.*?)\nResponse: (.*)", demo.strip(), re.S)
                if m and _YN.match(m.group(1)) and m.group(2) not in seen:
                    seen.add(m.group(2))
                    pool.append({"provenance": {"file": f"timechara/methods/few_shot/{f.name}", "key": key, "demo": i},
                                 "model": "timechara-authors", "question": m.group(1), "reply": m.group(2).strip()})
    return rng.sample(pool, k)


def character_llm(root: Path, rng: random.Random, k: int) -> list[dict]:
    pool = []
    base = root / "trainable-agents/data/gen_results/interview_single"
    for d in sorted(base.iterdir()):
        char, model = d.name.replace("_result", "").split("_", 1)
        for f in sorted(d.glob("*.json")):
            for i, r in enumerate(json.loads(f.read_text(encoding="utf-8"))):
                reply = " ".join(x.get("content", "") for x in r.get("reply") or [] if isinstance(x, dict)).strip()
                if _YN.match(r["question"]) and " or " not in r["question"] and reply:
                    pool.append({"provenance": {"file": str(f.relative_to(root)), "index": i, "character": char},
                                 "model": model, "question": r["question"], "reply": reply})
    return rng.sample(pool, k)


def main(src: str, out: str) -> None:
    root, rng = Path(src), random.Random(SEED)
    rows = []
    for name, items in (("timechara", timechara(root, rng, 36)), ("character_llm", character_llm(root, rng, 24))):
        for n, x in enumerate(items):
            rows.append({"id": f"{name}-{n}", "suite": "charm", "kind": "yes_no", "source": name, **x})
    Path(out).write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in rows), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:3])
