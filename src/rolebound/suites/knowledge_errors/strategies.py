"""The methods of the knowledge-errors suite (paper §5, §6.2; prompts of Tables 16-17) and the
judge call (Tables 14-15; generated, or scored by log-likelihood with judge_scoring=logprob).
Every model call is its own record; the final reply is stage "answer".

Stages: vanilla/cot/few-shot/rag/rag-few-shot: answer. self-reflection: draft, answer.
s2rd: s2rd.narrative (once per character, repeat and method: it depends on the role alone),
s2rd.recollection, s2rd.doubt, answer. s2rd-no-recollection drops the recollection call and the
memory fragments; s2rd-no-doubt drops the doubt call and the doubts line.
"""

from __future__ import annotations

import asyncio
import random
import re
from dataclasses import dataclass, field
from typing import Any

from ...errors import CapabilityError, InputError
from ...models.base import CHAT, LOGPROB
from ...records import Message
from ...runner import ItemContext
from . import prompts
from ..base import default_scoring_for
from .retrieval import Retriever

STRATEGIES = {
    "vanilla": "role prompt and the question (Table 16)",
    "cot": "role prompt + 'Please think step by step and then answer' (Table 16)",
    "few-shot": "four query-response cases from a pool that never overlaps the item (Table 16)",
    "self-reflection": "vanilla answer, then rethink it in a second call (Table 16)",
    "rag": "top-3 corpus chunks by MiniLM similarity to the question (Table 16)",
    "rag-few-shot": "RAG chunks and four cases (Table 16)",
    "s2rd": "self-narrative, self-recollection (m=3, refined by retrieval), self-doubt, answer (Table 17)",
    "s2rd-no-recollection": "S2RD without Self-Recollection (ablation)",
    "s2rd-no-doubt": "S2RD without Self-Doubt (ablation)",
}
USES_RETRIEVAL = {"rag", "rag-few-shot", "s2rd", "s2rd-no-doubt"}
USES_CASES = {"few-shot", "rag-few-shot", "s2rd", "s2rd-no-recollection", "s2rd-no-doubt"}

JUDGE_SCORING = ("generate", "logprob")


def judge_scoring_mode(v: str | None, judge) -> str:
    """The judge's scoring mode: `judge_scoring` (v) if set, else the default rule of `--scoring`
    (logprob on the demo models, generate on every other model)."""
    if v is None or str(v).strip() == "":
        mode = default_scoring_for(judge)
    else:
        mode = str(v).strip().lower()
        if mode not in JUDGE_SCORING:
            raise InputError(f"must be generate or logprob, not {v!r}", field="--set judge_scoring")
    if mode == "logprob" and not judge.supports(LOGPROB):
        raise CapabilityError(f"judge_scoring=logprob needs a judge that scores log-likelihoods, and backend "
                              f"'{judge.spec}' cannot; use --set judge_scoring=generate or another --judge")
    if mode == "generate":
        judge.require(CHAT, "judge_scoring=generate: the judge writes an explanation and a judgment")
    return mode


_WORD = re.compile(r"[a-z0-9']+")


def _words(s: str) -> set[str]:
    return set(_WORD.findall(s.lower()))


def _jaccard(a: str, b: str) -> float:
    wa, wb = _words(a), _words(b)
    return len(wa & wb) / len(wa | wb) if wa and wb else 0.0


def overlaps(case, item, threshold: float = 0.5) -> bool:
    """A case overlaps an item if it is about the same memory or asks (nearly) the same thing."""
    return (case.query.strip().lower() == item.query.strip().lower()
            or _jaccard(case.memory, item.correct_memory) >= threshold
            or _jaccard(case.query, item.query) >= threshold
            or _jaccard(case.query, item.correct_memory) >= threshold)


def pick_cases(pool: list, item, k: int = 4) -> list:
    """k cases (half KKE, half UKE where the pool allows), the item's character first, none
    overlapping the item. Seeded by the memory, so both queries of a memory see the same cases."""
    rng = random.Random(f"cases:{item.memory_id}")
    ok = [c for c in pool if not overlaps(c, item)]
    same = [c for c in ok if c.character == item.character]
    other = [c for c in ok if c.character != item.character]
    rng.shuffle(same)
    rng.shuffle(other)
    ranked = same + other
    chosen: list = []
    for et in ("KKE", "UKE"):
        chosen += [c for c in ranked if c.error_type == et][: k // 2]
    for c in ranked:
        if len(chosen) >= k:
            break
        if c not in chosen:
            chosen.append(c)
    chosen = chosen[:k]
    rng.shuffle(chosen)
    return chosen


def format_case(case) -> str:
    return prompts.CASE.format(query=case.query, response=case.response)


_LABEL = re.compile(r"^\s*(?:[-*•]\s*|\d+[.):]\s*|<?\s*memory\s*\d*\s*>?\s*[:.)-]?\s*)", re.IGNORECASE)
_HEAD = re.compile(r"^\s*(?:your\s+)?(?:correct|true)\s+memories\s*:?\s*", re.IGNORECASE)


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")


def parse_recollections(text: str | None, m: int = 3) -> list[str]:
    """Up to m memories from the Self-Recollection reply: blank-line separated as Table 17 asks;
    single lines when the model ignores that; and when it writes one paragraph (Qwen2.5-Coder
    does, tests/data/qwen_replies), its whole sentences in m consecutive groups, so each memory
    still seeds its own retrieval. A sentence cut off by the token limit is dropped."""
    if not text:
        return []
    body = _HEAD.sub("", text.strip())
    blocks = [b.strip() for b in re.split(r"\n\s*\n", body) if b.strip()]
    lines = [x.strip() for x in body.splitlines() if x.strip()]
    if len(blocks) < m and len(lines) > len(blocks):
        blocks = lines
    if len(blocks) == 1 and m > 1:
        sentences = [x.strip() for x in _SENTENCE_END.split(blocks[0]) if x.strip()]
        if sentences and not sentences[-1].endswith((".", "!", "?", '"', "'")):
            sentences = sentences[:-1]                    # cut off mid-sentence
        if len(sentences) > 1:
            n, k = len(sentences), min(m, len(sentences))  # k groups of consecutive sentences
            blocks = [" ".join(sentences[i * n // k:(i + 1) * n // k]) for i in range(k)]
    out: list[str] = []
    for b in blocks:
        b = _LABEL.sub("", b).strip()
        if len(_words(b)) >= 3 and b not in out:
            out.append(b)
    return out[:m]


@dataclass
class Methods:
    """State shared by the items of one run: corpus retriever, case pool, options."""

    retriever: Any = None
    pool: list = field(default_factory=list)
    rag_k: int = 3
    m: int = 3
    step_tokens: int | None = 192          # intermediate steps (drafts, narrative, recollection, doubt)
    answer_tokens: int | None = None       # None: the run's --max-tokens
    judge_tokens: int | None = None
    judge_scoring: str = "generate"        # or "logprob": " yes" vs " no" after "judgment:"
    _narratives: dict = field(default_factory=dict)

    @classmethod
    def for_run(cls, dataset, opts) -> "Methods":
        """The methods of one run: a retriever over the dataset's corpora, its case pool, the caps."""
        return cls(retriever=Retriever(dataset.extra["corpora"], opts.embedder), pool=dataset.extra["pool"],
                   rag_k=opts.rag_k, m=opts.m, step_tokens=opts.step_max_tokens,
                   answer_tokens=opts.answer_max_tokens, judge_tokens=opts.judge_max_tokens,
                   judge_scoring=opts.judge_scoring or "generate")

    # -- helpers ----------------------------------------------------------------------------
    @staticmethod
    def _user(text: str) -> list[Message]:
        # The paper's prompts are single instructions; we send each as one user turn.
        return [Message(role="user", content=text)]

    def _rag(self, item) -> tuple[str, list[int]]:
        idx = self.retriever.search(item.character, item.query, self.rag_k)
        return "\n".join(f"{n}. {self.retriever.chunk(item.character, i)}" for n, i in enumerate(idx, 1)), idx

    def _cases(self, item) -> tuple[dict[str, str], list[str]]:
        cases = pick_cases(self.pool, item)
        fields = {f"case{i}": format_case(c) for i, c in enumerate(cases, 1)}
        for i in range(len(cases) + 1, 5):     # a pool too small for four cases
            fields[f"case{i}"] = "(none)"
        return fields, [c.id for c in cases]

    async def narrative(self, ctx: ItemContext, character: str):
        key = (ctx.strategy, ctx.repeat, character)
        task = self._narratives.get(key)
        if task is None:
            nctx = ItemContext(session=ctx.session, item_id=f"narrative:{character}", strategy=ctx.strategy,
                               repeat=ctx.repeat, meta={"character": character, "shared": True})
            prompt = prompts.S2RD_NARRATIVE.format(role_name=character)
            task = asyncio.ensure_future(nctx.chat("s2rd.narrative", self._user(prompt),
                                                   max_tokens=self.step_tokens))
            self._narratives[key] = task
        return await asyncio.shield(task)

    # -- methods ----------------------------------------------------------------------------
    async def answer(self, item, ctx: ItemContext, strategy: str):
        """Run one method on one item; returns the final answer record."""
        name, q = item.character, item.query
        meta: dict[str, Any] = {"query": q, "correct_memory": item.correct_memory}
        base = {"role_name": name, "given_query": q}
        if strategy in ("vanilla", "cot", "self-reflection"):
            tpl = prompts.COT if strategy == "cot" else prompts.VANILLA
            prompt = tpl.format(**base)
            if strategy == "self-reflection":
                draft = await ctx.chat("draft", self._user(prompt), max_tokens=self.step_tokens)
                prompt = prompts.SELF_REFLECTION.format(**base, self_response=draft.response or "")
        elif strategy == "few-shot":
            cases, ids = self._cases(item)
            prompt = prompts.FEW_SHOT.format(**base, **cases)
            meta["cases"] = ids
        elif strategy in ("rag", "rag-few-shot"):
            info, idx = self._rag(item)
            meta["rag_chunks"] = idx
            if strategy == "rag":
                prompt = prompts.RAG.format(**base, rag_information=info)
            else:
                cases, ids = self._cases(item)
                meta["cases"] = ids
                prompt = prompts.RAG_FEW_SHOT.format(**base, rag_information=info, **cases)
        elif strategy.startswith("s2rd"):
            prompt = await self._s2rd(item, ctx, strategy, meta)
        else:  # pragma: no cover - the suite checks names first
            raise ValueError(f"unknown strategy {strategy}")
        return await ctx.chat("answer", self._user(prompt), max_tokens=self.answer_tokens, meta=meta)

    async def _s2rd(self, item, ctx: ItemContext, strategy: str, meta: dict) -> str:
        name, q = item.character, item.query
        narr = (await self.narrative(ctx, name)).response or ""
        base = {"role_name": name, "given_query": q, "self_narrative": narr}
        rag_line = ""
        if strategy != "s2rd-no-recollection":
            rec = await ctx.chat("s2rd.recollection", self._user(prompts.S2RD_RECOLLECTION.format(**base)),
                                 max_tokens=self.step_tokens, meta={"m": self.m},
                                 parse=lambda t: parse_recollections(t, self.m))
            seeds = list(rec.parsed or [])
            # A reply with no usable memory: retrieve with the question itself (counted in metrics).
            idx = self.retriever.search_each(name, seeds) if seeds else self.retriever.search(name, q, self.m)
            meta["recollected"] = len(seeds)
            meta["self_rag_chunks"] = idx
            frags = "\n".join(f"{n}. {self.retriever.chunk(name, i)}" for n, i in enumerate(idx, 1))
            rag_line = prompts.S2RD_RAG_LINE.format(self_rag=frags)
        doubt_line = ""
        if strategy != "s2rd-no-doubt":
            doubt = await ctx.chat("s2rd.doubt", self._user(prompts.S2RD_DOUBT.format(**base, rag_line=rag_line)),
                                   max_tokens=self.step_tokens)
            doubt_line = prompts.S2RD_DOUBT_LINE.format(self_doubt=doubt.response or "")
        cases = pick_cases(self.pool, item)
        meta["cases"] = [c.id for c in cases]
        case_text = "\n" + "\n".join(f"Case{i}: {format_case(c)}" for i, c in enumerate(cases, 1))
        return prompts.S2RD_FINAL.format(**base, rag_line=rag_line, doubt_line=doubt_line, cases=case_text)

    # -- judge ------------------------------------------------------------------------------
    async def judge(self, ctx: ItemContext, *, character: str, error_type: str, correct_memory: str,
                    query: str, response: str, round_: int = 0, judge_spec: str | None = None):
        from ...rejudge import judge_stage

        tpl = prompts.JUDGE_KKE if error_type == "KKE" else prompts.JUDGE_UKE
        prompt = tpl.format(role_name=character, correct_memory=correct_memory, given_query=query,
                            given_response=response)
        meta = {"judge_round": round_, "judge_scoring": self.judge_scoring}
        if judge_spec:
            meta["judge"] = judge_spec
        if self.judge_scoring == "logprob":
            # parsed is "yes"/"no" exactly as in generate mode, so the metrics need not know the mode
            return await ctx.score(judge_stage(prompts.JUDGE_STAGE, round_), list(prompts.JUDGE_CHOICES), messages=self._user(prompt),
                                   assistant_prefix=prompts.JUDGE_PREFIX, role="judge", parse=_verdict, gold="yes",
                                   meta=meta)
        return await ctx.chat(judge_stage(prompts.JUDGE_STAGE, round_), self._user(prompt), role="judge", parse=prompts.judgment(),
                              gold="yes", max_tokens=self.judge_tokens, meta=meta)


def _verdict(choice: str) -> str:
    return choice.strip().lower()


# -- re-judging (`rolebound report RUN --judge MODEL`, rolebound.rejudge) ---------------------------
CONTEXT_KEYS = ("character", "category", "error_type", "memory_id")


def rejudge_plan(records, manifest, judge, judge_tokens):
    """Every final answer judged again; the new judge gets the default rule of judge_scoring (no
    --set here: logprob on the demo models)."""
    from ...rejudge import judge_modes
    from ..base import JudgePlan
    from .data import ERROR_TYPES

    answers = [r for r in records if r.stage == "answer" and r.role == "model" and r.error is None
               and r.meta.get("error_type") in ERROR_TYPES]
    mode = judge_scoring_mode(None, judge)
    modes = judge_modes(records)
    if not modes and manifest.judge:
        modes = {0: (manifest.options or {}).get("judge_scoring", "generate")}
    methods = Methods(judge_tokens=judge_tokens, judge_scoring=mode)

    async def judge_one(ctx, a, round_: int, judge_spec: str):
        await methods.judge(ctx, character=a.meta.get("character", ""), error_type=a.meta["error_type"],
                            correct_memory=a.meta.get("correct_memory", ""), query=a.meta.get("query", ""),
                            response=a.response or "", round_=round_, judge_spec=judge_spec)

    return JudgePlan(answers=answers, judge_one=judge_one, mode=mode, modes=modes,
                     context_meta=lambda a: {k: a.meta[k] for k in CONTEXT_KEYS if k in a.meta})
