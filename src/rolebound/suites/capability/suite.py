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
data.py, the calls and re-judging in strategies.py, the report in report.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ...io import file_sha256, stable_hash
from ...errors import CapabilityError
from ...models.base import CHAT, CHAT_TEMPLATE, COMPLETE, PREFILL
from ...protocol import Protocol
from .. import register_suite
from ..base import Dataset, RunSettings, Suite
from . import prompts, strategies
from .data import (BANK_FILE, DEFAULT_PER_LEVEL, CapabilityItem, RolesConfig, load_items, role_ids, run_roles,
                   select_items, stats_tables)
from .importers import csv_rows
from .judge import TEMPLATE as JUDGE_TEMPLATE, rubric_text
from .options import CapabilityOptions
from ...dialogue import STRATEGY as DIALOGUE, budget


@register_suite("capability")
class CapabilitySuite(Suite):
    description = "role-capability leakage: educational roles vs curriculum levels (RoleCapBench)"
    default_strategies = ["identity", "injection", "no-role"]
    options_model = CapabilityOptions
    card_limit = 8
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
        return run_roles(settings, self.opts(settings))

    def prompt_templates(self) -> dict[str, str]:
        return {**prompts.templates(), "judge": JUDGE_TEMPLATE, "judge_rubric": rubric_text()}

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        self._setup(settings)
        inj = [s for s in settings.strategies if s in prompts.INJECTION]
        if inj and (why := self.unavailable_strategies(backend, inj).get(inj[0])):
            hint = getattr(backend, "prefill_hint", "")
            if not hint:        # say what the backend lacks, in the usual words
                backend.require(COMPLETE, why)
                backend.require(CHAT_TEMPLATE, why)
            raise CapabilityError(f"strategy {inj[0]}: {why}; to enable it, {hint}")
        if any(s not in prompts.INJECTION for s in settings.strategies):
            backend.require(CHAT, "the chat-based variants")
        if DIALOGUE in settings.strategies:
            budget.setup(settings, backend)
        settings.state["judge_on"] = self.judge_enabled(settings, backend, judge)
        if settings.state["judge_on"]:
            (judge or backend).require(CHAT, "the judge scores RV, C, RC in a chat")

    def unavailable_strategies(self, backend, names: Sequence[str]) -> dict[str, str]:
        """Injection prefills the assistant turn: a raw completion over the model's chat template,
        or (vLLM) a chat that continues a final assistant message."""
        if not any(s in prompts.INJECTION for s in names) or backend.supports(PREFILL) or (
                backend.supports(COMPLETE) and backend.probe(CHAT_TEMPLATE)):
            return {}
        why = f"the {backend.backend} backend cannot prefill the assistant turn (no chat template, no prefill option)"
        return {s: why for s in names if s in prompts.INJECTION}

    def option_departures(self, options: dict[str, Any]) -> list[str]:
        out = []
        ids = role_ids(options.get("roles"))
        if ids is not None:
            out.append(f"roles={','.join(ids)} only (the paper asks every role)")
        per_level = options.get("per_level")
        if per_level not in (None, "all"):
            out.append(f"per_level={per_level}: {per_level} questions per level, not the whole bank")
        if options.get("judge") is False:
            out.append("judge=false: RV, C and RC not scored")
        return out

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
        chosen = select_items(items, limit, settings.state if settings is not None else {})
        if settings is not None and DIALOGUE in settings.strategies and "dialogue_backend" in settings.state:
            budget.check_context(settings.state["dialogue_backend"],
                                 [p for it in chosen for p in strategies.dialogue_probes(it, settings)], self.opts(settings))
        return chosen

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        return stats_tables(dataset)

    # -- work ----------------------------------------------------------------------------------
    async def before_items(self, session, dataset: Dataset, items: list, settings: RunSettings) -> None:
        budget.attach(session, settings)      # a dialogue's simulated user

    async def run_item(self, item: CapabilityItem, ctx, strategy: str, settings: RunSettings) -> None:
        self._setup(settings)
        await strategies.run_item(item, ctx, strategy, settings, self.opts(settings))

    # -- re-judging (`rolebound report RUN --judge MODEL`) ------------------------------------
    def rejudge(self, records, manifest, judge):
        """Every role-prompted answer judged again (stage judge.<role>@N); answers are never touched."""
        return strategies.rejudge_plan(self, records, manifest, judge)

    # -- results -------------------------------------------------------------------------------
    def metrics(self, records, manifest) -> dict[str, Any]:
        from .metrics import compute, dialogue

        out = compute(records, [s for s in manifest.strategies if s != DIALOGUE])
        if DIALOGUE in manifest.strategies:
            out["dialogue"] = dialogue(records)
        return out

    def judge_check(self):
        from .judgecheck import spec

        return spec()
