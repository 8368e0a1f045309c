"""CHARM: Boundary-Awareness vs Boundary-Compliance for temporal and cross-universe boundaries.

Strategies
- independent (the paper's protocol, Section 3.1): BA, BC and KV questions each in a fresh
  conversation.
- sequential (Appendix M, Table 15): for each BC question, the paired BA question first, then the
  BC question in the same conversation.
- no-role (Appendix N, Table 16): the Cross-Universe BC questions with no role at all.

Scoring
- generate (the paper's mode): Table 19/20 prompts; replies read by scoring.choice (in-character
  Yes/No, the last committed option by number or text), or with extraction=strict by the paper's
  leading Yes/No and last `Answer: <n>`.
- logprob: same prompts; BA compares "Yes" vs "No" as the reply's first token, MCQs compare the
  digits after an assistant turn prefilled with "Answer: " (the reasoning step is skipped).
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from ...errors import InputError
from ...records import Message
from ...scoring import extract
from .. import register_suite
from ..base import Dataset, RunSettings, Suite
from ...protocol import Protocol
from .options import CharmOptions
from ...dialogue import DESCRIPTION as DIALOGUE_DESCRIPTION, STRATEGY as DIALOGUE
from ...dialogue import budget
from .data import ABSTAIN, CharmItem, data_hash, expand, load_data

# Table 19 (BA). Line breaks restored where the paper's table layout had them.
BA_PROMPT = ("You are {character}. Please answer the following question as {character}. "
             "And there is a {character} profile: {profile}.\n"
             "Question: {question}\n"
             "Answer only \u201cYes\u201d or \u201cNo\u201d.\n"
             "Answer:")
# Table 20 (BC and KV).
MCQ_PROMPT = ("You are {character}. Please read the following multiple-choice question and select the correct "
              "answer. Your response should be made as if you are {character}, and you must choose the answer that "
              "{character} would most likely provide. And there is a {character} profile: {profile}. "
              "Now select the correct answer.\n"
              "Question: {question}\n"
              "Choices:\n{choices}\n"
              "First, briefly explain your reasoning. Then, state your final answer on the last line in the "
              "format: Answer: <number>")
# Appendix N: the same MCQ with no role assigned (the paper gives no template; Table 20 minus the role).
NO_ROLE_PROMPT = ("Please read the following multiple-choice question and select the correct answer.\n"
                  "Question: {question}\n"
                  "Choices:\n{choices}\n"
                  "First, briefly explain your reasoning. Then, state your final answer on the last line in the "
                  "format: Answer: <number>")
ANSWER_PREFIX = "Answer: "


def choices_text(options: list[str]) -> str:
    return "\n".join(f"{i}. {o}" for i, o in enumerate(options, 1))


def ba_prompt(item: CharmItem, question: str | None = None) -> str:
    return BA_PROMPT.format(character=item.role_name, profile=item.profile, question=question or item.question)


def mcq_prompt(item: CharmItem) -> str:
    return MCQ_PROMPT.format(character=item.role_name, profile=item.profile, question=item.question,
                             choices=choices_text(item.options or []))


def no_role_prompt(item: CharmItem) -> str:
    return NO_ROLE_PROMPT.format(question=item.question, choices=choices_text(item.options or []))


def _yes_no_cont(text: str) -> str:
    return text.strip()


@register_suite("charm")
class CharmSuite(Suite):
    name = "charm"
    description = "temporal and cross-universe knowledge boundaries: awareness vs compliance (CHARM)"
    strategies = {
        "independent": "BA, BC and KV each in a fresh conversation (the paper's protocol)",
        "sequential": "BA then BC in one conversation (Appendix M, Table 15)",
        "no-role": "Cross-Universe BC questions with no role (Appendix N, Table 16)",
        DIALOGUE: DIALOGUE_DESCRIPTION + "; BA and BC probes",
    }
    default_strategies = ["independent"]
    offers_scoring = True
    options_model = CharmOptions
    card_limit = 600  # `rolebound card`: --limit of its quick, balanced subset (docs/card.md)
    # Appendix H: every model at temperature 0.0, top_p 0.95, max_completion_tokens 256, answers
    # generated ("First, briefly explain your reasoning ... Answer: <number>", Table 20).
    protocol = Protocol(source="CHARM Appendix H", scoring="generate",
                        decoding={"temperature": 0.0, "top_p": 0.95, "max_tokens": 256})

    def __init__(self):
        self._extraction = "rules"

    # -- data -------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        opts = self.opts(settings)
        files = [f.strip() for f in str(data).split(",") if f.strip()] if data else []
        builtin = opts.builtin
        if not builtin and not files:
            raise InputError("builtin=false needs --data FILE", field="builtin")
        d, sources = load_data(files, builtin=builtin)
        if not d.concepts and not d.facts:
            raise InputError("no concepts or facts to ask about", file=sources[-1] if sources else None)
        seed = opts.data_seed
        items, info = expand(d, seed=seed)
        settings.state["charm_items"] = items        # the dialogue's `items` warm-up reads the role's others
        src = "builtin:charm" + ("+" + ",".join(files) if files else "") if builtin else ",".join(files)
        return Dataset(items=items, source=src, hash=data_hash(d, seed), extra={"data": d, **info})

    def select(self, items, limit, settings=None):
        """Keep whole instances: BC questions taken round-robin over (region, boundary), plus the
        BA and KV questions they pair with, until about `limit` questions. A dialogue-only run
        asks BA and BC only, so --limit counts those probes (never the warm-up turns)."""
        if settings is not None and settings.strategies == [DIALOGUE]:
            items = [i for i in items if i.stage in ("ba", "bc")]
        chosen = self._select(items, limit)
        if settings is not None and DIALOGUE in settings.strategies and "dialogue_backend" in settings.state:
            from .dialogue import probes

            scoring = settings.scoring or "generate"
            budget.check_context(settings.state["dialogue_backend"],
                                 [p for i in chosen for p in probes(self, i, settings, scoring)], self.opts(settings))
        return chosen

    def _select(self, items, limit):
        if not limit or limit >= len(items):
            return list(items)
        by_id = {i.id: i for i in items}
        groups: dict[tuple, list] = defaultdict(list)
        for i in items:
            if i.stage == "bc":
                groups[(i.region, i.boundary)].append(i)
        keep: set[str] = set()
        queues = [list(v) for _, v in sorted(groups.items())]
        while len(keep) < limit and any(queues):
            for q in queues:
                if not q or len(keep) >= limit:
                    continue
                bc = q.pop(0)
                keep.update(x for x in (bc.id, bc.ba_id, bc.kv_id) if x and x in by_id)
        return [i for i in items if i.id in keep]

    def stats(self, dataset: Dataset):
        import pandas as pd

        rows = defaultdict(Counter)
        for i in dataset.items:
            col = {"ba": "BA", "bc": "BC", "kv": "KV"}[i.stage] + " " + ("Temp" if i.boundary == "temporal" else "Cross")
            rows[i.region][col] += 1
        cols = ["BA Temp", "BA Cross", "BC Temp", "BC Cross", "KV Cross"]
        df = pd.DataFrame([[rows[r][c] for c in cols] for r in rows], index=list(rows), columns=cols)
        df["Total"] = df.sum(axis=1)
        df.loc["Total"] = df.sum(axis=0)
        df.index.name = "Region"
        d = dataset.extra["data"]
        chars = pd.DataFrame([{"region": c.region, "period": c.period, "reality": c.reality} for c in d.characters])
        by_char = chars.groupby(["region", "period", "reality"]).size().unstack(fill_value=0) if len(chars) else chars
        tables = [("Table 7: questions by region, boundary type and question type", df),
                  ("Characters by region, period and reality status", by_char)]
        facts = Counter(f.target for f in d.facts)
        cont = [c for c in d.characters if c.period == "contemporary"]
        tables.append(("Target facts per contemporary character",
                       pd.DataFrame({"region": [c.region for c in cont], "facts": [facts[c.id] for c in cont]},
                                    index=pd.Index([c.name for c in cont], name="character"))))
        if dataset.extra.get("skipped_pairs") or dataset.extra.get("skipped_cross_pairs"):
            tables.append(("Skipped pairs (no boundary: the concept or target is known inside the role's years)",
                           pd.DataFrame({"temporal (concept year <= era_end)": [dataset.extra.get("skipped_pairs", 0)],
                                         "cross-universe (target known_since <= era_end)":
                                             [dataset.extra.get("skipped_cross_pairs", 0)]})))
        return tables

    def prompt_templates(self) -> dict[str, str]:
        return {"ba": BA_PROMPT, "mcq": MCQ_PROMPT, "no_role": NO_ROLE_PROMPT, "answer_prefix": ANSWER_PREFIX}

    # -- run --------------------------------------------------------------------------------
    def check(self, backend, settings: RunSettings, judge=None) -> None:
        if DIALOGUE in settings.strategies:
            self.opts(settings)
            budget.setup(settings, backend)

    async def before_items(self, session, dataset: Dataset, items, settings: RunSettings) -> None:
        """Distractor-to-answer similarity per MCQ (Table 14), stored in each record's meta."""
        budget.attach(session, settings)
        if not self.opts(settings).similarity or settings.strategies == [DIALOGUE]:
            return
        mcqs = [i for i in items if i.stage in ("bc", "kv") and i.answer]
        if not mcqs:
            return
        from ...scoring.embeddings import embedder_name, mean_similarity

        path = self.opts(settings).embedder
        groups = {i.id: (i.answer, [o for o in i.options if o not in (i.answer, ABSTAIN)]) for i in mcqs}
        # cached on disk by the option texts and the embedder (a re-run loads no model)
        settings.state["sim"] = await asyncio.to_thread(mean_similarity, groups, path)
        settings.state["embedder"] = embedder_name(path)

    @staticmethod
    def _meta(item: CharmItem, settings: RunSettings) -> dict[str, Any]:
        m = item.meta()
        sim = settings.state.get("sim") or {}
        if item.id in sim:
            m["sim"], m["embedder"] = sim[item.id], settings.state.get("embedder")
        return m

    async def _ba(self, ctx, stage: str, item: CharmItem, messages: list[Message], scoring: str, meta,
                  question: str | None = None):
        if scoring == "logprob":
            return await ctx.score(stage, ["Yes", "No"], messages=messages, parse=_yes_no_cont, gold="No", meta=meta)
        strict = self._extraction == "strict"
        return await ctx.chat(stage, messages, parse=extract.yes_no(question or item.question, strict=strict),
                              gold="No", meta=meta)

    async def _mcq(self, ctx, stage: str, messages: list[Message], item: CharmItem, gold: int, scoring: str, meta):
        n = len(item.options or [])
        if scoring == "logprob":
            return await ctx.score(stage, [str(k) for k in range(1, n + 1)], messages=messages,
                                   assistant_prefix=ANSWER_PREFIX, parse=int, gold=gold, meta=meta)
        # the options as choices_text shows them: "1. ...", "2. ..."; parsed stays the 1-based number
        options = [(str(k), o) for k, o in enumerate(item.options or [], 1)]
        parse = extract.answer_number(options) if self._extraction == "strict" else extract.choice(options, "number")
        return await ctx.chat(stage, messages, parse=parse, gold=gold, meta=meta)

    async def run_item(self, item: CharmItem, ctx, strategy: str, settings: RunSettings) -> None:
        scoring = settings.scoring or "generate"
        self._extraction = self.opts(settings).extraction
        meta = self._meta(item, settings)
        if strategy == "independent":
            if item.stage == "ba":
                await self._ba(ctx, "ba", item, [Message(role="user", content=ba_prompt(item))], scoring, meta)
            else:
                await self._mcq(ctx, item.stage, [Message(role="user", content=mcq_prompt(item))], item,
                                int(item.gold), scoring, meta)
        elif strategy == "sequential":
            if item.stage != "bc":
                return
            first = [Message(role="user", content=ba_prompt(item, item.ba_question))]
            ba = await self._ba(ctx, "seq.ba", item, first, scoring, meta, question=item.ba_question)
            convo = first + [Message(role="assistant", content=ba.response or ""),
                             Message(role="user", content=mcq_prompt(item))]
            await self._mcq(ctx, "seq.bc", convo, item, int(item.gold), scoring, meta)
        elif strategy == DIALOGUE:
            from ...dialogue.run import run_probes
            from .dialogue import probes

            await run_probes(ctx, probes(self, item, settings, scoring), settings, self.opts(settings))
        elif strategy == "no-role":
            if item.stage != "bc" or item.boundary != "cross":
                return
            # correct = the factual answer: the control asks whether the fact is accessible at all
            await self._mcq(ctx, "nr", [Message(role="user", content=no_role_prompt(item))], item,
                            int(item.fact_option), scoring, meta)

    # -- results ----------------------------------------------------------------------------
    def extractor_for(self, record):
        """How to read a stored reply that predates stored extractor specs (`rolebound report`)."""
        if record.role != "model" or not isinstance(record.prompt, list) or not record.prompt:
            return None
        text = record.prompt[-1].get("content") or ""
        if record.stage in ("ba", "seq.ba"):
            q = re.search(r"Question: (.*)", text)
            return extract.yes_no(q.group(1).strip() if q else None)
        if "Choices:\n" in text:
            block = text.split("Choices:\n", 1)[1].split("\nFirst, briefly", 1)[0]
            options = re.findall(r"(?m)^(\d+)\. (.*)$", block)
            return extract.choice(options, "number") if options else None
        return None

    def model_extraction_candidates(self, records):
        from ...scoring.model_extract import rule_none

        return rule_none(records)     # BA Yes/No and BC/KV options the rules read as none

    def metrics(self, records, manifest) -> dict[str, Any]:
        from .metrics import compute

        out = compute(records)
        out["scoring"] = manifest.scoring
        if DIALOGUE in manifest.strategies:
            from .dialogue import compute as dialogue_compute

            out["dialogue"] = dialogue_compute(records)
        return out

    def summary(self, metrics) -> list[tuple[str, str]]:
        from ...report.fmt import fmt_rate

        from ...dialogue.report import summary_lines

        m = metrics.get("matrix", {}).get("all", {})
        if not m or not m.get("n"):
            return summary_lines(metrics.get("dialogue"))
        acc = metrics.get("stage_accuracy", {})
        ov = metrics.get("override", {})
        return [("instances (BC paired with BA)", str(m["n"])),
                ("BA acc %", fmt_rate(acc.get("ba/all"))), ("BC acc %", fmt_rate(acc.get("bc/all"))),
                ("Compliance Gap %", fmt_rate(m.get("compliance_gap"))),
                ("Recognition Failure %", fmt_rate(m.get("recognition_failure"))),
                ("verified override %", f"{fmt_rate(ov)} ({ov.get('ba_pos_fc_bc_fc_kv', 0)}/{ov.get('ba_pos_fc_bc', 0)})")
                ] + summary_lines(metrics.get("dialogue"))

    def card_figures(self, metrics) -> dict[str, Any]:
        from .card import card_figures

        return card_figures(metrics)

    def report(self, metrics, records, manifest, run_dir) -> list[Path]:
        from .report import write_report

        return write_report(metrics, records, manifest, run_dir)

    def compare(self, rep, entries) -> None:
        from .report import compare_tables

        compare_tables(rep, entries)
