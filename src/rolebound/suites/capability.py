"""capability: role-capability leakage (RoleCapBench).

Six educational roles with curriculum ceilings (Tables 1-2) answer four-option questions from
four levels under eight prompting variants (Appendix C) plus a no-role baseline. Answers are read
from the last `\\boxed{}` (Appendix D); TA, IA and A per role and macro-averaged (Table 3); an
optional LM judge scores RV, C and RC (Table 6).

    rolebound run capability --strategy identity,injection
    rolebound run capability --set roles=kindergarten,college --set judge=true --limit 8
    rolebound run capability --data my_exam.jsonl --set roles_file=my_roles.yaml

A runner item is one question; each role-prompted variant makes one call per role
(stage `answer.<role>`), no-role one call (stage `answer`).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import InputError
from ..io import file_sha256, line_of, read_yaml, stable_hash, validate_record, validate_yaml
from ..metrics import capability as cm
from ..models.base import CHAT, CHAT_TEMPLATE, COMPLETE
from ..report.builder import Report, run_facts
from ..scoring.boxed import KINDS, normalize_gold, parse_boxed_letter
from ..strategies import capability_judge as cj
from ..strategies import capability_prompts as cp
from .base import Dataset, RunSettings, Suite

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "capability"
ROLES_FILE = DATA_DIR / "roles.yaml"
BANK_FILE = DATA_DIR / "bank.jsonl"
LETTERS = "ABCD"
# The starter bank on the bundled CPU model without --limit: questions per level, so that all six
# roles x identity, injection, no-role stay within a few minutes. Other models get the whole bank;
# --set per_level=N|all overrides.
DEFAULT_PER_LEVEL = 2
OPTIONS = {"roles": "comma-separated role ids (default: all)",
           "roles_file": "YAML of levels and roles (default: the built-in roles.yaml)",
           "per_level": "questions per level, or 'all' (default: all; 2 for the starter bank on the bundled model)",
           "judge": "true: score RV, C, RC with the judge model (on by default when --judge differs from --model)",
           "judge_max_tokens": "token limit of judge calls (default: --max-tokens)",
           "think_tag": "reasoning marker before the Injection prefill (default '<think>\\n'; '' for none)"}


def level_key(s: Any) -> str:
    return re.sub(r"[\s\-_]+", "_", str(s).strip().lower())


# -- roles and levels ----------------------------------------------------------------------------
class Level(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    description: str = ""


class CotSlots(BaseModel):
    """The role-specific slots of the CoT prompt (Appendix C.3)."""
    model_config = ConfigDict(extra="forbid")
    reasoning: str
    knows: str
    can_reason: str
    does_not_know: str
    ideas: str
    avoid: str


class Role(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    label: str | None = None
    article: str = "a"
    ceiling: str | None
    capability: str
    style: str
    knowledge: dict[str, str]
    cot: CotSlots
    note: str | None = None

    @model_validator(mode="after")
    def _defaults(self):
        if "default" not in self.knowledge:
            raise ValueError("knowledge needs a 'default' entry (used for subjects without a route)")
        self.label = self.label or self.name
        return self

    def knowledge_for(self, subject: str | None, routes: dict[str, str]) -> str:
        s = str(subject or "").strip().lower()
        key = routes.get(s, s)
        return (self.knowledge.get(key) or self.knowledge["default"]).strip()


class RolesConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    levels: list[Level] = Field(min_length=1)
    roles: list[Role] = Field(min_length=1)
    subject_routes: dict[str, str] = Field(default_factory=dict)
    source: str | None = None
    note: str | None = None
    validated: bool | None = None

    def level_rank(self) -> dict[str, int]:
        return {lv.id: i for i, lv in enumerate(self.levels)}

    def resolve_level(self, value: Any) -> str | None:
        k = level_key(value)
        for lv in self.levels:
            if k in (level_key(lv.id), level_key(lv.name)):
                return lv.id
        return None


def load_roles(path: str | Path = ROLES_FILE) -> RolesConfig:
    raw = read_yaml(path)
    cfg = validate_yaml(RolesConfig, raw, file=path)
    seen: set[str] = set()
    for i, lv in enumerate(cfg.levels):
        if lv.id in seen:
            raise InputError(f"duplicate level id '{lv.id}'", file=str(path),
                             line=line_of(raw, ["levels", i, "id"]), field=f"levels[{i}].id")
        seen.add(lv.id)
    rids: set[str] = set()
    for i, r in enumerate(cfg.roles):
        if r.id in rids:
            raise InputError(f"duplicate role id '{r.id}'", file=str(path),
                             line=line_of(raw, ["roles", i, "id"]), field=f"roles[{i}].id")
        rids.add(r.id)
        if r.ceiling is not None:
            lid = cfg.resolve_level(r.ceiling)
            if lid is None:
                raise InputError(f"ceiling '{r.ceiling}' is not a level ({', '.join(seen)}) or null",
                                 file=str(path), line=line_of(raw, ["roles", i, "ceiling"]),
                                 field=f"roles[{i}].ceiling")
            r.ceiling = lid
    cfg.subject_routes = {k.strip().lower(): v for k, v in cfg.subject_routes.items()}
    return cfg


# -- items -----------------------------------------------------------------------------------------
class CapabilityItem(BaseModel):
    """One question: level, subject, optional passage, question, options A-D, gold letter."""
    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1)
    level: str = Field(min_length=1)
    subject: str = Field(min_length=1)
    passage: str | None = None
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=4, max_length=4)
    answer: str
    source: str | None = None
    note: str | None = None
    validated: bool | None = None

    @field_validator("id", "level", "subject", mode="before")
    @classmethod
    def _str(cls, v):
        return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v

    @model_validator(mode="before")
    @classmethod
    def _shape(cls, data: Any):
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "answer" not in data and "gold" in data:
            data["answer"] = data.pop("gold")
        opts = data.get("options")
        if isinstance(opts, dict):
            keys = sorted(opts)
            if [k.strip().upper() for k in keys] != list(LETTERS):
                raise ValueError("options as a mapping need exactly the keys A, B, C, D")
            data["options"] = [str(opts[k]) for k in keys]
            opts = data["options"]
        ans = data.get("answer")
        if isinstance(ans, str) and isinstance(opts, list):
            g = normalize_gold(ans)
            if g not in LETTERS and ans.strip() in [str(o).strip() for o in opts]:
                g = LETTERS[[str(o).strip() for o in opts].index(ans.strip())]
            data["answer"] = g
        return data

    @field_validator("answer")
    @classmethod
    def _letter(cls, v: str) -> str:
        if v not in LETTERS:
            raise ValueError(f"answer must be one of A, B, C, D (or an option's exact text), not {v!r}")
        return v

    @field_validator("options")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if any(not str(o).strip() for o in v):
            raise ValueError("options must not be empty")
        if len({str(o).strip() for o in v}) != 4:
            raise ValueError("the four options must differ")
        return v


def read_items(path: str | Path) -> list[tuple[int, CapabilityItem]]:
    """(line, item) from our JSONL schema, or a CSV with the importer's columns."""
    path = Path(path)
    if not path.exists():
        raise InputError("file not found", file=str(path))
    if path.suffix.lower() == ".csv":
        from ..importers.capability import csv_rows

        rows = csv_rows(path)
    else:
        import json

        rows = []
        with path.open(encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, 1):
                s = raw.strip()
                if not s or s.startswith("#"):
                    continue
                try:
                    rows.append((lineno, json.loads(s)))
                except json.JSONDecodeError as exc:
                    raise InputError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=str(path),
                                     line=lineno) from None
    return [(ln, validate_record(CapabilityItem, obj, file=path, line=ln)) for ln, obj in rows]


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


def interleave(groups: Sequence[Sequence[Any]]) -> list[Any]:
    """Round-robin over groups: a, b, c, a, b, c, ..."""
    out, i = [], 0
    while any(i < len(g) for g in groups):
        out.extend(g[i] for g in groups if i < len(g))
        i += 1
    return out


# -- the suite -------------------------------------------------------------------------------------
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
    }
    default_strategies = ["identity", "injection", "no-role"]
    uses_judge = True

    def __init__(self):
        self.cfg: RolesConfig | None = None
        self._cfg_key: str | None = None
        self.roles: list[Role] = []
        self.judge_on = False
        self.per_level: int | None = None
        self.backend_kind: str | None = None

    # -- settings ------------------------------------------------------------------------------
    def _setup(self, settings: RunSettings) -> RolesConfig:
        opts = settings.options
        unknown = [k for k in opts if k not in OPTIONS]
        if unknown:
            raise InputError(f"unknown option '{unknown[0]}'; capability options: "
                             + "; ".join(f"{k}: {v}" for k, v in OPTIONS.items()), field="--set")
        path = opts.get("roles_file") or ROLES_FILE
        if self.cfg is None or self._cfg_key != str(path):
            if not Path(path).exists():
                raise InputError("roles file not found", file=str(path), field="roles_file")
            self.cfg, self._cfg_key = load_roles(path), str(path)
        self.roles = self._pick_roles(opts.get("roles"))
        if "per_level" in opts and str(opts["per_level"]).lower() != "all":
            try:
                n = int(opts["per_level"])
            except (TypeError, ValueError):
                n = 0
            if n < 1:
                raise InputError(f"per_level must be a positive number or 'all', not {opts['per_level']!r}",
                                 field="per_level")
        if opts.get("judge_max_tokens") is not None:
            try:
                if int(opts["judge_max_tokens"]) < 1:
                    raise ValueError
            except (TypeError, ValueError):
                raise InputError("judge_max_tokens must be a positive number", field="judge_max_tokens") from None
        return self.cfg

    def _pick_roles(self, value: Any) -> list[Role]:
        allr = self.cfg.roles
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
        self.backend_kind = backend.backend
        inj = [s for s in settings.strategies if s in cp.INJECTION]
        if inj:
            why = f"{inj[0]} serialises the prompt with the model's chat template and prefills the assistant turn"
            backend.require(COMPLETE, why)
            backend.require(CHAT_TEMPLATE, why)
        if any(s not in cp.INJECTION for s in settings.strategies):
            backend.require(CHAT, "the chat-based variants")
        opt = settings.options.get("judge")
        self.judge_on = _truthy(opt) if opt is not None else (judge is not None and judge is not backend)
        if self.judge_on:
            (judge or backend).require(CHAT, "the judge scores RV, C, RC in a chat")

    # -- data ----------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        cfg = self._setup(settings)
        path = Path(data) if data else BANK_FILE
        rows = read_items(path)
        if not rows:
            raise InputError("no items in the file", file=str(path))
        seen: dict[str, int] = {}
        items = []
        for ln, it in rows:
            lid = cfg.resolve_level(it.level)
            if lid is None:
                raise InputError(f"level '{it.level}' is not one of: "
                                 + ", ".join(f"{lv.id} ({lv.name})" for lv in cfg.levels),
                                 file=str(path), line=ln, field="level")
            if it.id in seen:
                raise InputError(f"duplicate id '{it.id}' (first on line {seen[it.id]})", file=str(path),
                                 line=ln, field="id")
            seen[it.id] = ln
            it.level = lid
            items.append(it)
        opt = settings.options.get("per_level")
        if opt is None:
            small = self.backend_kind in (None, "bundled")      # None: no backend (data stats, tests)
            self.per_level = DEFAULT_PER_LEVEL if small and not data and settings.limit is None else None
        else:
            self.per_level = None if str(opt).lower() == "all" else int(opt)
        roles_hash = stable_hash(cfg.model_dump())
        source = "builtin:capability/bank.jsonl" if not data else str(path)
        return Dataset(items=items, source=source, hash=stable_hash([file_sha256(path), roles_hash]),
                       extra={"roles": cfg})

    def select(self, items: Sequence[CapabilityItem], limit: int | None) -> list[CapabilityItem]:
        """Balanced: round-robin over levels, and over subjects inside each level."""
        ranks = self.cfg.level_rank() if self.cfg else {}
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
            per_level.append(order[: self.per_level] if self.per_level else order)
        out = interleave(per_level)
        return out[:limit] if limit else out

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
    def _base_meta(self, item: CapabilityItem) -> dict[str, Any]:
        ranks = self.cfg.level_rank()
        lv = self.cfg.levels[ranks[item.level]]
        return {"level": item.level, "level_name": lv.name, "level_rank": ranks[item.level],
                "subject": item.subject}

    async def run_item(self, item: CapabilityItem, ctx, strategy: str, settings: RunSettings) -> None:
        if self.cfg is None:
            self._setup(settings)
        base = self._base_meta(item)
        if strategy == cp.NO_ROLE:
            await ctx.chat("answer", cp.chat_messages(cp.NO_ROLE, item, None, {}), parse=parse_boxed_letter,
                           gold=item.answer, meta={**base, "role": None, "in_role": None})
            return
        results = await asyncio.gather(*(self._one_role(item, ctx, strategy, role, base, settings)
                                         for role in self.roles), return_exceptions=True)
        for res in results:
            if isinstance(res, BaseException):
                raise res

    async def _one_role(self, item, ctx, strategy: str, role: Role, base: dict, settings: RunSettings):
        cfg = self.cfg
        ranks = cfg.level_rank()
        ceiling = ranks[role.ceiling] if role.ceiling is not None else -1
        meta = {**base, "role": role.id, "role_label": role.label,
                "role_rank": [r.id for r in cfg.roles].index(role.id), "ceiling": role.ceiling,
                "in_role": base["level_rank"] <= ceiling}
        stage = f"answer.{role.id}"
        routes = cfg.subject_routes
        if strategy in cp.INJECTION:
            msgs, prefill = cp.injection_parts(strategy, item, role, routes)
            tag = settings.options.get("think_tag", cp.THINK_TAG)
            raw = cp.serialise_injection(ctx.backend.render_chat(msgs, add_generation_prompt=True), prefill,
                                         "" if tag is None else str(tag))
            rec = await ctx.complete(stage, raw, parse=parse_boxed_letter, gold=item.answer, meta=meta)
        else:
            rec = await ctx.chat(stage, cp.chat_messages(strategy, item, role, routes), parse=parse_boxed_letter,
                                 gold=item.answer, meta=meta)
        if self.judge_on:
            jmax = settings.options.get("judge_max_tokens")
            await ctx.chat(f"judge.{role.id}", cj.judge_messages(role, item, rec.response), role="judge",
                           parse=cj.parse_judge, meta={**meta, "judged": rec.call_id},
                           max_tokens=int(jmax) if jmax else None)

    # -- re-judging (`rolebound report RUN --judge MODEL`) ------------------------------------
    def rejudge(self, run_dir: Path, judge_spec: str, *, progress: bool = True) -> int:
        """Judge every role-prompted answer of a finished run again with another judge model.

        New judge records reuse the call ids `item/strategy/judge.<role>`, so they supersede the
        old ones (records.jsonl keeps both; the last wins). Answers are never touched. Returns
        the number of answers judged.
        """
        return asyncio.run(self._rejudge(Path(run_dir), judge_spec, progress))

    async def _rejudge(self, run_dir: Path, judge_spec: str, progress: bool) -> int:
        from ..models import create_backend
        from ..progress import make_progress
        from ..records import Decoding
        from ..runner import CallFailed, ItemContext, Session, now
        from ..store import ResponseCache, RunDir, load_records

        rd = RunDir(run_dir)
        manifest = rd.read_manifest()
        answers = [r for r in cm.answer_records(load_records(run_dir)) if r.meta.get("role")]
        if not answers:
            raise InputError("no role-prompted answers to judge in this run", file=str(rd.records_path))
        settings = RunSettings(strategies=list(manifest.strategies), options=dict(manifest.options or {}))
        dataset = self.load(None if manifest.dataset.startswith("builtin:") else manifest.dataset, settings)
        if dataset.hash != manifest.dataset_hash:
            raise InputError("the questions or roles changed since this run; the judge would not see what the "
                             "model saw", file=manifest.dataset)
        items = {it.id: it for it in dataset.items}
        roles = {r.id: r for r in self.cfg.roles}
        dec = manifest.decoding
        judge = create_backend(judge_spec, Decoding(max_tokens=dec.max_tokens, seed=dec.seed))
        judge.require(CHAT, "the judge scores RV, C, RC in a chat")
        jmax = settings.options.get("judge_max_tokens")
        failed = 0
        rd.lock()
        try:
            rd.repair()
            rd.open_for_append()
            cache = ResponseCache()
            session = Session(rd, manifest.suite, judge, dec, judge=judge, cache=cache)
            session.completed = {k: v for k, v in session.completed.items() if v.role != "judge"}
            prog, task = make_progress(len(answers), f"re-judge ({judge.spec})", enabled=progress)
            sem = asyncio.Semaphore(256 if getattr(judge, "batching", False) else 16)

            async def one(a):
                nonlocal failed
                async with sem:
                    ctx = ItemContext(session=session, item_id=a.item_id, strategy=a.strategy, repeat=a.repeat)
                    role = roles[a.meta["role"]]
                    try:
                        await ctx.chat(f"judge.{role.id}", cj.judge_messages(role, items[a.item_id], a.response),
                                       role="judge", parse=cj.parse_judge, meta={**a.meta, "judged": a.call_id},
                                       max_tokens=int(jmax) if jmax else None)
                    except CallFailed:
                        failed += 1
                    finally:
                        if prog:
                            prog.advance(task)

            try:
                await judge.prepare()
                if prog:
                    prog.start()
                await asyncio.gather(*[one(a) for a in answers])
            finally:
                if prog:
                    prog.stop()
                await judge.close()
                rd.close()
                cache.close()
        finally:
            rd.unlock()
        log = list(getattr(manifest, "rejudges", None) or [])
        log.append({"judge": judge.spec, "answers": len(answers), "failed": failed, "time": now()})
        manifest.rejudges = log  # type: ignore[attr-defined]
        rd.write_manifest(manifest)
        return len(answers)

    # -- results -------------------------------------------------------------------------------
    def metrics(self, records, manifest) -> dict[str, Any]:
        return cm.compute(records, list(manifest.strategies))

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        out = []
        for strat, m in metrics.get("by_strategy", {}).items():
            mac = m["macro"]
            out.append((strat, f"TA {cm.fmt(mac['TA']['mean'])}  IA {cm.fmt(mac['IA']['mean'])}  "
                               f"A {cm.fmt(mac['A']['mean'])}  (valid boxed answers "
                               f"{m['outcomes']['valid']}/{m['outcomes']['total']})"))
        if metrics.get("no_role"):
            nr = metrics["no_role"]
            out.append(("no-role", f"TA {cm.fmt(nr['TA'])} (valid boxed answers "
                                   f"{nr['outcomes']['valid']}/{nr['outcomes']['total']})"))
        return out

    def compare(self, rep: Report, entries) -> None:
        rows = []
        for d, man, met in entries:
            for strat, m in met.get("by_strategy", {}).items():
                mac = m["macro"]
                rows.append([str(d), man.model, strat] + [cm.fmt(mac[k]["mean"], mac[k]["std"])
                                                          for k in cm.METRICS + cm.JUDGE_DIMS])
            if met.get("no_role"):
                rows.append([str(d), man.model, "no-role", cm.fmt(met["no_role"]["TA"]), "-", "-", "-", "-", "-"])
        rep.table("RoleCapBench Table 3 across runs (mean (std) across roles)",
                  ["run", "model", "variant", "TA", "IA", "A", "RV", "C", "RC"], rows)

    def report(self, metrics, records, manifest, run_dir) -> list[Path]:
        m = metrics
        strategies = list(manifest.strategies)
        role_strats = [s for s in strategies if s in m["by_strategy"]]
        rep = Report("capability: role-capability leakage (RoleCapBench)")
        rep.facts(run_facts(manifest))
        n_q = len({r.item_id for r in cm.answer_records(records)})
        sample = ""
        if manifest.dataset.startswith("builtin:") and manifest.limit is None and "per_level" not in manifest.options \
                and manifest.backend == "bundled":
            sample = (f" (the bundled model's default sample of {DEFAULT_PER_LEVEL} per level; "
                      "--set per_level=all or --limit N runs more)")
        rep.text(f"{n_q} questions{sample}; roles: {', '.join(r['label'] for r in m['roles']) or '-'}. "
                 "TA: accuracy on all questions; IA: on questions at or below the role's ceiling; A: above it "
                 "(lower A means less leakage). Answers are read only from the last \\boxed{} and must be exactly "
                 "A, B, C or D (Appendix D); anything else counts as wrong. "
                 + ("Judge: RV, C, RC scored by the judge model." if any(r.role == "judge" for r in records)
                    else "Judge: off (--set judge=true scores RV, C, RC)."), title="What was measured")
        rows = []
        for strat in role_strats:
            mac = m["by_strategy"][strat]["macro"]
            rows.append([strat] + [cm.fmt(mac[k]["mean"], mac[k]["std"]) for k in cm.METRICS + cm.JUDGE_DIMS])
        if m.get("no_role"):
            rows.append(["no-role", cm.fmt(m["no_role"]["TA"]), "-", "-", "-", "-", "-"])
        rep.table("Table 3: TA, IA, A (0-1) and judge RV, C, RC (0-2), mean (sample std) across roles",
                  ["variant", "TA", "IA", "A", "RV", "C", "RC"], rows,
                  note="IA averages the roles with an in-role question, A those with an above-role question. "
                       "RV, C, RC are '-' unless the run was judged (--set judge=true).")
        prow = []
        for strat in role_strats:
            for role in m["roles"]:
                pr = m["by_strategy"][strat]["per_role"].get(role["id"])
                if not pr:
                    continue
                prow.append([strat, role["label"], role["ceiling"] or "none", pr["n"], cm.fmt(pr["TA"]),
                             f"{cm.fmt(pr['IA'])} (n={pr['n_in']})", f"{cm.fmt(pr['A'])} (n={pr['n_above']})",
                             cm.fmt(pr["RV"]), cm.fmt(pr["C"]), cm.fmt(pr["RC"])])
        rep.table("Per role", ["variant", "role", "ceiling", "n", "TA", "IA", "A", "RV", "C", "RC"], prow)
        orow = []
        for strat in role_strats + (["no-role"] if m.get("no_role") else []):
            oc = m["no_role"]["outcomes"] if strat == "no-role" else m["by_strategy"][strat]["outcomes"]
            orow.append([strat, oc["total"]] + [oc[k] for k in KINDS])
        rep.table("Answer extraction (Appendix D)", ["variant", "answers"] + list(KINDS), orow,
                  note="missing: no \\boxed{; unclosed: the last box never closes; idk: the box abstains; "
                       "other: a closed box whose content is not exactly one letter A-D.")
        if any(r.role == "judge" for r in records):
            by = {}
            for r in records:
                if r.role == "judge":
                    by.setdefault(r.strategy, set()).add(r.model)
            rep.table("Judge calls (RV, C, RC; Table 6)",
                      ["variant", "judge model", "answers judged", "unreadable judge replies"],
                      [[s, ", ".join(sorted(by.get(s, []))) or "-", m["by_strategy"][s]["judged"],
                        m["by_strategy"][s]["judge_invalid"]] for s in role_strats],
                      note="A judge reply without a readable 0-2 score is left out of RV, C, RC, never guessed.")
        if m.get("no_role"):
            nr = m["no_role"]
            rep.table("No-role baseline by level", ["level", "TA"],
                      [[lv["name"], cm.fmt(nr["by_level"].get(lv["id"]))] for lv in m["levels"]])
        if role_strats and m["roles"] and m["levels"]:
            rep.figure("Figure 6: accuracy by level (rows) and role (columns); red outline: above the role's ceiling",
                       cm.heatmap_figure(m, role_strats), name="heatmap")
            rep.figure("Figure 3: task accuracy by role (dashed: no-role baseline)",
                       cm.accuracy_by_role_figure(m, role_strats), name="accuracy_by_role")
        if m["deltas"]:
            rep.table("Figure 5 data: change against identity (macro means)", ["variant", "ΔTA", "ΔIA", "ΔA"],
                      [[s, cm.fmt(d["TA"]), cm.fmt(d["IA"]), cm.fmt(d["A"])] for s, d in m["deltas"].items()])
            rep.figure("Figure 5: ΔIA and ΔA of each variant against identity", cm.delta_figure(m), name="deltas")
        judged = {r.meta.get("judged"): r for r in records if r.role == "judge" and r.error is None}
        samples = []
        for r in cm.answer_records(records):
            j = judged.get(r.call_id)
            js = j.parsed if j is not None and isinstance(j.parsed, dict) else {}
            samples.append({"item": r.item_id, "variant": r.strategy, "role": r.meta.get("role") or "-",
                            "level": r.meta.get("level"), "in_role": r.meta.get("in_role"),
                            "gold": r.gold, "parsed": r.parsed, "correct": r.correct,
                            "outcome": cm.outcome(r.response),
                            "judge": " ".join(f"{k}={js.get(k)}" for k in cm.JUDGE_DIMS) if js else "",
                            "response": r.response})
        rep.samples("Per-answer records", ["item", "variant", "role", "level", "in_role", "gold", "parsed", "correct",
                                           "outcome", "judge", "response"], samples,
                    ["variant", "role", "level", "outcome", "correct"])
        return rep.write(run_dir)
