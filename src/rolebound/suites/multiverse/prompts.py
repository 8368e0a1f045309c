"""Beyond One World prompts and the strict parsers that read the replies.

The task prompts follow the paper's base structure (Section 4.1.1: name, lore, formatted question)
in the wording of the authors' release (generate_answer.py): the persona line, the question in
<question> tags (their closing tag is "<question/>", kept), "Let's think step by step." for CoT,
and one fixed question line per conflict type for dilemmas. The segmenter and judge prompts are
the ones of their reasoning analysis (Section 4.2, Figure 2; scoring.py and the think/act
generator). Anything a parser cannot read is INVALID: counted, never guessed.
"""

from __future__ import annotations

import re
from typing import Any

from ...records import ABCD as LETTERS, INVALID

# Section 3.2.2 conflict types: (first pole = choice A, second pole = choice B, the paper's name).
CONFLICTS: dict[str, tuple[str, str, str]] = {
    "save-one-vs-greater-good": ("Save the One You Love", "Save the Greater Good",
                                 "Save the One You Love vs. Save the Greater Good"),
    "hero-or-villain": ("Hero", "Villain", "Hero or Villain"),
    "duty-vs-desire": ("Duty", "Personal Desire", "Duty vs. Personal Desire"),
    "ends-vs-moral-code": ("The Ends Justify the Means", "Moral Code",
                           "The Ends Justify the Means vs. Moral Code"),
}

# The fixed question of each dilemma type (authors' release, generate_answer.py).
DILEMMA_QUESTION = {
    "save-one-vs-greater-good": "What will you choose between A) Save the One You Love vs B) Save the Greater Good",
    "hero-or-villain": "About morality and identity crisis, what will you choose between A) Hero vs B) Villain",
    "duty-vs-desire": "What will you choose between A) Duty vs. B) Personal Desire",
    "ends-vs-moral-code": "What will you choose between A) The Ends Justify the Means vs. B) Moral Code",
}

PERSONA = "You are playing the role of {name}, act and think as {name}, from {lore}"
CANON = "{persona}\n <question> {question} <question/>"
CANON_COT = "{persona}\n <question> {question}, Let's think step by step.<question/>"
DILEMMA = "{persona}, the situation is {dilemma}\n <question> {detail} <question/>"
DILEMMA_COT = "{persona}, the situation is {dilemma}\n <question> {detail}, Let's think step by step.<question/>"

# Log-likelihood reading of the chosen letter (our addition: the paper does not say how answers
# were read). Direct: the assistant turn opens with "Answer:"; CoT: the reasoning, then "Answer:".
ANSWER_PREFIX = "Answer:"

# Section 4.2: GPT-4o-mini structures the response into <thinking>/<acting> spans.
SEGMENT = ("Your task is to **separate** internal thought(\"thinking\") from external behavior (\"acting\") "
           "in the text response.\nWrap the internal thought process in `<thinking>...</thinking>` and the "
           "final response or action in `<acting>...</acting>`.\nNow process text response: {response}")

# Section 4.2: the judge scores thinking and acting 0-5, conditioned on the character's attributes.
JUDGE = ("Help me scoring character role-playing, score point between 0-5 , score have two type: "
         "thinking(does thinking response look like reference character) ,acting(does response acting "
         "like the character reference), the output must be this format: think_score,act_score example 3,2,"
         "reference :\nCharacter: {name}\nSource: {lore}\nAttributes: {attributes}\n\n"
         "Response to evaluate:\n{response}")

# judge_scoring=logprob (our addition): "t,a" decoded greedily over these digits, one token each
# (all 36 pairs scored as whole strings took 59 s per 16 judge prompts on the bundled model, a
# generated reply 2.3 s, the two digit steps 3 s).
JUDGE_DIGITS = [str(i) for i in range(6)]

TEMPLATES = {"persona": PERSONA, "canon": CANON, "canon_cot": CANON_COT, "dilemma": DILEMMA,
             "dilemma_cot": DILEMMA_COT, "answer_prefix": ANSWER_PREFIX, "segment": SEGMENT,
             "judge": JUDGE, **{f"dilemma_question.{k}": v for k, v in DILEMMA_QUESTION.items()}}


# -- rendering -------------------------------------------------------------------------------------
def lore_text(universe: str, work: str | None) -> str:
    return f"{universe}, {work}" if work else universe


def attributes_text(attrs: dict[str, Any]) -> str:
    """'Age: 53, Power: ..., MBTI: ENTP, Race: Human, Enneagram: 7w8' (the fields present)."""
    names = [("age", "Age"), ("power", "Power"), ("mbti", "MBTI"), ("race", "Race"), ("enneagram", "Enneagram")]
    return ", ".join(f"{label}: {attrs[k]}" for k, label in names if attrs.get(k))


def persona(name: str, lore: str, attributes: str = "") -> str:
    text = PERSONA.format(name=name, lore=lore)
    return f"{text}, {attributes}" if attributes else text


def canon_question(question: str, options: list[str]) -> str:
    return question.strip() + "\n" + "\n".join(f"{L}) {o}" for L, o in zip(LETTERS, options))


def dilemma_text(situation: str, choices: list[tuple[str, str]]) -> str:
    (a, ca), (b, cb) = choices
    # The release wrote "Consequence A" before B's consequence in one code path; we label it B.
    return f"{situation}\nChoice A: {a} Consequence A: {ca}\nChoice B: {b} Consequence B: {cb}"


def canon_prompt(persona_text: str, question: str, options: list[str], cot: bool) -> str:
    return (CANON_COT if cot else CANON).format(persona=persona_text, question=canon_question(question, options))


def dilemma_prompt(persona_text: str, situation: str, choices: list[tuple[str, str]], conflict: str,
                   cot: bool, swapped: bool = False) -> str:
    detail = DILEMMA_QUESTION[conflict]
    if swapped:     # --set permutations: the poles change places with their choices
        detail = re.sub(r"A\) (.+?) vs(\.?) B\) (.+)$", r"A) \3 vs\2 B) \1", detail)
    return (DILEMMA_COT if cot else DILEMMA).format(persona=persona_text, dilemma=dilemma_text(situation, choices),
                                                    detail=detail)


# -- parsers ---------------------------------------------------------------------------------------
# Free-text answers are read by scoring.choice (strategies.answer_extractor); these read the
# score calls, the segmenter and the judge.
_MD = re.compile(r"[*_`~#]+")


def parse_letter_continuation(text: str | None) -> str:
    """Score calls: the chosen continuation (" A") as its letter."""
    s = (text or "").strip()
    return s if len(s) == 1 and s in LETTERS else INVALID


_THINK = re.compile(r"<thinking>(.*?)</thinking>", re.DOTALL | re.IGNORECASE)
_ACT = re.compile(r"<acting>(.*?)</acting>", re.DOTALL | re.IGNORECASE)


def parse_segments(text: str | None) -> dict | str:
    """{'thinking': [...], 'acting': [...]} from the segmenter's tagged reply.

    Valid only with at least one non-empty span of each kind; pairs are matched in order (the
    release zips the i-th thinking span with the i-th acting span).
    """
    if not text:
        return INVALID
    clean = text.replace("`", "")
    think = [s.strip() for s in _THINK.findall(clean) if s.strip()]
    act = [s.strip() for s in _ACT.findall(clean) if s.strip()]
    if not think or not act:
        return INVALID
    return {"thinking": think, "acting": act}


_PAIR = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*,\s*(\d+(?:\.\d+)?)(?![\d.])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# "think_score: 3", "Thinking score = 4", "act_score: 2/5": a score named by its key, on the 0-5 scale
_KEYED = re.compile(r"(?i:\b(think|act)(?:ing)?(?:[\s_-]*score)?\s*[:=]\s*)(\d+(?:\.\d+)?)"
                    r"(?:\s*(?:/|out\s+of)\s*(\d+))?")


def _keyed(clean: str) -> dict | str:
    """Both scores named by key, each once (a repeat must agree); anything else is INVALID."""
    found: dict[str, set[float]] = {"think": set(), "act": set()}
    for m in _KEYED.finditer(clean):
        if m.group(3) and m.group(3) != "5":      # "3/10" is another scale, not ours
            return INVALID
        found[m.group(1).lower()].add(float(m.group(2)))
    if len(found["think"]) != 1 or len(found["act"]) != 1:
        return INVALID
    return {"thinking": found["think"].pop(), "acting": found["act"].pop()}


def parse_judge(text: str | None) -> dict | str:
    """{'thinking': t, 'acting': a} from 'think_score,act_score' (both 0-5).

    Strict: the first number in the reply must open the pair, so a list like "1. ..." or a
    score buried in prose is not taken for a score. Without a pair, the prompt's own key names
    count: "think_score: 3" / "act_score: 2" lines, each key once.
    """
    if not text:
        return INVALID
    clean = _MD.sub("", text)
    first = _NUMBER.search(clean)
    pair = _PAIR.search(clean)
    if not first or not pair or first.start() != pair.start(1):
        got = _keyed(clean)
        if got == INVALID:
            return INVALID
        think, act = got["thinking"], got["acting"]
    else:
        think, act = float(pair.group(1)), float(pair.group(2))
    if not (0 <= think <= 5 and 0 <= act <= 5):
        return INVALID
    return {"thinking": think, "acting": act}


def think_act_matching(segments: dict, embedder) -> dict:
    """Section 4.2 Think-Act Matching: cosine of each (thinking, acting) pair, the maximum kept."""
    pairs = list(zip(segments["thinking"], segments["acting"]))
    sims = [float(x) for x in (embedder.cosine_matrix([t for t, _ in pairs], [a for _, a in pairs]).diagonal())]
    best = max(range(len(sims)), key=lambda i: sims[i])
    return {**segments, "pairs": len(pairs), "cosines": [round(s, 5) for s in sims],
            "tam": round(sims[best], 5), "best_pair": best}
