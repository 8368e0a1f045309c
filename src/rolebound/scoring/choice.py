"""Answer extraction for role-play replies: which option a reply commits to, and Yes/No.

A role-playing model answers in character: it deliberates, names options by letter, number or
title, restates an option's text, wraps it all in stage directions. These rules read the final
committed choice and return None when there is none to read (a refusal, two options, a path of
its own, a reply cut off inside its reasoning, a contradiction). A wrong reading is worse than
no reading, so nothing here guesses. Every reading carries the rule that made it and the span it
read, so records can keep the reason. See docs/extraction.md.

Public entry points: read_choice / read_yes_no (plain values), choice_reading / yes_no_reading
(Reading objects), yes_no_strict (the papers' reading: the reply opens with Yes or No).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..records import Reading

__all__ = ["Reading", "read_choice", "choice_reading", "read_yes_no", "yes_no_reading", "yes_no_strict",
           "clean_reply"]


# -- cleaning --------------------------------------------------------------------------------------
_THINK_OPEN = re.compile(r"<think>", re.I)
_THINK_CLOSE = re.compile(r"</think>", re.I)
_ITALIC = re.compile(r"(?<![*\w])\*(?!\*)([^*\n]+?)\*(?![*\w])")   # *stage direction*
_BOLD = re.compile(r"\*\*|__")
_BOXED = re.compile(r"\\boxed\{\s*([^{}\n]{1,80}?)\s*\}")
_PAREN = re.compile(r"\(([^()\n]*)\)")
_HEADING = re.compile(r"(?m)^[ \t]*(?:#{1,6}|>|[-•])[ \t]+")
_ANSWERS = re.compile(r"(?i:\b(?:my|the)\s+(?:final\s+)?(?:answer|choice|decision)\s+(?:is|would\s+be)\b|\bI\s+(?:choose|pick)\b)")
_REF_ONLY = re.compile(r"^\s*(?:option|choice)?\s*[A-H1-9]\s*$", re.I)


def clean_reply(reply: str | None, keep_directions: bool = False) -> tuple[str | None, str]:
    """The answer part of a reply with markdown and stage directions removed.

    Returns (text, reason); text is None when there is no answer part (empty reply, or a
    <think> block that never closes: the reply was cut off while reasoning).
    """
    if not reply or not reply.strip():
        return None, "empty"
    text = reply
    if _THINK_OPEN.search(text):
        closes = list(_THINK_CLOSE.finditer(text))
        if not closes:
            return None, "cut_off_in_think"
        text = text[closes[-1].end():]
    elif closes := list(_THINK_CLOSE.finditer(text)):   # a template that ate the opening tag
        text = text[closes[-1].end():]
    text = _BOXED.sub(r"\1", text)      # "the correct answer is: \boxed{D}"
    # one italic word is emphasis ("if I *have* to pick"), longer ones are stage directions
    text = _ITALIC.sub(lambda m: m.group(1) if " " not in m.group(1).strip() else
                       (f" {m.group(1)} " if keep_directions else " "), text)
    # "(B)", "(Option C)", "(greater good)" stay; longer parentheses are stage directions or asides
    # an aside that answers ("(My answer is a modified B)") is kept too
    text = _PAREN.sub(lambda m: m.group(0) if _REF_ONLY.match(m.group(1)) or len(m.group(1).split()) <= 4
                      or _ANSWERS.search(m.group(1)) else (f" {m.group(1)} " if keep_directions else " "), text)
    text = _BOLD.sub("", text)
    text = _HEADING.sub("", text)
    text = re.sub(r"[`~]", "", text).replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"[ \t]+", " ", text)
    # a line that starts with an ellipsis continues the sentence above it
    text = re.sub(r"\n\s*\n?\s*(?=\.\.\.|…)", " ", text)
    if not text.strip():
        return None, "empty"
    return text, ""


# -- sentences and words ---------------------------------------------------------------------------
_BOUNDARY = re.compile(r"(?<!\.)(?<!…)[.!?]+(?=[\"'”)\]]*(?:\s|$))[\"'”)\]]*|\n")
_LEAD_REF = re.compile(r"^\s*(?:(?:option|choice)\s*)?\(?(?:[A-H]|\d{1,2})\)?$", re.I)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[#@$&%€£]")
_STOP = set("""a an the and or of to in on at for with by from as is are was were be been being it its this that
these those i you he she we they me my your his her our their them him us so but if then than not no yes do
does did have has had will would shall should can could may might must just very also up out into over about
option options choice choices answer path way one two choose chose choosing pick go going went take""".split())


def _stem(w: str) -> str:
    for suf in ("ism", "ic", "ing", "ed", "es", "s"):
        if len(w) > len(suf) + 3 and w.endswith(suf) and not w.endswith("ss"):
            return w[: -len(suf)]
    return w


def _words(s: str) -> set[str]:
    out = set()
    for w in _WORD.findall(s.lower()):
        w = w.removesuffix("'s")
        if w in _STOP or (len(w) < 3 and w.isalnum()):
            continue
        out.add(_stem(w))
    return out


_ABBREV = re.compile(r"(?i:\b(?:vs|etc|e\.g|i\.e|mr|mrs|ms|dr|st|jr|sr|no)\s*$)")


def _sentences(text: str) -> list[tuple[int, int, str]]:
    """(start, end, sentence); an ellipsis does not end a sentence, nor does the dot of "1. Text" or
    of an abbreviation ("A) Duty vs. B) Personal Desire" is one sentence)."""
    out, start = [], 0
    for m in _BOUNDARY.finditer(text):
        if m.group(0) != "\n" and (".." in m.group(0) or _LEAD_REF.match(text[start:m.start()])
                                    or (m.group(0) == "." and _ABBREV.search(text[start:m.start()]))):
            continue
        if text[start:m.end()].strip():
            out.append((start, m.end(), text[start:m.end()]))
        start = m.end()
    if text[start:].strip():
        out.append((start, len(text), text[start:]))
    return out


# -- options ---------------------------------------------------------------------------------------
_LABEL_LETTER = re.compile(r"^\s*(?:option|choice)?\s*\(?([A-H])\)?\s*[.):]?\s*$", re.I)
_LABEL_NUMBER = re.compile(r"^\s*(?:option|choice)?\s*\(?(\d{1,2})\)?\s*[.):]?\s*$", re.I)


class _Options:
    def __init__(self, options: list[tuple[str, str]]):
        self.n = len(options)
        self.letters: dict[str, int] = {}
        self.numbers: dict[int, int] = {}
        self.titles: list[str] = []
        for i, (label, text) in enumerate(options):
            label = (label or "").strip()
            m, k = _LABEL_LETTER.match(label), _LABEL_NUMBER.match(label)
            if m:
                self.letters[m.group(1).upper()] = i
                self.titles.append("")
            elif k:
                self.numbers[int(k.group(1))] = i
                self.titles.append("")
            else:
                self.titles.append(label)
        self.texts = [re.sub(r"^\s*\(?[A-H]\)\s*|\(\*+\)", "", t or "").strip() for _, t in options]
        self.words = [_words(self.titles[i] + " " + self.texts[i]) for i in range(self.n)]
        self.title_words = [_words(self.titles[i] or re.split(r"\s[-–—:]\s|:\s", self.texts[i])[0]
                                   if self.titles[i] or re.search(r"\s[-–—:]\s|:\s", self.texts[i]) else self.titles[i])
                            for i in range(self.n)]
        # an option's title as words ("duty" for "Duty - Choice: Arthur decides ..."), to know a head that
        # is nothing but the title even when the other option's text shares its word ("family duty")
        self.head_titles = [_norm(self.titles[i] or re.split(r"\s[-–—:]\s|:\s", self.texts[i])[0])
                            if self.titles[i] or re.search(r"\s[-–—:]\s|:\s", self.texts[i]) else ""
                            for i in range(self.n)]
        # words that tell options apart (a word every option shares says nothing)
        common = set.intersection(*self.words) if self.words else set()
        self.distinct = [w - common for w in self.words]
        # a long option's own act, before the comma that adds its reasons ("Cast a spell to bring her back
        # to life, showing mercy after ...")
        self.core = [_words(self.texts[i].split(", ")[0]) & self.distinct[i] for i in range(self.n)]
        # the text under a title ("Save the Greater Good: Take the balloons away with the Batwing
        # first"): the scenario's own choice, which a reply may name instead of the title
        self.alias_words = []
        for i in range(self.n):
            rest = self.texts[i] if self.titles[i] else \
                (re.split(r"\s[-–—:]\s|:\s", self.texts[i], maxsplit=1) + [""])[1]
            self.alias_words.append((_words(rest) & self.distinct[i]) - self.title_words[i] if rest else set())

    def letter(self, x: str) -> tuple[int | None, str]:
        x = x.upper()
        if x in self.letters:
            return self.letters[x], "label"
        if not self.letters:
            i = ord(x) - 65
            return (i, "position") if 0 <= i < self.n else (None, "out_of_range")
        return None, "out_of_range"

    def number(self, x: str) -> tuple[int | None, str]:
        k = int(x)
        if k in self.numbers:
            return self.numbers[k], "label"
        if not self.numbers:
            return (k - 1, "position") if 1 <= k <= self.n else (None, "out_of_range")
        return None, "out_of_range"

    def match_text(self, s: str) -> tuple[int | None, int, int]:
        """The option whose words `s` shares most: (index or None, best overlap, runner-up overlap)."""
        w = _words(s)
        if not w:
            return None, 0, 0
        scores = sorted(((len(w & self.distinct[i]), i) for i in range(self.n)), reverse=True)
        best, second = scores[0], scores[1] if len(scores) > 1 else (0, -1)
        return (best[1] if best[0] > 0 else None), best[0], second[0]

    def quoted(self, s: str) -> int | None:
        """The one option whose whole text (or whole title) appears in `s`."""
        norm = f" {_norm(s)} "     # whole words: the title "Action" is not in "extraction"
        hits = {i for i in range(self.n)
                if (len(_norm(self.texts[i])) >= 4 and f" {_norm(self.texts[i])} " in norm)
                or (len(_norm(self.titles[i])) >= 4 and f" {_norm(self.titles[i])} " in norm)}
        if len(hits) > 1:   # "Padang" inside "Padang Panjang": keep the longest
            longest = max(hits, key=lambda i: len(_norm(self.texts[i])))
            if all(_norm(self.texts[j]) in _norm(self.texts[longest]) for j in hits):
                return longest
            return None
        return hits.pop() if hits else None


_PERSON = {"you": "i", "your": "my", "yours": "mine", "yourself": "myself", "you're": "i'm", "you've": "i've",
           "you'd": "i'd", "you'll": "i'll", "me": "i"}


def _either_person(word: str) -> str:
    """A regex for an option's word that takes its first-person form too ("your" or "my")."""
    if word == "you":       # subject or object: "reminded you of your own daughters", "reminded me of my own"
        return "(?:you|i|me)"
    first = _PERSON.get(word)
    return f"(?:{re.escape(word)}|{re.escape(first)})" if first and word != "me" else re.escape(word)


def _norm(s: str) -> str:
    """Lower-case words, second person read as first: an option says "your", the character "my"."""
    return " ".join(_PERSON.get(w, w) for w in _WORD.findall(s.lower()))


# -- references to options -------------------------------------------------------------------------
# "Option B", "choice 2", "option… C", "(B)", "B)", "B." opening a line
_REF = re.compile(
    # "Option 4", "choice B"; "answer 4" too, but only with the label right after it ("I would choose
    # answer 4: ..."), never "answer: 4", which the decision phrases read
    r"(?i:\b(?:option|choice)\b|\banswer(?=\s+\(?(?-i:[A-H]|\d{1,2})\b))\s*(?:…|\.\.\.)?\s*[#:]?\s*\(?(?P<kv>[A-H]|\d{1,2})\b\)?(?![’'\w])"
    r"|\((?P<pv>[A-H]|\d{1,2})\)"
    r"|(?<![\w(’'])(?P<cv>[A-H]|\d{1,2})\)(?!\w)")
# a bare "A" / "2" right where a decision names its option: "the answer is clearly A."
_BARE = re.compile(r"[\"'“]?(?P<v>[A-H]|\d{1,2})(?![\w’'])(?!\s+[a-z])[\"'”]?")
_FILLER = re.compile(
    r"(?:[\s:=\-–—,…*\"'“”]+|\.\.\.|\((?![A-H]\)|\d{1,2}\)|(?i:option|choice))[^()\n]{0,40}\)|(?i:(?:is|was|would\s+be|will\s+be|has\s+to\s+be|must\s+be|clearly|definitely|"
    r"obviously|most\s+assuredly|assuredly|pretty\s+clearly|probably|likely|simply|certainly|surely|closest\s+to|to|then|"
    r"indeed|undoubtedly|honestly|really|just|also|quite|in\s+fact|without\s+a\s+doubt|for\s+me|here|always|"
    r"definitely|absolutely|ultimately|still|so|now|that|this|[a-z]{3,}ly|clear|simple|obvious)\b))*")
_NEG_START = re.compile(r"(?i:not|n't|never|no\b|neither)")

# a name may decide ("Thor chooses Option 2"), a demonstrative may not ("This aligns with the idea of choosing ...")
_SUBJ = (r"(?:\b(?i:i|we|he|she|they)|\b(?!(?:This|That|These|Those|It|Its|There|Here|Option|Choice|Each|Every|The|Which|"
         r"What|Answer)\b)[A-Z][a-z]+|\b[A-Z]{2,})")
_MODAL = (r"(?i:would|will|must|have\s+to|am\s+going\s+to|'m\s+going\s+to|going\s+to|ultimately|definitely|hereby|then|"
          r"now|do|did|shall|gotta|should|think|believe|only|therefore|finally|instead|proudly|firmly|choose\s+to)")
_VERB = (r"(?i:choose|chooses|chose|chosen|choosing|pick|picks|picked|select|selects|selected|opt\s+for|opts\s+for|opted\s+for|"
         r"go\s+with|goes\s+with|going\s+with|gone\s+with|went\s+with|decide\s+on|decided\s+on|lean\s+towards?|"
         r"leaning\s+towards?|leaned\s+towards?|settled\s+on|settle\s+on|vote\s+for|side\s+with)")
_DECIDE = re.compile(
    r"(?i:\b(?:final\s+)?answer\s*[:：])"
    # not "Let's examine each choice:", which announces a review of the options
    r"|(?i:(?<!each\s)(?<!every\s)(?<!following\s)(?<!given\s)\b(?:choice|decision|verdict|chosen\s+path|final\s+decision|my\s+choice|my\s+answer|pick)\s*[:：])"
    r"|(?i:\b(?:option|choice|answer|course)\b[^.!?\n:]{0,40}\b(?:is|would\s+be)\s*[:：])"
    # "Choice A) Return to Peggy - ...", "Final choice B) ..." opening its line: the answer without a colon
    r"|^\W*(?i:(?:my\s+|final\s+|my\s+final\s+)?(?:choice|answer|decision|verdict))(?=\s+(?-i:\(?[A-H]\))\s)"
    r"|(?i:\b(?:the|my|his|her|their|our)\s+(?:[\w-]+\s+){0,2}?(?:answer|choice|option|pick|decision|move|instinct|"
    # "My first approach... was to try reasoning with him": an ellipsis may hold the phrase open
    r"response|reaction|course\s+of\s+action|approach|verdict)(?:(?:\.\.\.|…)?\s+(?:here\s+|then\s+|for\s+me\s+|that\s+fits\s+best\s+)?"
    r"(?:is|was|would\s+be|will\s+be|has\s+to\s+be|must\s+be)\b"
    # "the answer's D", "my choice's clear: B"
    r"|'s(?=\s*(?:[:\-–—]|\(?[A-H1-9]\b|(?:option|choice)\b|[a-z]+ly\b|clear\b|simple\b|obvious\b))))"
    r"|\b[A-Z][\w'.\- ]{0,40}?['’]s\s+(?i:final\s+)?(?i:choice|decision|answer|verdict|move|response)\s*[:：\-–—]"
    r"|" + _SUBJ + r"[”\"']?(?i:'ll|'d|'m)?(?:,|\.\.\.|…)?\s*(?:\.\.\.|…)?\s+(?:(?!(?i:not|never|no|cannot)\b)(?![\w']*n't\b)[\w']+(?:,|\.\.\.|…)?\s+){0,5}" + _VERB + r"\b"
    r"|" + _SUBJ + r"(?i:'ll|'d)?\s+(?:\w+\s+)?(?i:gotta|have\s+to|got\s+to|must)\s+(?=\(?[A-H]\))"
    # "I would B) Use strategy to ...", "I'd probably B) ...": a modal with the label right after it, then words of
    # its own (not "I would A) if I could", not "I would not B)")
    + r"|\b(?i:i|we)(?i:'d|'ll|\s+would|\s+will|\s+shall)\s+(?:(?!(?i:not|never)\b)\w+\s+)?"
    r"(?=\(?[A-H]\)\s+(?!(?i:if|unless|when|whether|but|or|and|only|maybe|perhaps|not|never)\b)[\w\"“'])"
    r"|(?i:\b(?:i'd|i\s+would|i'll|i\s+will)\s+(?:have\s+to\s+)?say\b)"
    r"|(?i:\b(?:gotta|got\s+to|it\s+has\s+to|would\s+have\s+to|it's\s+gotta|it\s+must)\s+(?:go\s+with|be)\b)"
    r"|(?i:\b(?:i'm|i\s+am|we're|we\s+are)\s+(?:choosing|picking|going\s+with|selecting|opting\s+for)\b)"
    # "I'm taking Option A.", "I'll take B)": take only with a label right after it (not "I'll take the blame")
    r"|(?i:\b(?:i'm|i\s+am|we're|we\s+are|i'll|i\s+will|i'd|i\s+would|we'll|we\s+will)\s+(?:taking|take)\b"
    r"(?=\s+(?:(?:option|choice)\s+(?:[A-H]|\d)\b|\(?(?-i:[A-H])\)|(?-i:[A-H])\b(?!['’]))))"
    # "I would respond with option D: Will you call me every day?": respond / reply / answer with, a label right after
    r"|(?i:\b(?:respond|reply|answer)(?:s|ed|ing)?\s+with(?=\s+(?:option|choice)\s+(?:[A-H]|\d)\b))"
    # "Therefore, I propose Option D.": propose / suggest / recommend decide only with a label right after
    r"|(?i:\b(?:i|we)\s+(?:propose|suggest|recommend)(?=\s+(?:option|choice)\s+(?:[A-H]|\d)\b))"
    # "the answer, the obvious answer, the one even a caveman could see, is C)"
    r"|(?i:\b(?:the|my)\s+(?:[\w-]+\s+){0,2}?answer,[^.!?\n]{0,160}?,\s*(?:is|was|would\s+be)\b)"
    # "There is only one path." followed by the option
    r"|(?i:\bthere\s+(?:is|was)\s+only\s+one\s+(?:path|choice|way|answer|option)(?:\s+for\s+me)?\s*[.:：])"
    # "That leaves Option C." after the others are ruled out
    r"|(?i:\b(?:that|which|this)\s+leaves(?:\s+(?:me|us)(?:\s+with)?)?(?=\s+(?:option\s+|choice\s+)?\(?[A-H1-9]\b))")
# a phrase after the option that commits to it: "Option C it is", "B all the way", "C) ... is the most prudent choice"
_AFTER_REF = re.compile(
    # "Moral code it is." ends its clause; "heroism is not about X—it is about Y" and "as flawed as it
    # is," commit to nothing
    r"(?i:\b(?:(?<!\bas\s)it\s+is(?:\s+then)?(?=\s*(?:[.!,;:…)\]\"'”\-–—]|$))|all\s+the\s+way|"
    # "C, obviously.", "Option B, of course!" right after the label and ending the sentence (not "B, obviously,
    # is tempting", nor "Manipulation (B) is always an option, of course.")
    r"(?-i:(?<=\b[A-H],\s)|(?<=[A-H]\),\s)|(?<=\b[1-9],\s)|(?<=[1-9]\),\s))(?:obviously|of\s+course|naturally|easily|no\s+question(?:\s+about\s+it)?|no\s+doubt(?:\s+about\s+it)?)(?=\s*(?:[.!…]|$))|without\s+(?:a\s+)?(?:question|doubt)|for\s+sure|hands\s+down|"
    r"it's\s+the\s+one|that's\s+the\s+one|that's\s+my\s+(?:choice|answer|pick)|is\s+(?:my|your|our)\s+(?:final\s+)?(?:choice|answer|pick|decision)|"
    # "Option A is the only guaranteed way to save everyone", "... is the only real choice here"
    r"is\s+(?:the\s+)?(?:only|best|right|clear|obvious|wisest|most\s+\w+)\s+(?:(?!not\b)[a-z]+\s+)?(?:path|choice|option|way|answer|course)|"
    # "my duty to the seas must come first": what comes first is the pick
    r"(?:must|will\s+always|always|has\s+to|shall)\s+come\s+first|comes\s+first(?!\s+(?:to|in)\b)|"
    r"it\s+(?:has\s+to|must)\s+be|(?:is|would\s+be)\s+the\s+one|(?:is|would\s+be)\s+(?:the\s+)?closest|(?:is|would\s+be)\s+(?:closer|nearer)\s+to\s+the\s+truth|"
    r"is\s+the\s+(?:correct|right|best|most\s+appropriate|most\s+accurate)\s+(?:answer|choice|option)|"
    r"is\s+(?:definitely\s+|clearly\s+|certainly\s+|really\s+)?the\s+(?:way|path)\s+to\s+go|"
    r"(?:feels|seems|sounds|is)\s+(?:like\s+)?(?:definitely\s+|clearly\s+)?the\s+(?:right|best|only|correct)\s+"
    r"(?:call|move|choice|path|way|answer|option|thing\s+to\s+do)|"
    r"is\s+(?:definitely|clearly|certainly|surely|undoubtedly)\s+the\s+most\s+(?:accurate|fitting|likely|appropriate))\b)")
_LEAD_MARKER = re.compile(r"^(?:\W*(?:so|yes|yeah|okay|ok|alright|well|then|fine|right|thus|therefore|hence)\b,?\s*)+", re.I)
_THIS_IS = re.compile(r"^\W*(?i:(?:this|that|it)(?:'s|\s+is|\s+would\s+be|\s+will\s+be)\s+(?:my|the)\s+"
                      r"(?:only\s+|right\s+|best\s+|real\s+|true\s+|final\s+)?(?:choice|answer|pick|decision|one)|that's\s+the\s+one)\b")
_CONDITIONAL = re.compile(r"(?i:\b(?:if|whether|unless)\b(?!\s+(?:i\s+|you\s+|we\s+)?(?:am\s+|are\s+|were\s+|was\s+)?"
                          r"(?:forced|pressed|(?:had|have|must|were|gotta|got|have\s+got|'ve\s+got)\s+(?:to\s+)?(?:choose|pick|decide)))"
                          r"(?!\s+(?:you(?:'re|\s+are)?\s+ask(?:ing)?(?:\s+me)?|it\s+(?:was|were|is)\s+(?:me|up\s+to\s+me)|"
                          r"i(?:'m|\s+am|\s+was|\s+were)\s+(?:being\s+)?(?:honest|in\s+\w+(?:'s)?\s+(?:shoes|place|position))|"
                          # "If I were Clark Kent, I would choose option C": the role, not a supposition
                          r"i\s+were\s+(?-i:[A-Z])[\w'’-]*(?:\s+(?-i:[A-Z])[\w'’-]*){0,3}(?=\s*,)|"
                          # "if we're talking about what I did after ...", "the answer, if it wasn't obvious, is B"
                          r"(?:we|you)(?:'re|\s+are)\s+(?:talking|speaking)\b|"
                          r"it\s+(?:wasn't|isn't|weren't|was\s+not|is\s+not)\s+(?:already\s+)?(?:\w+ly\s+)?(?:obvious|clear)|"
                          r"i\s+may)\b))")
# not "if I had to pick" / "if I must choose": those are forced choices, and they decide; nor the
# framing of the answer itself ("if you're asking me, ...", "if it were me, ...", "if I'm honest")
_SUPPOSE = re.compile(r"(?i:\b(?:if|unless)\s+(?:i|we)\s+(?:(?!(?:had|have|must|were|was|am|forced|to|got)\b)[\w']+\s+){0,2}?)"
                      + _VERB + r"$")
_THEN_START = re.compile(r"^\W*(?i:then|maybe|perhaps)\b")

_NONE_SENT = re.compile(
    r"^\W*(?i:so,?\s+)?(?i:i\s+choose\s+)?(?i:neither|both)\W*$"
    r"|(?i:\b(?:i|we)(?:'ll|'d)?\s+(?:(?:would|will|must|shall|choose\s+to|am\s+going\s+to|decide\s+to|have\s+to|"
    r"try\s+to|attempt\s+to|strive\s+to|'m\s+going\s+to|find\s+a\s+way\s+to|somehow|just|also)\s+){1,4}"
    r"(?:do|save|choose|pick|protect)\s+both\b)"
    r"|(?i:\bchoose\s+(?:neither|both)\b)"
    r"|(?i:\bneither\s+(?:of\s+)?(?:the\s+|these\s+|your\s+|those\s+)?(?:two\s+|presented\s+)?(?:options?|choices?|paths?)\b)"
    # not "he remains neither hero nor villain" after a choice: what he is, not what he picks (_undecided)
    r"|(?i:(?<!\bam\s)(?<!\bis\s)(?<!\bare\s)(?<!\bwas\s)(?<!\bwere\s)(?<!\bbe\s)(?<!\bremain\s)(?<!\bremains\s)\bneither\s+[\w-]+\s+nor\b)"
    r"|(?i:\bnone\s+of\s+(?:these|the|those|your)\s+(?:options|choices|answers)\b)"
    r"|(?i:\bnot\s+a\s+simple\s+(?:choice\s+(?:between|of)\s+)?(?:option\s+)?[A-H1-9]\s+or\s+(?:option\s+)?[A-H1-9]\b)"
    r"|(?i:\btranscend\s+(?:this|the)\s+binary)"
    r"|(?i:\b(?:a|the)\s+(?:blend|combination|mix)\s+of\s+(?:both|(?:option\s+)?[A-H1-9]\s+and\s+(?:option\s+)?[A-H1-9]|the\s+two))"
    r"|(?i:\b(?:modified|hybrid)\s+(?:version\s+of\s+)?(?:both|[A-H]\b))"
    r"|(?i:\bversion\s+of\s+both\b)"
    # "So, it's a hybrid approach." after "a modified version of A and D" and a plan of its own
    r"|(?i:\b(?:a|my|the)\s+hybrid\s+(?:approach|plan|solution|strategy|option|path)\b)"
    r"|(?i:\b(?:i|we)(?:'ll|'d|'m)?\s+(?:\w+\s+){0,2}?(?:take|choose|find|forge|propose|chart|choosing)\s+(?:a|my|our)\s+"
    r"(?:third|own|different|new)\s+(?:option|path|way|choice)\b)")
_HOPES_BOTH = re.compile(r"(?i:\b(?:find\s+a\s+way\s+to|somehow|try\s+to|strive\s+to|attempt\s+to|hope\s+to)\s+"
                         r"(?:\w+\s+){0,2}?(?:save|protect|do)\s+both\b)")
_NONE_KEYWORDS = ("both", "neither", "third", "combination", "blend", "modified", "own", "hybrid")


@dataclass
class _Event:
    pos: int
    value: int | None
    rule: str
    span: str
    none_reason: str = ""
    bare: bool = False     # named by letter/number alone, no text to check it against
    review: bool = False   # a line that comments on one option of a list ("A) X - not her"), no answer
    conditional: bool = False
    loose: bool = False    # a line whose text is only nearer another option's words, not that option's own text
    named: int | None = None   # a loose line: the option its number names, when its words clearly lean elsewhere


def _ref_value(m: re.Match, opts: _Options) -> tuple[int | None, str]:
    v = m.group("kv") or m.group("pv") or m.group("cv") if "kv" in m.groupdict() else m.group("v")
    return opts.number(v) if v.isdigit() else opts.letter(v)


_COMMENT = re.compile(r"\s[-–—]\s|,\s*(?=(?:but|because|not|and|since|as|which|with)\b)|\b(?:but|because)\b", re.I)


def _check_restated(idx: int, how: str, restated: str, opts: _Options) -> tuple[int | None, str]:
    """A reference followed by an option's text must agree with it ("1. Paris" where 1 is not Paris: no)."""
    # (quoted() is an index: option 1's text after a dash, "A) Hero - Expose and Destroy ...", is 0, not false)
    if how == "position" and (c := _COMMENT.search(restated)) and opts.quoted(restated) is None:
        restated = restated[:c.start()]      # "option B - but not because it's easier": a comment, not text
    q = opts.quoted(restated)
    if q is not None and q != idx:
        return None, "reference_and_text_disagree"
    if q == idx:
        return idx, ""
    best, score, second = opts.match_text(restated[:120])
    own = len(_words(restated[:120]) & opts.distinct[idx])
    head = _words(" ".join(re.split(r"[,;:.!?\-–—(]", restated, maxsplit=1)[0].split()[:4]))
    for j in range(opts.n):
        # "B) Duty" where Duty is the title of option A: the label and the title disagree
        tj = opts.title_words[j] & opts.distinct[j]
        if j != idx and tj and tj <= head and not _words(restated[:120]) & opts.distinct[idx]:
            return None, "reference_and_text_disagree"
    if best is not None and best != idx and score > second and score >= 2 and own < score:
        return None, "reference_and_text_disagree"
    if how == "position" and _words(restated[:60]) and not own:
        # a letter where the prompt numbered or titled its options: only if the words agree, or if they are a
        # clause about the pick that names no option at all ("Verdict: Option A—the only choice a man of
        # unbreakable principle can make."); a name the options do not hold ("A) Hero", "B) Duty") may be the
        # prompt's pole for either, so it is not read by position
        w = _words(restated[:120])
        clause = re.match(r"\W*(?:[-–—:,]\W*)?(?:the|a|an|i|i'm|i'll|we|we're|it|it's|that|this|which|because|no|yes|and|but|my|as)\b",
                          restated, re.I)
        if not clause or any(w & (opts.words[j] | opts.title_words[j]) for j in range(opts.n)):
            return None, "letter_without_matching_text"
    return idx, ""


def _title_value(target: str, opts: _Options) -> int | None:
    """The option a few words name by its title or text: "I choose duty", "Answer: I cannot answer that question".

    None when the words name no option clearly, or when the sentence goes on to name another
    ("Duty first, then Personal Desire")."""
    sentence = target[:200]
    # a dash ends the words that name the option too ("to seek change through the law—honoring his father's wishes")
    parts = re.split(r"[,;:.!?(—]|\s[-–]\s|\s(?:but|because|as|and\s+not|not|over|rather\s+than|instead\s+of)\s", target, maxsplit=1)
    head = parts[0]
    if re.match(r"\s(?:over|rather\s+than|instead\s+of)\s", target[len(head):]):
        sentence = head         # what is chosen over is rejected: the rest names no second choice
    q = opts.quoted(sentence)
    head = " ".join(head.split()[:8])
    # "I choose duty.", "I choose... DUTY!": the head is an option's title and nothing else
    titled = [i for i in range(opts.n) if opts.head_titles[i] and re.sub(r"^the\s", "", _norm(head)) == opts.head_titles[i]]
    if q is None and len(titled) == 1:
        q = titled[0]
    if q is None:
        w = _words(head)
        if not w or re.search(r"\b(?:not|never|no|nor|cannot)\b|n't\b", head, re.I):
            return None
        best, score, second = opts.match_text(head)
        if best is None or score <= second:
            return None
        d = opts.title_words[best] & opts.distinct[best] or opts.distinct[best]
        hits = w & d
        only_here = {x for x in hits if not any(x in opts.words[j] for j in range(opts.n) if j != best)}
        # a name only one option holds, the whole of a short head ("I'm choosing MIT.", "MIT it is.")
        named = len(head.split()) <= 2 and only_here and all(
            re.search(r"\b[A-Z][\w'-]*\b", x) and x.lower().removesuffix("'s") in
            {w.lower() for w in re.findall(r"\b[A-Z][\w'-]*", opts.texts[best] + " " + opts.titles[best])}
            for x in head.split())
        # two words of a long untitled option are not its name ("use his powers responsibly" is not "Sign up
        # ... planning to use your powers to win the prize money"): a third of its distinct words, or two of its act's
        # ("I chose to trigger Ragnarök" for "Deliberately trigger Ragnarök by having Loki resurrect Surtur, ...")
        titled_opt = bool(opts.title_words[best] & opts.distinct[best])
        if not ((len(hits) >= 2 and (titled_opt or 3 * len(hits) >= len(d) or len(hits & opts.core[best]) >= 2))
                or (hits and 2 * len(hits) >= len(d))
                or (only_here and len(d) <= 3) or named):
            # "I would choose to take the balloons away with the Batwing": the scenario's text
            a = opts.alias_words[best]
            if not (a and len(w & a) >= 2 and 2 * len(w & a) >= len(a)):
                return None
        q = best
    rest = _words(sentence) - _words(head)
    said = f" {_norm(sentence)} "
    for j in range(opts.n):
        if j != q and opts.head_titles[j] and f" {opts.head_titles[j]} " in said:
            return None     # "I choose duty and personal desire": another option's title, whole
        dj = opts.title_words[j] & opts.distinct[j] or opts.distinct[j]
        if j != q and dj and (opts.quoted(sentence) == j or (len(rest & dj) >= 2 or (rest & dj and len(dj) <= 2))
                              or len(rest & opts.alias_words[j]) >= 2):
            return None
    return q


def _decision_value(sent: str, start: int, nxt: str, opts: _Options, rule: str) -> _Event | None:
    """What a decision phrase ending at sent[start] names; None when it names no option."""
    if not sent[_FILLER.match(sent, start).end():].strip(" .…:!\n") and nxt:
        # "Answer:" on a line of its own, or "HULK CHOOSE...", the option below it; but "I choose this."
        # points back at what came before it, not at the next sentence
        if re.search(r"\b(?i:this|that)\s*[.!]+\W*$", sent):
            return None
        if nxt.rstrip().endswith("?"):
            return None     # "Tony Stark's Response:" over "Let's be real here—normal teenage life?": a question
        sent, start, nxt = nxt, 0, ""
    filler = _FILLER.match(sent, start)
    gap = sent[start:filler.end()]
    target = sent[filler.end():]
    span = target.strip()[:160]
    if _NEG_START.match(target):
        return None
    if re.match(r"(?i:(?:to\s+)?between)\b", target):
        return None     # "You ask me to choose between Duty and Personal Desire.": the choice weighed, not made
    if m := _NONE_SENT.search(gap + target[:60]):
        if not _option_says(m.group(0), opts):
            return _Event(0, None, rule, span, "not_one_option")
    if re.match(r"(?i:(?:option\s+)?\(?[A-H]\)?\s*(?:,|and|&|\+|or|/)\s*(?:option\s+)?\(?[A-H]\b)", target):
        return _Event(0, None, rule, span, "names_two_options")      # "I'd say A and D."
    m = _REF.match(target) or _BARE.match(target)
    if m:
        idx, how = _ref_value(m, opts)
        if how == "out_of_range":
            return _Event(0, None, rule, span, "names_an_option_not_offered")
        restated = target[m.end():]
        others = [o for o in _REF.finditer(restated) if _ref_value(o, opts)[0] not in (idx, None)]
        if others and others[0].start() < 120:
            return _Event(0, None, rule, span, "names_two_options")
        restated = re.sub(r"^[\s.:\-–—,]+", "", restated)
        if not _words(restated) and nxt:
            q = opts.quoted(nxt)       # "The answer is 1. Padang Panjang" on one line
            if q is not None and q != idx:
                return _Event(0, None, rule, span, "reference_and_text_disagree")
        val, why = _check_restated(idx, how, restated, opts)
        if val is None:
            return _Event(0, None, rule, span, why)
        return _Event(0, val, rule + ("_by_position" if how == "position" else ""), span,
                      bare=not _words(restated[:60]))
    val = _title_value(target, opts)
    # "the most logical answer would be that Li Xiao-Jun and Li Qiao remained married": a clause of the reply's
    # own, read as an option only when it states that option's whole text, not by a few shared names
    if val is not None and re.match(r"\s*that\W*$", gap, re.I) and re.search(r"\b(?:be|is|was)\W*$", sent[:start], re.I) and opts.quoted(target[:200]) != val:
        val = None
    if val is not None:
        return _Event(0, val, rule + "_text", span)
    # "Star-Lord's Decision: Liberation (Option A)": a few words, then the label in parentheses ending the
    # clause (not "Destroying the bike (B) would only perpetuate cruelty" after "I choose this.")
    if (m := re.match(r"([^.!?\n()]{1,60}?)\s*\((?i:option\s+|choice\s+)?(?P<v>[A-H]|\d{1,2})\)(?=\s*(?:[.!:;]|$))", target)) \
            and not re.search(r"\b(?:not|never|no|nor|or|and|between|vs)\b|n't\b", m.group(1), re.I):
        idx, how = _ref_value(m, opts)
        if how == "out_of_range":
            return _Event(0, None, rule, span, "names_an_option_not_offered")
        if idx is not None:
            val, why = _check_restated(idx, how, m.group(1), opts)
            return _Event(0, val, rule + ("_by_position" if how == "position" else ""), span, why)
    return None


def _acts_as(before: str, idx: int, opts: _Options) -> bool:
    """A first-person act that points at its option by label ("I will risk using my powers again (option B).",
    "I vote to keep her in the League (A)."): two or more of that option's distinctive words, more than
    of any other option's, no hedge."""
    m = _COMMITS.match(before)
    if not m or _HEDGE.search(_norm(before)):
        return False
    w = _words(before[m.end():])
    own = len(w & opts.distinct[idx])
    return own >= 2 and all(len(w & opts.distinct[j]) < own for j in range(opts.n) if j != idx)


def _in_option_text(sent: str, start: int, opts: _Options, before: int = 2, after: int = 3) -> bool:
    """Whether the words around sent[start] (`before` words up to it, `after` words from it) are an option's own
    words in a row: "he chose to continue his priesthood" restates option 2's text, it is no one's decision,
    and "Dylan is the one who operates Tobot Z" is option 3's text, not "... is the one" said of it."""
    head = _WORD.findall(sent[:start].lower())[-before:] if before else []
    words = head + _WORD.findall(sent[start:].lower())[:after]
    if len(words) < 3:
        return False
    said = " " + " ".join(words) + " "
    return any(said in " " + " ".join(_WORD.findall(t.lower())) + " " for t in opts.texts)


# a sentence that comments on the option just named: "This option is incorrect because ...", "This is plausible.",
# "Option 3 is incorrect because ..." (a review of the options, one by one)
_COMMENT_START = re.compile(
    # ("This option is my choice", "The choice is made": no comment)
    r"^\W*(?:(?:this|that)\s+(?:option|choice|answer|statement)|(?:option|choice)\s*(?:[A-H]|\d{1,2})\b\)?)\s+"
    r"(?:(?:also|directly|clearly|indeed|still|only|seems|appears)\s+)?(?:is|isn't|was|does|doesn't|would|could|might|may|"
    r"can|cannot|can't|has|suggests|implies|indicates|states|aligns|contradicts|matches|fits|describes|mentions|refers|"
    r"claims|says|provides|supports|presents|offers|lists|gives|talks|focuses|involves|proposes)\b"
    r"(?!\s+(?:my|our|what\s+i|the\s+(?:one|right|best|only|way|path)|it\b|made\b))"
    r"|^\W*(?:this|that|it)\s+(?:(?:also|directly|clearly|indeed|still|only)\s+)?(?:(?:is|isn't|was|seems|would\s+be|"
    r"could\s+be|might\s+be|appears)\s+(?:(?:also|not|very|highly|quite|less|more|the\s+least|the\s+most|a|an|entirely|"
    r"partially|somewhat|too)\s+)*(?:incorrect|correct|plausible|implausible|unlikely|likely|possible|impossible|true|"
    r"false|wrong|accurate|inaccurate|inconsistent|consistent|supported|unsupported|irrelevant|relevant|reasonable|"
    r"unreasonable|valid|invalid|logical|illogical|contradictory)\b|(?:suggests|implies|indicates|aligns|contradicts|"
    r"matches|describes|mentions|refers)\b)", re.I)


def _no_ones_decision(sent: str, m: re.Match, opts: _Options) -> bool:
    """A decision verb that decides nothing: inside an option's own words restated ("he chose to continue his
    priesthood ..." is option 2's text), or a choice asked of someone else ("the Professor is asking her to
    choose names ...", "he wanted us to pick names ..."; not "I'd tell Miles to go with Option A", a label)."""
    verb = re.search(r"[\w']+(?:\s+(?:for|with|on|towards?))?\s*$", m.group(0))
    if not verb:
        return False
    at = m.start() + verb.start()
    if _in_option_text(sent, at, opts, before=0, after=4):
        return True
    return bool(re.search(r"\b(?:me|her|him|us|them|you|(?:ask|asks|asked|asking|want|wants|wanted|invite|invites|"
                          r"invited|require|requires|required)\s+(?:[\w']+\s+){1,2})to\s+$", sent[:at], re.I)
                and not re.match(r"\s*(?:(?:option|choice)\s*(?:[A-H]|\d)\b|\(?[A-H1-9]\))", sent[m.end():], re.I))


def _option_says(phrase: str, opts: _Options) -> bool:
    """An option whose own text says "both" or "third way" makes those words no signal."""
    keys = [k for k in _NONE_KEYWORDS if k in phrase.lower()]
    return any(k in (opts.texts[i] + " " + opts.titles[i]).lower() for k in keys for i in range(opts.n))


def _decisions(text: str, opts: _Options) -> list[_Event]:
    events: list[_Event] = []
    sents = _sentences(text)
    for k, (s0, s1, sent) in enumerate(sents):
        same_line = k + 1 < len(sents) and not sent.endswith("\n")
        nxt = sents[k + 1][2] if k + 1 < len(sents) else ""
        # "I would respond with option D: Will you call me every day?": an option that is itself a question
        asks = sent.rstrip().endswith("?") and not any(
            t.rstrip().endswith("?") and len(_norm(t)) >= 4 and _norm(sent).endswith(_norm(t)) for t in opts.texts)
        for m in _DECIDE.finditer(sent):
            marker = ":" in m.group(0) or "：" in m.group(0) or m.group(0).rstrip().endswith(".")
            if asks and not marker:
                continue        # "Should I choose B?" asks, it does not decide
            if not marker and _no_ones_decision(sent, m, opts):
                continue
            if _SUPPOSE.search(sent[:m.end()]):
                continue        # "if I choose option B, I could be risking ...": supposes, does not decide
            # "Hulk choose...", "the answer is unequivocally:" then the option below
            announces = not sent[_FILLER.match(sent, m.end()).end():].strip(" .…:!\n")
            ev = _decision_value(sent, m.end(), nxt if (same_line or marker or announces) else "", opts,
                                 "answer_marker" if marker else "decision")
            if ev:
                ev.pos = s0 + m.start()
                # "if the writers want me alive ... then B it is": kept aside, see choice_reading
                # (the phrase itself may start at a capital before the "if": "In contrast, if I choose B")
                ev.conditional = bool(_CONDITIONAL.search(sent[:m.end()]) or _THEN_START.match(sent))
                events.append(ev)
        for m in _AFTER_REF.finditer(sent):
            pre = sent[:m.start()]
            if asks or _in_option_text(sent, m.start(), opts, before=1, after=4):
                continue        # "Option 3: Dylan is the one who operates Tobot Z": option 3's own words
            cond = bool(_CONDITIONAL.search(pre) or _THEN_START.match(sent))
            n_before = len(events)
            refs = [r for r in _REF.finditer(pre)] or list(re.finditer(r"(?:^|\s)[\"'“]?(?P<v>[A-H])[\"'”]?,?\s*$", pre))
            if refs:
                idx, how = _ref_value(refs[-1], opts)
                if how == "out_of_range":
                    events.append(_Event(s0 + m.start(), None, "ref_then_commit", pre.strip()[-160:],
                                         "names_an_option_not_offered"))
                elif idx is not None and len({_ref_value(r, opts)[0] for r in refs}) == 1:
                    val, why = _check_restated(idx, how, pre[refs[-1].end():], opts)
                    events.append(_Event(s0 + m.start(), val, "ref_then_commit" + ("_by_position" if how == "position"
                                                                                     else ""), pre.strip()[-160:], why))
            else:
                # "So, moral code it is.": a leading "So," is no part of what is named
                val = _title_value(_LEAD_MARKER.sub("", " ".join(pre.split()[-8:])), opts)
                # "without question", "for sure", "all the way" after words of the option's own commit only when
                # those words stand alone ("Moral code, without question."), not inside the speaker's account
                # ("I'd been following orders without question for too long" is no pick of "Followed orders")
                if re.match(r"(?i:without|for\s+sure|hands\s+down|all\s+the\s+way)", m.group(0)) and \
                        (len(_LEAD_MARKER.sub("", pre).split()) > 4 or not re.match(r"\s*(?:[.!,;…)\-–—]|$)", sent[m.end():])):
                    val = None
                if val is not None:
                    events.append(_Event(s0 + m.start(), val, "text_then_commit", pre.strip()[-160:]))
            for ev in events[n_before:]:
                ev.conditional = cond
        # "I sought solace in my studies and focused on my education (C)."
        if (m := re.search(r"\((?i:option\s+|choice\s+)?(?P<pv>[A-H]|\d{1,2})\)\W*$", sent)) and not asks and \
                re.search(r"\bI\b", sent[:m.start()]) and not re.search(r"\b(?:not|never|no)\b|n't\b", sent, re.I) and \
                not _REF.search(sent[:m.start()]):
            idx, how = opts.number(m.group("pv")) if m.group("pv").isdigit() else opts.letter(m.group("pv"))
            before = sent[:m.start()]
            if idx is not None and how == "label" and (opts.quoted(before) == idx or
                                                       2 * len(_words(before) & opts.distinct[idx]) >= len(opts.distinct[idx])
                                                       or _acts_as(before, idx, opts)):
                events.append(_Event(s0 + m.start(), idx, "text_then_ref", sent.strip()[-160:]))
        if _THIS_IS.match(sent) and k > 0 and not asks:
            prev = sents[k - 1][2]
            refs = list(_REF.finditer(prev))
            if refs and len({_ref_value(r, opts)[0] for r in refs}) == 1:
                idx, how = _ref_value(refs[-1], opts)
                if idx is not None:
                    val, why = _check_restated(idx, how, prev[refs[-1].end():], opts)
                    events.append(_Event(s0, val, "ref_then_this_is", prev.strip()[:160], why))
        if (m := _NONE_SENT.search(sent)) and not _option_says(m.group(0), opts) and not asks:
            events.append(_Event(s0 + m.start(), None, "no_single_option", sent.strip()[:160], "not_one_option"))
    return events


_LINE_LEAD = re.compile(r"^(?:[\W_]*(?i:so|yes|yeah|therefore|thus|hence|always|definitely|sigh|okay|alright|well|"
                        r"finally|my\s+answer|answer|choice|decision|final\s+answer|"
                        # "Without a doubt, A. Accept immediately ...", "Obviously, B."
                        r"without\s+a\s+doubt|no\s+doubt|obviously|clearly|of\s+course|easy|easily|honestly|"
                        r"no\s+question|hands\s+down)\b)*[\W_]*?(?=[\"“(]?(?:[A-H]|\d|(?i:option|choice)))")
_LINE_REF = re.compile(r"[\"“]?(?:(?i:option|choice)\s*(?P<kv>[A-Ha-h]|\d{1,2})\b|\((?i:option|choice)?\s*(?P<pv>[A-H]|\d{1,2})\)"
                       r"|(?P<cv>[A-H]|\d{1,2})[).:]|(?P<lone>[A-H]))(?=\W|$)")


_RESOLVE = re.compile(r"(?:i|we)(?:'ve\s+got\s+to|'ve\s+gotta|'ll|\s+will|\s+must|'m\s+going\s+to|\s+am\s+going\s+to|"
                      r"\s+have\s+to|\s+choose\s+to)\s+(?!(?:think|consider|see|wait|decide|weigh|ponder|reflect)\b)[a-z]", re.I)


_DENY = re.compile(r"\b(?:not|never|cannot)\b|n't\b", re.I)


def _denied(rest: str, option: str, words: set[str]) -> bool:
    """"B) I never tried to avoid the bully ...": a negation before the first of the option's own
    words, where the option's text has none, denies the option instead of choosing it."""
    if _DENY.search(option):
        return False
    for m in _WORD.finditer(rest.lower()):
        w = m.group(0).removesuffix("'s")
        if _stem(w) in words:
            return bool(_DENY.search(rest[:m.start()]))
    return False


def _answer_lines(text: str, opts: _Options) -> list[_Event]:
    """Sentences that are nothing but an option: "B) Maintain Distance - ...", "Option B.", "(A) Hero"."""
    events = []
    sents = _sentences(text)
    for k, (s0, s1, sent) in enumerate(sents):
        s = sent.strip()
        if not s:
            continue
        lead = _LINE_LEAD.match(s)
        m = _LINE_REF.match(s, lead.end() if lead else 0)
        if not m:
            continue
        v = m.group("kv") or m.group("pv") or m.group("cv") or m.group("lone")
        rest = s[m.end():].strip(" .:-–—,!\"”")
        if m.group("lone") and rest:
            continue
        idx, how = opts.number(v) if v.isdigit() else opts.letter(v)
        if idx is None:
            continue
        commented = _commented(text, sents, k, s, rest)      # checked after the text agrees
        if s.endswith("?") and not (opts.texts[idx].rstrip().endswith("?") and opts.quoted(rest) == idx
                                    and len(_words(rest)) <= len(opts.words[idx]) + 1):
            continue        # a question, unless the option itself is one ("B) Will you be back soon?")
        bare = not rest
        if rest:
            # the rest must be this option's own text, not a comment on it
            q = opts.quoted(rest)
            best, score, runner_up = opts.match_text(rest)
            own = len(_words(rest) & opts.words[idx])
            short = len(_words(rest)) <= len(opts.words[idx]) + 4
            if q is not None and q != idx or (q is None and short and best is not None and best != idx and score >= 2):
                events.append(_Event(s0, None, "answer_line", s[:160], "reference_and_text_disagree",
                                     loose=q is None, named=idx if q is None and score > runner_up else None))
                continue
            if _denied(rest, opts.texts[idx], opts.words[idx]):
                continue
        if commented:
            events.append(_Event(s0, idx, "comment_line", s[:160], review=True))
            continue
        if rest:
            # "Option A, remaining hidden and building a normal life, is a tempting solace.": said of the option
            commentary = bool(re.search(r"[:?!]\s*\S", rest)) or not short or \
                bool(re.search(r",\s*(?:is|was|would|seems|sounds|feels|might|could|may)\b", rest, re.I))
            head, _, tail = rest.partition(":")
            if q == idx and (commentary and len(_words(rest) - opts.words[idx]) > 3
                             or (opts.quoted(head) == idx and _words(tail))):
                # "A) Follow the crowd ...: Yeah, that's smart.", "C) Never used them at work: Nope."
                # "A) Follow the crowd ...: Yeah, that's smart." reviews option A
                events.append(_Event(s0, idx, "review_line", s[:160], review=True))
                continue
            if q != idx and (commentary or own < max(1, (len(_words(rest)) + 1) // 2)):
                # "Option A. Always the hero": one dot ends the answer (not "D... now that's got my spider-sense
                # tingling", an ellipsis that goes on to muse)
                dotted = s[m.end():m.end() + 1] == "." and s[m.end() + 1:m.end() + 2] not in (".", "…") \
                    and (not any(_words(rest) & w for w in opts.words)
                         # "Option B. I'm sticking to the code.": the words after the dot are that option's own
                         # (more of them than of any other), in the speaker's plain voice
                         or (best == idx and score > runner_up and re.match(r"(?:i|we)\b", rest, re.I)
                             and not _HEDGE.search(_norm(rest)) and not rest.rstrip().endswith("?")))
                # "A) I've got to handle this.": the label, then the speaker's own resolve
                resolve = _RESOLVE.match(rest) and not _HEDGE.search(_norm(rest))
                # "B) I mostly tried to avoid the bullies and stay out of their way.": the label, then the
                # speaker's own account of that option (its words, more than any other option's)
                told = not commentary and re.match(r"(?:i|we)\b", rest, re.I) and not _HEDGE.search(_norm(rest)) \
                    and best == idx and score >= 2 and score > runner_up
                if not dotted and not resolve and not told:
                    # "Option 3: This is not a common practice." comments on option 3: part of a review
                    if re.match(r"\s*[:\-–—]", s[m.end():]):
                        events.append(_Event(s0, idx, "comment_line", s[:160], review=True))
                    continue
                bare = True        # "Option A. Always the hero, never the boyfriend."
        elif how == "position" and m.group("lone"):
            continue
        elif s.endswith(":") and not m.group(0).endswith(":"):
            # "Option A:" heading the discussion of option A below it
            events.append(_Event(s0, idx, "comment_line", s[:160], review=True))
            continue
        events.append(_Event(s0, idx, "answer_line" + ("_by_position" if how == "position" else ""), s[:160],
                             bare=bare))
    return _as_review(events, sents)


def _as_review(events: list[_Event], sents: list[tuple[int, int, str]]) -> list[_Event]:
    """Comments and headings on options make a review only when they go through two options or more (one
    comment, "Option B: Tinker around ...", is part of the setting); in a review, the walk's next heading, last
    in the reply with no comment under it yet (the token cap cut it), is no answer either."""
    if len({e.value for e in events if e.rule == "comment_line"}) < 2:
        return [e for e in events if e.rule != "comment_line"]
    if events and not events[-1].review and events[-1].value is not None and \
            not any(t.strip(" -–—*\n") for a, _, t in sents if a > events[-1].pos):
        events[-1].review, events[-1].rule = True, "comment_line"
    return events


def _commented(text: str, sents: list[tuple[int, int, str]], k: int, s: str, rest: str) -> bool:
    """Whether option line k comments on its option or is a heading over a comment: "Option 3 is incorrect
    because ...", "Option 2: This option states that ...", or "2. <option 2>" over "- This option is not
    supported ..." (the next sentence, or the first of the next line: a heading may run over two sentences)."""
    nxt = next((t.strip() for _, _, t in sents[k + 1:] if t.strip()), "")
    below = next((t.strip() for a, _, t in sents[k + 1:]
                  if t.strip() and (text[:a] + t[:len(t) - len(t.lstrip())]).rstrip(" \t").endswith("\n")), "")
    return any(_COMMENT_START.match(x) for x in (s, rest, nxt, below, rest.partition(":")[2].strip()))


def choice_reading(reply: str | None, options: list[tuple[str, str]]) -> Reading:
    """Which option `reply` commits to, as a Reading (value None when it commits to none).

    The last decision counts ("I choose B", "Answer: 2", "Option C it is", "I choose duty");
    without one, lines that are nothing but an option ("B) Maintain Distance - ...") must agree.
    A decision made only on a condition ("if ..., then B it is") that names another option than
    the reading makes the reply ambiguous.
    """
    text, why = clean_reply(reply)
    if text is None and why != "empty":
        return Reading(None, "none:" + why)
    if not options:
        return Reading(None, "none:no_options")
    opts = _Options([(str(a), str(b)) for a, b in options])
    reading = _read(text, opts) if text else Reading(None, "none:empty")
    if reading.rule in ("none:no_decision", "none:empty"):
        # the decision may sit in the narration: "*He chooses Option 2: Adhere to the Moral Code.*"
        narrated, _ = clean_reply(reply, keep_directions=True)
        if narrated and narrated != text:
            again = _read(narrated, opts)
            if again.value is not None:
                return Reading(again.value, again.rule + "_in_narration", again.span)
    return reading


def _read(text: str, opts: _Options) -> Reading:
    events = sorted(_decisions(text, opts), key=lambda e: e.pos)
    lines = _answer_lines(text, opts)
    # a reply whose own numbering contradicts the prompt's ("1. Paris" where 1 is not Paris) cannot
    # be trusted on a bare "The answer is 1.". A numbered line that only shares words with another
    # option ("2. The choices provided are dates in July 1992.", a reasoning step) renumbers nothing,
    # unless it is the line numbered as the answer and its words lean to another option.
    confused = any(e.none_reason == "reference_and_text_disagree" and not e.loose for e in events + lines)
    muddled = {e.named for e in events + lines if e.loose and e.named is not None}
    heads = [e for e in lines if e.rule == "comment_line"]
    if len({e.value for e in heads}) >= 2:
        # in a review of the options, one by one, a comment that restates the option under review after a decision
        # phrase ("2. ... espionage.\n - This option aligns ... Saman chose the alias ... espionage") or says of it
        # "it is the only choice that ..." reviews that option; it does not pick it
        def under_review(e: _Event) -> bool:
            head = max((h for h in heads if h.pos < e.pos), key=lambda h: h.pos, default=None)
            return head is not None and head.value == e.value and "\n\n" not in text[head.pos:e.pos]
        events = [e for e in events if not ((e.rule.endswith("_text") or e.rule == "text_then_commit") and under_review(e))]
    firm = [e for e in events if not e.conditional]
    if firm:
        last, settled = _settle(firm, lines, opts)
        if settled is not None:
            return settled
        if last.value is None:
            return Reading(None, "none:" + last.none_reason, last.span)
        if (confused or last.value in muddled) and last.bare:
            # a renumbered list makes a bare "Answer: 3" ambiguous, unless the reply states option 3's
            # own text as its answer ("... is to plug it into a charger ... Answer: 3")
            if _stated(text, opts) != last.value:
                return Reading(None, "none:numbering_contradicts_options", last.span)
            return Reading(last.value, last.rule + "_text_agrees", last.span)
        for s0, _, sent in _sentences(text):
            # "I will choose option A ... Therefore, I will first take the balloons away (option B)"
            m = _ACTS.match(sent)
            if s0 > last.pos and m and not sent.rstrip().endswith("?") and not _HEDGE.search(sent):
                # only the scenario's own choice text counts here, most of it ("take the balloons
                # away with the Batwing"), and more of it than of the chosen option's
                w = _words(sent[m.end():])
                mine = len(w & opts.alias_words[last.value]) if last.value is not None else 0
                for j, a in enumerate(opts.alias_words):
                    if j != last.value and a and len(w & a) >= 2 and 2 * len(w & a) > len(a) and len(w & a) > mine:
                        return Reading(None, "none:acts_on_another_option", sent.strip()[:160])
        reading = Reading(last.value, last.rule, last.span)
    elif [e for e in lines if not e.review]:
        reading, final = _read_lines(text, opts, lines)
        if final:
            return reading
    else:
        q = opts.quoted(text)    # a short reply that is an option's text and nothing else
        if q is not None and len(_words(text)) <= len(opts.words[q]) + 6 and not _hedged(text, opts.texts[q]) \
                and not text.rstrip().endswith("?"):
            reading = Reading(q, "text_only", text.strip()[:160])
        elif events:
            return Reading(None, "none:only_conditional_decision", events[-1].span)
        elif len({e.value for e in lines if e.rule == "comment_line"}) >= 2 and _eliminated(text, opts) is None:
            # a review of the options, one by one ("1. ...\n - This option is incorrect ..."), that reaches no
            # decision: what it restates or calls plausible on the way is no answer, cut or not
            return Reading(None, "none:review_without_a_decision", lines[-1].span)
        elif (st := _stated(text, opts)) is not None:
            reading = Reading(st, "stated_text", _stated_span(text, opts, st))
        elif (left := _eliminated(text, opts)) is not None:
            reading = Reading(*left)
        elif not _undecided(text, opts) and (found := _ref_with_text(text, opts) or _text_line(text, opts)
                                             or _paraphrase(text, opts) or _resolves_to_act(text, opts)
                                             or _states_as_answer(text, opts)):
            reading = Reading(*found)
        else:
            return Reading(None, "none:no_decision")
    if any(e.conditional and e.value != reading.value for e in events):
        return Reading(None, "none:conditional_alternative", next(e.span for e in events if e.conditional))
    # "However, I also learned to C) Trust in Wakanda's traditions": a second option taken up
    for _, _, sent in _sentences(text):
        if re.search(r"\b(?:I|we)\b[^.!?]{0,50}\balso\b", sent) and not re.search(r"\b(?:not|never)\b|n't\b", sent):
            for m in _REF.finditer(sent):
                idx, how = _ref_value(m, opts)
                if idx is not None and idx != reading.value and how != "out_of_range":
                    return Reading(None, "none:also_takes_another_option", sent.strip()[:160])
    return reading


def _read_lines(text: str, opts: _Options, lines: list[_Event]) -> tuple[Reading, bool]:
    """A reply whose answer is in its answer lines ("B) ..."), reviews of the options included; the
    reading, and whether it is final (a none that no later check may change)."""
    reviewed = lines
    lines = [e for e in lines if not e.review]
    vals = {e.value for e in lines}
    if None in vals:
        return Reading(None, "none:reference_and_text_disagree", lines[-1].span), True
    after = lines
    if len(vals) > 1 or len({e.value for e in reviewed}) > 1:
        # a review of every option, one line each, then the one it picks: read what follows the
        # review. A review that stops short (cut off at the token cap) picks nothing.
        seen, cut = set(), len(reviewed)
        for k, e in enumerate(reviewed):
            seen.add(e.value)
            if len(seen) == opts.n:
                cut = k + 1
                break
        after = [e for e in reviewed[cut:] if not e.review]
        if (not after or len({e.value for e in after}) > 1) and (final := _restated_pick(text, opts, reviewed)):
            after = [final]
        if (not after or len({e.value for e in after}) > 1) and (first := _pick_then_others(text, opts, reviewed)):
            after = [first]
        if not after or len({e.value for e in after}) > 1:
            why = "answer_lines_disagree" if len(vals) > 1 else "answer_line_inside_a_review"
            return Reading(None, "none:" + why, lines[-1].span), True
    rule = "answer_line_before_review" if after[-1].pos < reviewed[-1].pos and after is not lines else \
        lines[-1].rule + ("_after_review" if after is not lines else "")
    return Reading(after[-1].value, rule, after[-1].span), False


def _settle(firm: list[_Event], lines: list[_Event], opts: _Options) -> tuple[_Event, Reading | None]:
    """The decision that counts (the last, unless it only hopes for both after a labelled pick), or a
    reading that overrules it: a closing answer line after it, or none after an option of the reply's own."""
    last = firm[-1]
    if (closing := _closing_line(lines, last, opts)) is not None:
        return last, closing
    # "I choose Option B - to adhere to my moral code. ... I will find a way to save both": a hope after a
    # labelled pick, not a second choice
    picked = [e for e in firm[:-1] if e.value is not None and not e.rule.endswith("_text")]
    if last.none_reason == "not_one_option" and _HOPES_BOTH.search(last.span) and picked \
            and len({e.value for e in picked}) == 1 and firm[-2].value is not None:
        last = picked[-1]
    # "my answer is neither A nor B. I choose C - ... And I choose to be the hero": after the reply answered
    # with an option of its own, a pick made only by words is no answer to the prompt's
    if last.value is not None and last.rule.endswith("_text") and any(
            e.none_reason == "names_an_option_not_offered" for e in firm[:-1]):
        return last, Reading(None, "none:after_setting_the_options_aside", last.span)
    return last, None


def _closing_line(lines: list[_Event], last: _Event, opts: _Options) -> Reading | None:
    """A line that restates one option in full, label and whole text, after the reply's last decision
    phrase ("Therefore, I propose Option D. ... This is my vote. A probationary period.\n\n(D) Propose
    a probationary period instead"): the reply's closing answer, when every option line after that
    decision is this option's and none of them comments on it."""
    after = [e for e in lines if e.pos > last.pos]
    if not after or any(e.review or e.value is None or e.value != after[-1].value for e in after):
        return None
    v = after[-1].value
    if v == last.value or not any(opts.quoted(e.span) == v for e in after):
        return None
    return Reading(v, "closing_line", after[-1].span)


def _restated_pick(text: str, opts: _Options, lines: list[_Event]) -> _Event | None:
    """The last option line, when it restates its option's whole text after every other option was
    named, and the earlier lines were comments rather than restatements of their own (a review, then
    the pick: "...HULK CHOOSE...  B) Stay on Sakaar - Remain where Hulk is celebrated and respected").
    A walk through the options, each restated in full, picks none."""
    last = max((e for e in lines if not e.review), key=lambda e: e.pos, default=None)
    if last is None or last.value is None or opts.quoted(last.span) != last.value:
        return None
    if any(e.value != last.value and e.pos > last.pos for e in lines):
        return None
    earlier = [e for e in lines if e.pos < last.pos]
    refs_before = {_ref_value(r, opts)[0] for r in _REF.finditer(text[:last.pos])}
    named = {e.value for e in earlier} | refs_before
    if not all(j in named for j in range(opts.n) if j != last.value):
        return None
    restated = any(e.value != last.value and opts.quoted(e.span) == e.value for e in earlier)
    # a walk restates each option; it picks only when this option comes again, or the others were set aside
    again = last.value in named
    set_aside = all(any(e.value == j and e.review for e in earlier) for j in range(opts.n) if j != last.value)
    if restated and not (again or set_aside):
        return None
    # "1. ...\n - This option is unlikely. ... 4. ...\n - This option is ...\n5. <option 5>" (then the token cap):
    # the walk's next option, in its order, not a pick after it
    if [e.value for e in sorted(earlier, key=lambda e: e.pos)] == list(range(last.value)) and not again:
        return None
    return _Event(last.pos, last.value, "restated_after_review", last.span)


_ACTS = re.compile(r"^\W*(?i:(?:so|therefore|thus|then|instead|ultimately|in\s+the\s+end|in\s+conclusion),?\s+)?"
                   r"(?i:i|we)\s*(?i:will|'ll|would|shall|am\s+going\s+to|must)\s+(?i:first\s+)?")
_HEDGE = re.compile(r"\b(?:not|never|no|nor|cannot|if|whether|unless|might|may|could|perhaps|possibly|maybe|"
                    r"some\s+say|or)\b|n't\b", re.I)


def _pick_then_others(text: str, opts: _Options, lines: list[_Event]) -> _Event | None:
    """"... would be:\n\nD) A lack of ...", then one review line on each other option: the answer line
    that a colon introduces, before the others are reviewed once each, is the pick."""
    first, rest = lines[0], lines[1:]
    if first.review or first.value is None or any(not e.review for e in rest):
        return None
    others = [e.value for e in rest]
    if sorted(others) != sorted(set(range(opts.n)) - {first.value}):
        return None
    lead = text[:first.pos].rstrip()
    if not lead.endswith(":") or not re.search(r"\b(?:is|was|would\s+be|will\s+be|answer|choice)\W*$", lead, re.I):
        return None
    return first


# "I would not choose option A, B, or D", "Options A, C and D do not fit": every option but one ruled out
_RULED_OUT = re.compile(r"\boptions?\s+(?P<list>\(?[A-H]\)?(?:\s*(?:,\s*(?:or\b|and\b)?|\bor\b|\band\b|&|/)\s*\(?[A-H]\)?){1,6})(?![\w'’])")
_NOT = re.compile(r"\b(?:not|never|cannot)\b|n't\b", re.I)


def _eliminated(text: str, opts: _Options) -> tuple[int, str, str] | None:
    """The one option left when a negated sentence rules out all the others by label, and no
    sentence names the one left by label."""
    if not opts.letters:
        return None
    left: set[int] = set()
    span = ""
    for _, _, sent in _sentences(text):
        m = _RULED_OUT.search(sent)
        if not m:
            continue
        named = {opts.letters.get(c.upper()) for c in re.findall(r"[A-H]", m.group("list"))}
        if None in named or not _NOT.search(sent) or sent.rstrip().endswith("?") or _CONDITIONAL.search(sent):
            return None
        rest = set(range(opts.n)) - named
        if len(rest) != 1 or (left and left != rest):
            return None
        left, span = rest, sent.strip()[:160]
    if not left:
        return None
    idx = next(iter(left))
    label = next(k for k, v in opts.letters.items() if v == idx)
    if re.search(rf"(?<![\w'’])\(?{label}\)(?!\w)|(?i:\boption)\s+{label}\b", text):
        return None         # the one left is named too: the decision rules have read (or refused) it
    return idx, "eliminates_the_others", span


def _stated(text: str, opts: _Options) -> int | None:
    """The option whose whole text the reply states as a plain fact ("the girl next door ... was Mary
    Jane Watson."), when no other option's text appears anywhere in the reply and no sentence that
    holds it negates, hedges, supposes or asks."""
    q = opts.quoted(text)
    if q is None:
        return None
    holding = [sent for _, _, sent in _sentences(text) if opts.quoted(sent) == q]
    # one option among others in the same sentence: "I served as a diplomat representing Wakanda ..., engaging in
    # covert operations to protect Wakanda's interests, and studying ancient Wakandan texts ..."
    own = [opts.distinct[j] - opts.words[q] for j in range(opts.n)]      # not "West Sumatra" beside "Padang Panjang, West Sumatra"
    if any(j != q and len(own[j]) >= 2 and 3 * len(_words(sent) & own[j]) >= 2 * len(own[j])
           for sent in holding for j in range(opts.n)):
        return None
    # another option's own words, most of them, stated in a sentence of their own: "My first thought would be
    # excitement for new experiences ... Additionally, I would be determined to fulfill a greater purpose"
    if any(j != q and len(_words(sent) & own[j]) >= 3 and 3 * len(_words(sent) & own[j]) >= 2 * len(own[j])
           and not _HEDGE.search(_norm(sent)) and not sent.rstrip().endswith("?")
           for _, _, sent in _sentences(text) for j in range(opts.n)):
        return None
    if not holding or any(sent.rstrip().endswith("?") or _hedged(sent, opts.texts[q]) for sent in holding):
        return None
    # "5. I can not answer that question: This option is incorrect because ...": named to be reviewed
    if any(len(parts := re.split(r":|\s[-–—]\s", sent, maxsplit=1)) == 2 and _COMMENT_START.match(parts[1].strip())
           for sent in holding):
        return None
    # the option's own text (not a title: "Greater Good" is a concept a reply may muse on) ending a
    # clause, not quoted: "... was Mary Jane Watson.", "... because they were arrested."
    words = _WORD.findall(opts.texts[q].lower())
    if not words:
        return None
    # no quotation mark inside either: 'about a "spider in a jar,"' mentions option D's text, it does not state it
    # in either person: the option's "unsure of your fate" is the character's "unsure of my fate"
    pat = re.compile(r"(?<![\w\"“'])" + r"[^\w\"“”]+".join(_either_person(w) for w in words)
                     + r"(?!\w)\W*?(?=[.,;:!)\]]|\s*$)", re.I)
    if not any(pat.search(sent) for sent in holding):
        return None
    return q


def _ref_with_text(text: str, opts: _Options) -> tuple[int, str, str] | None:
    """A label followed by its option's own text inside a sentence ("... the consequence was that B) I
    created an alternate timeline"), when it is the only option the reply names that way and the
    sentence neither negates, hedges nor asks."""
    found = set()
    span = ""
    named: list[tuple[int, bool]] = []     # (option, inside a sentence) in reply order
    mixed = False
    for _, _, sent in _sentences(text):
        for m in _REF.finditer(sent):
            idx, how = _ref_value(m, opts)
            if idx is None or how != "label":
                continue
            after = sent[m.end():m.end() + 200]
            w = _words(after) & opts.distinct[idx]
            full = opts.quoted(after) == idx
            if not full and not (len(w) >= 3 and 2 * len(w) >= len(opts.distinct[idx])):
                continue
            found.add(idx)
            if len(sent[:m.start()].split()) < 2:
                named.append((idx, False))
                continue        # a line opening with its label is an answer or a review line
            # a sentence that names two options ("C) Acceptance ... but also D) Hope") takes up neither alone
            mixed |= any(_ref_value(r, opts)[0] not in (idx, None) for r in _REF.finditer(sent))
            named.append((idx, True))
            # the hedge that counts is in the label's own clause ("So, while anger may have been a flicker ...
            # the very reason I kept fighting... it was B) Love and belief ...": the "may" is conceded before)
            clause = sent[max([0] + [c.end() for c in re.finditer(r"[,;:—–]|\.\.\.|…", sent[:m.start()])]):]
            if sent.rstrip().endswith("?") or _hedged(clause, opts.texts[idx]):
                return None
            span = sent.strip()[:160]
    if len(found) == 1 and span:
        return found.pop(), "ref_with_text", span
    # a walk through the options, each on a line opening with its label, then one of them taken up
    # inside a sentence ("... when the whispers began to reach my ears, I C) Kept quiet, hoping to learn
    # more first."): read when that is the only option named so, and every other was named before it
    inside = {i for i, own in named if own}
    if len(inside) == 1 and span and not mixed:
        pick = next(iter(inside))
        last = max(k for k, (i, own) in enumerate(named) if own)
        if all(i == pick for i, _ in named[last:]) and all(not own for i, own in named if i != pick):
            return pick, "ref_with_text_after_review", span
    return None


def _text_line(text: str, opts: _Options) -> tuple[int, str, str] | None:
    """A line that opens with one option's own words as a sentence of their own: its scenario choice or
    its whole text, two words or more ("Attend to the Rift. It's my duty." for "Duty - Attend to the
    Rift"), when no other option gets such a sentence and the reply neither asks nor hedges there."""
    found: dict[int, str] = {}
    forms = []
    for i in range(opts.n):
        parts = {opts.texts[i]} | set(re.split(r"\s[-–—:]\s|:\s", opts.texts[i], maxsplit=1)[1:])
        if opts.titles[i]:
            parts.add(opts.titles[i])
        forms.append({_norm(p) for p in parts if len(_norm(p).split()) >= 2})
    starts = {0} | {m.end() for m in re.finditer(r"\n", text)}
    for s0, _, sent in _sentences(text):
        if s0 not in starts or not re.search(r"[.!]\W*$", sent):
            continue
        n = _norm(_LEAD_MARKER.sub("", sent))
        for i in range(opts.n):
            if n in forms[i]:
                found.setdefault(i, sent.strip()[:160])
    return (next(iter(found)), "text_line", next(iter(found.values()))) if len(found) == 1 else None


def _undecided(text: str, opts: _Options) -> bool:
    """A decision phrase the rules could not read that weighs two options ("Choice: Duty first, then
    Personal Desire", "I will choose between Option B ..."): no reading from the weaker rules then."""
    for _, _, sent in _sentences(text):
        for m in _DECIDE.finditer(sent):
            after = sent[m.end():m.end() + 160]
            named = {v for r in _REF.finditer(after) if (v := _ref_value(r, opts)[0]) is not None}
            named |= {j for j in range(opts.n) if (t := opts.title_words[j] & opts.distinct[j]) and t <= _words(after)}
            named |= {j for j in range(opts.n) if opts.head_titles[j] and f" {opts.head_titles[j]} " in f" {_norm(after)} "}
            if re.match(r"\W*(?:to\s+)?between\b", after, re.I) or len(named) > 1:
                return True
    return bool(re.search(r"\bneither\s+[\w-]+\s+nor\b", text, re.I))


_MUSING = (r"(?:thinking|considering|wondering|weighing|hoping|wishing|imagining|picturing|asking|debating|struggling|"
           r"feeling|leaning|worrying|questioning|contemplating|pondering|reflecting|remembering|guessing|dreaming|"
           r"talking|saying|telling|looking|praying|trying|being|getting|starting|beginning|torn|not|just|still)\b")
# a first-person sentence that acts or has acted: "I must don the Helmet again", "So yes, I refused to
# turn over the list", "I had no choice but to fight him directly"
# "As Tony Stark, I would ...": the role's own name before the clause is no hedge
_AS_ROLE = r"(?:as\s+[^,.!?;:\n]{1,60},\s*)?"
_COMMITS = re.compile(r"^\W*" + _AS_ROLE + r"(?:(?:so|yes|then|therefore|thus|and|in\s+the\s+end|ultimately|instead|now)\b,?\s+)*"
                      r"(?:i|we)(?:'ll|'d|'m\s+going\s+to|\s+will|\s+would|\s+must|\s+shall|\s+am\s+going\s+to|"
                      r"\s+have\s+to|\s+had\s+to|\s+had\s+no\s+choice\s+but\s+to|\s+(?:chose|choose|decided|decide)\s+to)?\s+"
                      r"(?!(?:was|were|am|is|need|want|think|feel|felt|know|knew|guess|believe|hope|wish|see|saw|understand|"
                      r"remember|can|could|might|may|wonder|suppose|like|love|mean)\b)(?=[a-z])"
                      # "I'm heading to Nevada": the present progressive acts too (with the option's own verb, see _paraphrase)
                      r"|^\W*" + _AS_ROLE + r"(?:(?:so|yes|then|and|now)\b,?\s+)*(?:i'm|i\s+am|we're|we\s+are)\s+(?!" + _MUSING + r")(?=(?P<ing>[a-z]+ing)\b)",
                      re.I)


def _paraphrase(text: str, opts: _Options) -> tuple[int, str, str] | None:
    """The option a reply acts out in its own words, with no label ("I'll obtain the kryptonite. I'll
    build the weapons."): first-person sentences that neither negate, hedge nor ask, each naming
    most of one option's distinctive words (two or more), all of them the same option."""
    found: dict[int, str] = {}
    for _, _, sent in _sentences(text):
        m = _COMMITS.match(sent)
        if not m or sent.rstrip().endswith("?"):
            continue
        if re.search(r"\b(?:option|choice)s?\b", sent, re.I):
            continue    # "I would choose the second option: ...": a reference the decision rules read, or refused
        w = _words(sent[m.end():])
        hits = sorted(((len(w & opts.distinct[i]), i) for i in range(opts.n)), reverse=True)
        (best, i), second = hits[0], hits[1][0] if len(hits) > 1 else 0
        if best >= 2 and second >= 2 and 2 * second >= best and not _HEDGE.search(_norm(sent)):
            return None     # one resolve taking up two options' acts: "I served as a diplomat ..., engaging in ..."
        core = len(w & opts.core[i])      # a long option's act before its comma: "Cast a spell to bring her back, showing ..."
        # or the whole of a short act before its comma ("I will return to the fight" for "Return to the fight, inspired by ...")
        # or the option's whole title of two words or more, and no word of another option's title ("I'll
        # embrace the heroic path - with transparency" for the title "Embrace the Heroic Path")
        title = opts.title_words[i] & opts.distinct[i]
        titled = len(title) >= 2 and title <= w and not any(
            w & opts.title_words[j] & opts.distinct[j] for j in range(opts.n) if j != i)
        if best < 2 or (2 * best < len(opts.distinct[i]) and not (core >= 3 and 2 * core >= len(opts.core[i]))
                        and not (core >= 2 and core == len(opts.core[i]) and opts.core[i] != opts.distinct[i])
                        and not titled) \
                or second * 2 > best:
            continue
        if m.group("ing") and _stem(m.group("ing").lower()) not in opts.distinct[i]:
            continue        # "I'm diverting from another personal emergency": the act must be the option's own verb
        if _HEDGE.search(_norm(sent)) or re.search(r"\b(?:both|neither|third|either)\b", sent, re.I):
            return None
        found.setdefault(i, sent.strip()[:160])
    return (next(iter(found)), "paraphrase", next(iter(found.values()))) if len(found) == 1 else None


# "I have to save the bridge.", "We will accept Vision's help.": I/we, a resolve, then the act's verb
_RESOLVES = re.compile(r"^\W*(?:(?:so|yes|then|therefore|thus|and|now|instead|ultimately|in\s+the\s+end)\b,?\s+)*"
                       r"(?:i|we)(?:'ll|'m\s+going\s+to|'re\s+going\s+to|\s+will|\s+must|\s+shall|\s+have\s+to|"
                       r"\s+am\s+going\s+to|\s+are\s+going\s+to|'ve\s+got\s+to|\s+have\s+got\s+to|\s+need\s+to)\s+"
                       r"(?:(?:just|still|now|simply|finally|first|immediately|then|really|truly|all)\s+)*(?P<verb>[a-z]+)\b", re.I)
_ACT_END = re.compile(r"[,;(]|\.\s|\s(?:to|despite|while|because|so|in\s+order|and|but|with|as|before|after|instead|by|"
                      r"even|until|rather)\s", re.I)


def _act_heads(opts: _Options) -> list[tuple[str, set[str], str]]:
    """Each option's own act as (verb, words, text): the scenario choice under a title, or the text, up to
    its first comma or linking word ("Accept Vision's help" of "Accept Vision's help to escape ...")."""
    heads = []
    for i in range(opts.n):
        act = opts.texts[i] if opts.titles[i] else \
            (re.split(r"\s[-–—:]\s|:\s", opts.texts[i], maxsplit=1) + [""])[1] or opts.texts[i]
        head = _ACT_END.split(act.strip(), maxsplit=1)[0]
        verb = (_WORD.findall(head.lower()) or [""])[0]
        heads.append((verb, _words(head) | ({_stem(verb)} if verb else set()), head))
    return heads


def _resolves_to_act(text: str, opts: _Options) -> tuple[int, str, str] | None:
    """A first-person resolve stating one option's own act, no label ("I have to save the bridge." for
    "Save the Bridge"): I/we with will / must / have to / am going to, then the act's verb and every
    word of its head (two or more), no word only another option holds, and no negation, hedge,
    condition or question. Read when every such sentence names the same option and no later
    first-person sentence acts out another."""
    heads = _act_heads(opts)
    found: dict[int, str] = {}
    last_pos = -1
    sents = _sentences(text)
    for k, (_, _, sent) in enumerate(sents):
        m = _RESOLVES.match(sent)
        if not m or sent.rstrip().endswith("?"):
            continue
        verb, w = m.group("verb").lower(), _words(sent[m.start("verb"):])
        hits = [i for i, (v, hw, _) in enumerate(heads)
                if v and len(hw) >= 2 and _stem(verb) == _stem(v) and hw <= w
                and not any((w & opts.distinct[j]) - opts.words[i] for j in range(opts.n) if j != i)]
        if len(hits) != 1:
            continue
        i = hits[0]
        if _hedged(sent, heads[i][2]) or re.search(r"\b(?:both|neither|either|third|also)\b", sent, re.I):
            return None
        found.setdefault(i, sent.strip()[:160])
        last_pos = k
    if len(found) != 1:
        return None
    i = next(iter(found))
    for _, _, sent in sents[last_pos + 1:]:     # a later act of another option's undoes it
        m = _COMMITS.match(sent)
        if m and not sent.rstrip().endswith("?"):
            w = _words(sent[m.end():])
            if any(len((w & opts.distinct[j]) - opts.words[i]) >= 2 for j in range(opts.n) if j != i):
                return None
    return i, "resolves_to_act", found[i]


_COPULA = re.compile(r"\b(?:was|is|were|would\s+(?:have\s+)?been|would\s+be|will\s+be)\s+(?:(?:to|that|by|a|an|the)\s+)?"
                     r"(?P<rest>[^.!?;]+)", re.I)


def _states_as_answer(text: str, opts: _Options) -> tuple[int, str, str] | None:
    """The answer stated as a fact in other grammatical words: "my primary objective was to safeguard
    humanity from supernatural threats" for "Safeguarding humanity from supernatural threats". What
    follows the copula holds three quarters or more of one option's own words (two at least) and under
    half of every other's; every such sentence names the same option, none negates, hedges or asks."""
    found: dict[int, str] = {}
    for _, _, sent in _sentences(text):
        m = _COPULA.search(sent)
        if not m or sent.rstrip().endswith("?"):
            continue
        w = _words(m.group("rest"))
        cover = [len(w & d) / len(d) if d else 0.0 for d in opts.distinct]
        i = max(range(opts.n), key=lambda j: cover[j])
        if len(w & opts.distinct[i]) < 2 or cover[i] < 0.75 or any(c >= 0.5 for j, c in enumerate(cover) if j != i):
            continue
        if _HEDGE.search(_norm(sent)) or re.search(r"\b(?:both|neither|either|combination|also)\b", sent, re.I):
            return None
        found.setdefault(i, sent.strip()[:160])
    if len(found) != 1:
        return None
    i = next(iter(found))
    for _, _, sent in _sentences(text):       # "It was Mary Jane Watson. Gwen Stacy came later.": another named too
        w = _words(sent)
        if not _HEDGE.search(_norm(sent)) and any(
                j != i and len(w & opts.distinct[j]) >= 2 and 4 * len(w & opts.distinct[j]) >= 3 * len(opts.distinct[j])
                for j in range(opts.n)):
            return None
    return i, "stated_paraphrase", found[i]


def _hedged(sentence: str, option_text: str) -> bool:
    """A negation, hedge or condition in the sentence outside the option's own words ("It was not
    X"; the option "I cannot answer that question" says "cannot" itself)."""
    return bool(_HEDGE.search(_norm(sentence).replace(_norm(option_text), " ")))


def _stated_span(text: str, opts: _Options, q: int) -> str:
    return next((sent.strip()[:160] for _, _, sent in _sentences(text) if opts.quoted(sent) == q), "")


def read_choice(reply: str | None, options: list[tuple[str, str]]) -> int | None:
    """0-based index of the option `reply` commits to; None when it commits to none.

    `options` as the prompt showed them: (label, text), e.g. ("B", "Maintain distance"),
    ("Option 2", "Greater Good"), ("1", "I cannot answer that question"), or (title, text).
    """
    return choice_reading(reply, options).value


# -- yes / no --------------------------------------------------------------------------------------
_INTERJ = r"(?:(?:oh|ah|ahh|well|hmm|why|alas|sigh|hah|ha|hm|look|listen|my\s+dear\s+\w+|sir|madam|friend)[,!.…]*\s+)*"
_LEAD_YES = re.compile(r"^\W*(?:answer\s*[:：]\s*)?" + _INTERJ +
                       r"(?:(?:yes|yeah|yep|yea|aye|indeed|certainly|absolutely|of\s+course|definitely|naturally|verily|"
                       r"surely|sure|truly|affirmative)\b(?!\s+not\b)|i\s+(?:do|did|have|am|was|know)\s*(?:[.,!]|$))", re.I)
_LEAD_NO = re.compile(r"^\W*(?:answer\s*[:：]\s*)?" + _INTERJ +
                      r"(?:(?:no|nay|nope|never|negative)\b(?!\s+(?:doubt|question)\b)|not\s+at\s+all\b|"
                      r"i\s+(?:do|did|have|am|was)\s+not\s*(?:[.,!]|$))", re.I)
_SAYS = re.compile(r"\b(?:i\s+(?:must|shall|will|would|can\s+only)\s+(?:answer|say)|my\s+answer\s+is|the\s+answer\s+is|"
                   r"i\s+(?:answer|say))\s*[:,]?\s*[\"'“]?(yes|no|nay|aye)\b", re.I)
# "I do not know", "I wasn't there", "I know, but did not witness", "I have never heard of it"
_I_NEG = re.compile(r"\bI\b(?:'m|'ve|'d)?(?:,?\s+[\w']+){0,3}?(?:\s+not\b|n't\b|\s+never\b|\s+cannot\b|"
                    r"\s+no\s+(?:idea|knowledge|notion|clue|memory)\b|\s+know\s+nothing\b)", re.I)
_I_KNOW_NOT = re.compile(r"\bI\s+know\s+(?:not|nothing|naught|of\s+no)\b|\bknow\s+I\s+not\b", re.I)
# presence questions ("Were you there when ...?"): "not one I witnessed", "learned from listening, not seeing"
_NOT_WITNESSED = re.compile(r"\bnot\b(?:\s+[\w']+){0,4}?\s+(?:witness\w*|see|seen|seeing|saw|present|involved|lived|"
                            r"experienced|there|eyes)\b", re.I)
_EPISTEMIC = re.compile(r"n't\s+(?:know|think|remember|recall)|not\s+(?:sure|certain)|cannot\s+say|can't\s+say", re.I)
_I_INDEED = re.compile(r"\bI\s+(?:have|do|did|am|was)\s+indeed\b", re.I)
_CONTRAST = re.compile(r"\b(?:but|however|though|although|yet)\b", re.I)


def _polar(sentence: str) -> tuple[str | None, str]:
    s = sentence.strip()
    if re.match(r"^\W*" + _INTERJ + r"(?:yes\s+(?:and|or)\s+no|no\s+(?:and|or)\s+yes)\b", s, re.I):
        return None, "hedged"
    if _LEAD_NO.match(s):
        return "No", "leading_no"
    if _LEAD_YES.match(s):
        return "Yes", "leading_yes"
    if m := _SAYS.search(s):
        return ("Yes" if m.group(1).lower() in ("yes", "aye") else "No"), "says_yes_no"
    neg = _I_KNOW_NOT.search(s) or _I_NEG.search(s)
    if neg:
        # "I don't know about enemies, but there are people who ..." hedges
        if _EPISTEMIC.search(s[neg.start():neg.end() + 12]) and _CONTRAST.search(s[neg.end():]):
            return None, "hedged"
        return "No", "first_person_negation"
    if _NOT_WITNESSED.search(s):
        return "No", "not_witnessed"
    if _I_INDEED.search(s):
        return "Yes", "first_person_indeed"
    return None, ""


_GENERIC = set("believe think feel know ever really consider wish there any anything someone something".split())


def _question_key(question: str | None) -> str | None:
    """The word a yes/no question turns on: "Do you have children?" -> "children"."""
    if not question:
        return None
    first = re.split(r"(?<=\?)\s", question.strip(), maxsplit=1)[0]
    for w in _WORD.findall(first.lower()):
        if w not in _STOP and w not in _GENERIC and len(w) > 2:
            return _stem(w)
    return None


def yes_no_reading(reply: str | None, question: str | None = None) -> Reading:
    """Yes or No as a Reading: the first sentence that gives a verdict decides.

    Reads in-character forms ("Nay, I know not." -> No, "I do not know what a smartphone is." ->
    No, "As Shakespeare, I must answer no." -> No, "Indeed, I did." -> Yes). With the question,
    a first-person sentence that takes up the question's key word also counts ("Do you have
    children?" "I have four children." -> Yes).
    """
    text, why = clean_reply(reply)
    if text is None:
        return Reading(None, "none:" + why)
    key = _question_key(question)
    for _, _, sent in _sentences(text):
        val, rule = _polar(sent)
        if val:
            return Reading(val, rule, sent.strip()[:160])
        if rule == "hedged":
            return Reading(None, "none:hedged", sent.strip()[:160])
        if key and not sent.rstrip().endswith("?") and re.search(r"\b(?:I|we)\b", sent) and key in _words(sent):
            neg = re.search(r"\b(?:not|never|no|cannot)\b|n't\b", sent, re.I)
            return Reading("No" if neg else "Yes", "restates_question", sent.strip()[:160])
    return Reading(None, "none:no_verdict")


def read_yes_no(reply: str | None, question: str | None = None) -> str | None:
    """'Yes', 'No', or None when the reply gives no verdict."""
    return yes_no_reading(reply, question).value


_STRICT = re.compile(r"^\W*(?:answer\s*[:：]\s*)?\W*(yes|no)\b", re.IGNORECASE)


def yes_no_strict(reply: str | None) -> Reading:
    """The papers' reading: Yes or No only when the reply opens with it (after markdown and an
    optional 'Answer:'); the same rule as parsers.parse_yes_no."""
    if not reply:
        return Reading(None, "none:empty")
    m = _STRICT.match(re.sub(r"[*_`~]+", "", reply).strip())
    if not m:
        return Reading(None, "none:strict_no_leading_yes_no")
    return Reading("Yes" if m.group(1).lower() == "yes" else "No", "strict_leading_yes_no", m.group(0))
