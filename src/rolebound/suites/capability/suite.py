"""capability: role-capability leakage (RoleCapBench).

Six educational roles with curriculum ceilings (Tables 1-2) answer four-option questions from
four levels under eight prompting variants (Appendix C) plus a no-role baseline. Answers are read
from the last `\\boxed{}` (Appendix D); TA, IA and A per role and macro-averaged (Table 3); an
optional LM judge scores RV, C and RC (Table 6).

    rolebound run capability --strategy identity,injection
    rolebound run capability --set roles=kindergarten,college --set judge=true --limit 8
    rolebound run capability --data my_exam.jsonl --set roles_file=my_roles.yaml

A runner item is one question; each role-prompted variant makes one call per role
(stage `answer.<role>`), no-role one call (stage `answer`). Roles, levels and questions live in
data.py, re-judging in rejudge.py, the report in report.py.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Sequence

from ...errors import InputError
from ...io import file_sha256, stable_hash
from . import metrics as cm
from ...models.base import CHAT, CHAT_TEMPLATE, COMPLETE
from ...report.builder import Report
from ...report.fmt import fmt_mean_sd
from .boxed import parse_boxed_letter
from . import judge as cj
from . import prompts as cp
from .. import register_suite
from ..base import Dataset, RunSettings, Suite, interleave
from ...protocol import Protocol
from .importers import csv_rows
from .options import CapabilityOptions
from ...dialogue import DESCRIPTION as DIALOGUE_DESCRIPTION, STRATEGY as DIALOGUE
from ...dialogue import budget
from .data import (BANK_FILE, DEFAULT_PER_LEVEL, ROLES_FILE, CapabilityItem, Role, RolesConfig,
                              load_items, load_roles)

# -- the suite -------------------------------------------------------------------------------------
@register_suite("capability")
class CapabilitySuite(Suite):
    name = "capability"
    description = "role-capability leakage: educational roles vs curriculum levels (RoleCapBench)"
    strategies = {
        "identity": "You are a <ROLE>. (C.1)",
        "description": "identity + capability and style boundaries (C.2)",
        "cot": "role-specific thinking template that guesses beyond the role (C.3)",
        "guideline": "rules forbidding knowledge beyond the role (C.4)",
        "explicit-idk": "answer idk beyond the role's capability (C.5)",
        "syllabus": "explicit-idk + the role's curriculum knowledge (C.6)",
        "injection": "guidelines + prefilled assistant turn, raw completion (C.7)",
        "injection-syllabus": "injection + the role's curriculum knowledge (C.8)",
        "no-role": "the question alone, once per question (baseline)",
        DIALOGUE: DIALOGUE_DESCRIPTION + "; each role's Identity question",
    }
    default_strategies = ["identity", "injection", "no-role"]
    uses_judge = True
    options_model = CapabilityOptions
    card_limit = 8  # `rolebound card`: --limit of its quick, balanced subset (docs/card.md)
    # Section F, Table 7: a maximum generation length of 32,768 tokens, top_p 0.95, temperature 1.0
    # (Gemma-4-E4B-IT, Qwen3.5-4B; OLMo-3-7B-Think used 0.6). Appendix E: the judge (GPT-OSS-20B)
    # at temperature 0, top_p 1, at most 4,096 tokens; the judge is exploratory, so optional here.
    protocol = Protocol(source="RoleCapBench Section F (Table 7) and Appendix E",
                        decoding={"temperature": 1.0, "top_p": 0.95, "max_tokens": 32768},
                        judge_decoding={"temperature": 0.0, "top_p": 1.0, "max_tokens": 4096},
                        judge_separate=True,
                        notes="temperature 1.0 is Gemma's and Qwen's (OLMo-3: 0.6); the RV/C/RC judge runs "
                              "with --judge or --set judge=true")

    # -- settings ------------------------------------------------------------------------------
    def _setup(self, settings: RunSettings) -> RolesConfig:
        """The run's roles file and chosen roles, in settings.state (read once per run)."""
        st = settings.state
        if "cfg" not in st:
            opts = self.opts(settings)
            path = opts.roles_file or ROLES_FILE
            if not Path(path).exists():
                raise InputError("roles file not found", file=str(path), field="roles_file")
            st["cfg"] = load_roles(path)
            st["roles"] = self._pick_roles(st["cfg"], opts.roles)
        return st["cfg"]

    @staticmethod
    def _pick_roles(cfg: RolesConfig, value: Any) -> list[Role]:
        allr = cfg.roles
        if value in (None, "", "all"):
            return list(allr)
        ids = value if isinstance(value, list) else str(value).split(",")
        ids = [str(x).strip() for x in ids if str(x).strip()]
        byid = {r.id: r for r in allr}
        if not ids:
            raise InputError(f"no role given; roles: {', '.join(byid)}", field="roles")
        bad = [x for x in ids if x not in byid]
        if bad:
            raise InputError(f"unknown role '{bad[0]}'; roles: {', '.join(byid)}", field="roles")
        return [r for r in allr if r.id in ids]   # keep the ladder's order

    def prompt_templates(self) -> dict[str, str]:
        return {**cp.templates(), "judge": cj.TEMPLATE, "judge_rubric": cj.rubric_text()}

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        self._setup(settings)
        inj = [s for s in settings.strategies if s in cp.INJECTION]
        if inj:
            why = f"{inj[0]} serialises the prompt with the model's chat template and prefills the assistant turn"
            backend.require(COMPLETE, why)
            backend.require(CHAT_TEMPLATE, why)
        if any(s not in cp.INJECTION for s in settings.strategies):
            backend.require(CHAT, "the chat-based variants")
        if DIALOGUE in settings.strategies:
            budget.setup(settings, backend)
        settings.state["judge_on"] = self.judge_enabled(settings, backend, judge)
        if settings.state["judge_on"]:
            (judge or backend).require(CHAT, "the judge scores RV, C, RC in a chat")

    def judge_enabled(self, settings: RunSettings, backend, judge=None) -> bool:
        # Off unless asked for: --set judge=true, --judge self, or --judge naming another model.
        asked = judge is not None and (judge is not backend or settings.judge_requested)
        on = self.opts(settings).judge
        return asked if on is None else on

    # -- data ----------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        cfg = self._setup(settings)
        path = Path(data) if data else BANK_FILE
        rows = csv_rows(path) if path.suffix.lower() == ".csv" and path.exists() else None
        items = load_items(path, cfg, rows)
        settings.state["capability_items"] = items       # the dialogue's `items` warm-up
        opt = self.opts(settings).per_level
        if opt is None:
            small = settings.backend is None or settings.demo    # None: no backend (data stats, tests)
            per_level = DEFAULT_PER_LEVEL if small and not data and settings.limit is None else None
        else:
            per_level = None if opt == "all" else opt
        settings.state["per_level"] = per_level
        roles_hash = stable_hash(cfg.model_dump())
        source = "builtin:capability/bank.jsonl" if not data else str(path)
        return Dataset(items=items, source=source, hash=stable_hash([file_sha256(path), roles_hash]),
                       extra={"roles": cfg})

    def select(self, items: Sequence[CapabilityItem], limit: int | None,
               settings: RunSettings | None = None) -> list[CapabilityItem]:
        """Balanced: round-robin over levels, and over subjects inside each level; at most the
        run's per_level questions per level (load() puts it in settings.state)."""
        st = settings.state if settings is not None else {}
        ranks = st["cfg"].level_rank() if "cfg" in st else {}
        cap = st.get("per_level")
        by_level: dict[str, list] = {}
        for it in items:
            by_level.setdefault(it.level, []).append(it)
        per_level = []
        for k, lv in enumerate(sorted(by_level, key=lambda k: ranks.get(k, 99))):
            subj: dict[str, list] = {}
            for it in by_level[lv]:
                subj.setdefault(it.subject, []).append(it)
            names = sorted(subj)
            names = names[k % len(names):] + names[: k % len(names)]   # each level starts on another subject
            order = interleave([subj[s] for s in names])
            per_level.append(order[:cap] if cap else order)
        out = interleave(per_level)
        out = out[:limit] if limit else out
        if settings is not None and DIALOGUE in settings.strategies and "dialogue_backend" in st:
            from .dialogue import probes

            budget.check_context(st["dialogue_backend"], [p for it in out for p in probes(
                self, it, settings, lambda role: {})], self.opts(settings))
        return out

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        import pandas as pd

        cfg = dataset.extra["roles"]
        df = pd.DataFrame([{"level": it.level, "subject": it.subject, "answer": it.answer,
                            "passage": bool(it.passage)} for it in dataset.items])
        order = [lv.id for lv in cfg.levels if lv.id in set(df["level"])]
        counts = pd.crosstab(df["level"], df["subject"], margins=True, margins_name="total")
        counts = counts.reindex(order + ["total"])
        letters = pd.crosstab(df["level"], df["answer"]).reindex(order)
        ranks = cfg.level_rank()
        roles = pd.DataFrame([{
            "role": r.id, "prompt name": r.name,
            "ceiling": r.ceiling or "none in benchmark",
            "in-role levels": ", ".join(lv.id for lv in cfg.levels
                                        if r.ceiling is not None and ranks[lv.id] <= ranks[r.ceiling]) or "-",
            "in-role items": sum(1 for it in dataset.items
                                 if r.ceiling is not None and ranks[it.level] <= ranks[r.ceiling]),
        } for r in cfg.roles]).set_index("role")
        return [("Items by level and subject", counts), ("Gold letters by level", letters),
                ("Roles and ceilings (Tables 1-2)", roles)]

    # -- work ----------------------------------------------------------------------------------
    @staticmethod
    def _base_meta(cfg: RolesConfig, item: CapabilityItem) -> dict[str, Any]:
        ranks = cfg.level_rank()
        lv = cfg.levels[ranks[item.level]]
        return {"level": item.level, "level_name": lv.name, "level_rank": ranks[item.level],
                "subject": item.subject}

    async def before_items(self, session, dataset: Dataset, items: list, settings: RunSettings) -> None:
        budget.attach(session, settings)

    async def run_item(self, item: CapabilityItem, ctx, strategy: str, settings: RunSettings) -> None:
        cfg = self._setup(settings)
        base = self._base_meta(cfg, item)
        if strategy == DIALOGUE:
            from ...dialogue.run import run_probes
            from .dialogue import probes

            await run_probes(ctx, probes(self, item, settings, lambda role: self._role_meta(cfg, role, base)),
                             settings, self.opts(settings))
            return
        if strategy == cp.NO_ROLE:
            await ctx.chat("answer", cp.chat_messages(cp.NO_ROLE, item, None, {}), parse=parse_boxed_letter,
                           gold=item.answer, meta={**base, "role": None, "in_role": None})
            return
        results = await asyncio.gather(*(self._one_role(item, ctx, strategy, role, base, settings)
                                         for role in settings.state["roles"]), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res

    @staticmethod
    def _role_meta(cfg: RolesConfig, role: Role, base: dict) -> dict[str, Any]:
        ranks = cfg.level_rank()
        ceiling = ranks[role.ceiling] if role.ceiling is not None else -1
        return {**base, "role": role.id, "role_label": role.label,
                "role_rank": [r.id for r in cfg.roles].index(role.id), "ceiling": role.ceiling,
                "in_role": base["level_rank"] <= ceiling}

    async def _one_role(self, item, ctx, strategy: str, role: Role, base: dict, settings: RunSettings):
        cfg = self._setup(settings)
        meta = self._role_meta(cfg, role, base)
        stage = f"answer.{role.id}"
        routes = cfg.subject_routes
        if strategy in cp.INJECTION:
            msgs, prefill = cp.injection_parts(strategy, item, role, routes)
            # the model's own reasoning opener (its chat template, or the think_tag backend option)
            tag = self.opts(settings).think_tag
            tag = ctx.backend.thinking_markup() if tag is None else str(tag)
            meta["think_tag"] = tag
            raw = cp.serialise_injection(ctx.backend.render_chat(msgs, add_generation_prompt=True), prefill, tag)
            rec = await ctx.complete(stage, raw, parse=parse_boxed_letter, gold=item.answer, meta=meta)
        else:
            rec = await ctx.chat(stage, cp.chat_messages(strategy, item, role, routes), parse=parse_boxed_letter,
                                 gold=item.answer, meta=meta)
        if settings.state.get("judge_on"):
            jmax = self.opts(settings).judge_max_tokens
            await ctx.chat(f"judge.{role.id}", cj.judge_messages(role, item, rec.response), role="judge",
                           parse=cj.parse_judge, meta={**meta, "judged": rec.call_id},
                           max_tokens=int(jmax) if jmax else None)

    # -- re-judging (`rolebound report RUN --judge MODEL`) ------------------------------------
    def rejudge(self, run_dir: Path, judge_spec: str, *, progress: bool = True) -> int:
        """Judge every role-prompted answer of a finished run again with another judge model;
        returns the number of answers judged. Answers are never touched."""
        from .rejudge import rejudge

        return rejudge(self, Path(run_dir), judge_spec, progress=progress)

    # -- results -------------------------------------------------------------------------------
    def metrics(self, records, manifest) -> dict[str, Any]:
        out = cm.compute(records, [s for s in manifest.strategies if s != DIALOGUE])
        if DIALOGUE in manifest.strategies:
            from .dialogue import compute as dialogue_compute

            out["dialogue"] = dialogue_compute(records)
        return out

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for strat, m in metrics.get("by_strategy", {}).items():
            mac = m["macro"]
            out.append((strat, f"TA {fmt_mean_sd(mac['TA']['mean'])}  IA {fmt_mean_sd(mac['IA']['mean'])}  "
                               f"A {fmt_mean_sd(mac['A']['mean'])}  (valid boxed answers "
                               f"{m['outcomes']['valid']}/{m['outcomes']['total']})"))
        if metrics.get("no_role"):
            nr = metrics["no_role"]
            out.append(("no-role", f"TA {fmt_mean_sd(nr['TA'])} (valid boxed answers "
                                   f"{nr['outcomes']['valid']}/{nr['outcomes']['total']})"))
        from ...dialogue.report import summary_lines

        return out + summary_lines(metrics.get("dialogue"))

    def card_figures(self, metrics) -> dict[str, Any]:
        from .card import card_figures

        return card_figures(metrics)

    def compare(self, rep: Report, entries) -> None:
        from .report import compare_tables

        compare_tables(rep, entries)

    def report(self, metrics, records, manifest, run_dir) -> list[Path]:
        from .report import write_report

        return write_report(metrics, records, manifest, run_dir)

