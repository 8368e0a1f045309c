"""Beyond One World: superhero role-play across canon versions (Ngokpol et al., 2025).

Tasks
- canon: four-option questions on a version's life phases (childhood, pre-hero, hero).
- dilemma: two-choice moral dilemmas of four conflict types; choice A is always the type's first
  pole ("Save the One You Love", "Hero", "Duty", "The Ends Justify the Means").

Strategies
- direct, cot: the paper's prompts without / with "Let's think step by step." (Table 3).
- cross-direct, cross-cot: each question asked of every *other* version of the same hero
  (Section 4.1.2, Tables 9 and 11); the played version's own answer is recorded where the
  versions share a question, so the report can say whose answer the model gave.
Reasoning analysis (direct/cot replies with text): an LLM segmenter splits the reply into
<thinking>/<acting> spans, a judge scores both 0-5 given the character's attributes, and
Think-Act Matching (max embedding cosine over the pairs) is computed when the segmenter's reply is
parsed, so it is stored in that record (`parsed.tam`). See docs/multiverse.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..errors import InputError
from ..io import line_of, read_yaml, stable_hash, validate_yaml
from ..strategies.multiverse_prompts import CONFLICTS, LETTERS, TEMPLATES
from .base import Dataset, Item, RunSettings, Suite

STARTER = Path(__file__).resolve().parents[1] / "data" / "multiverse" / "starter.yaml"
PHASES = ("childhood", "pre-hero", "hero")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _text(v: Any) -> Any:
    # YAML reads `age: 53` as an int; attributes are text.
    return str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


class Attributes(_Strict):
    age: str | None = None
    power: str | None = None
    race: str | None = None
    mbti: str | None = None
    enneagram: str | None = None

    _as_text = field_validator("*", mode="before")(classmethod(lambda cls, v: _text(v)))


class Version(_Strict):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)          # how the persona is addressed, e.g. 'Peter Parker "Spider-Man"'
    universe: str = Field(min_length=1)      # e.g. "Sam Raimi's Spider-Man films"
    work: str | None = None                  # the film/series/issue the version speaks as of
    attributes: Attributes = Field(default_factory=Attributes)
    source: str | None = None
    note: str | None = None
    validated: bool = False


class Hero(_Strict):
    id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    versions: list[Version] = Field(min_length=1)
    source: str | None = None
    note: str | None = None
    validated: bool = False


class CanonItem(Item):
    model_config = ConfigDict(extra="forbid")
    task: Literal["canon"] = "canon"
    version: str
    phase: Literal["childhood", "pre-hero", "hero"]
    part: int | None = Field(None, ge=1, le=3)   # Hero1-3 of the public set
    question: str = Field(min_length=1)
    options: list[str] = Field(min_length=4, max_length=4)
    answer: str
    key: str | None = None                       # same key = the same question across versions
    source: str | None = None
    note: str | None = None
    validated: bool = False

    @field_validator("answer", mode="before")
    @classmethod
    def _letter(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip().upper() in tuple(LETTERS):
            return v.strip().upper()
        raise ValueError(f"answer must be one of the letters A-D, not {v!r}")

    @field_validator("options")
    @classmethod
    def _distinct(cls, v: list[str]) -> list[str]:
        if any(not o.strip() for o in v):
            raise ValueError("options must not be empty")
        if len({o.strip().lower() for o in v}) != len(v):
            raise ValueError("options must be distinct")
        return v

    @model_validator(mode="after")
    def _part_only_for_hero(self):
        if self.part is not None and self.phase != "hero":
            raise ValueError("part (1-3) is only for hero-phase questions")
        return self


class Choice(_Strict):
    text: str = Field(min_length=1)
    consequence: str = Field(min_length=1)


class DilemmaItem(Item):
    model_config = ConfigDict(extra="forbid")
    task: Literal["dilemma"] = "dilemma"
    version: str
    conflict: Literal["save-one-vs-greater-good", "hero-or-villain", "duty-vs-desire", "ends-vs-moral-code"]
    situation: str = Field(min_length=1)
    choices: list[Choice] = Field(min_length=2, max_length=2)   # A = first pole, B = second pole
    canonical: Literal["A", "B"] | None = None                   # only where the canon shows it
    iteration: int | None = None
    key: str | None = None
    source: str | None = None
    note: str | None = None
    validated: bool = False


class MultiverseFile(_Strict):
    heroes: list[Hero] = Field(min_length=1)
    canon: list[dict] = Field(default_factory=list)
    dilemmas: list[dict] = Field(default_factory=list)
    import_report: dict[str, Any] | None = None


# ------------------------------------------------------------------------------------------------
def _derive_ids(rows: list[dict], kind: str) -> None:
    """Items without an id get '<version>-<phase|conflict>-<n>' (n counts inside that group)."""
    counts: Counter = Counter()
    for row in rows:
        if not isinstance(row, dict) or row.get("id") is not None:
            continue
        group = row.get("phase" if kind == "canon" else "conflict")
        counts[(row.get("version"), group)] += 1
        row["id"] = f"{row.get('version')}-{group}-{counts[(row.get('version'), group)]}"


def load_file(path: str | Path) -> dict[str, Any]:
    """Parse and validate a multiverse data file (YAML, or JSON which YAML reads too)."""
    path = str(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with 'heroes', 'canon' and 'dilemmas'", file=path, line=1)
    doc = validate_yaml(MultiverseFile, raw, file=path)
    versions: dict[str, tuple[Hero, Version]] = {}
    for hi, hero in enumerate(doc.heroes):
        for vi, ver in enumerate(hero.versions):
            if ver.id in versions:
                raise InputError(f"duplicate version id '{ver.id}'", file=path,
                                 line=line_of(raw, ["heroes", hi, "versions", vi, "id"]), field=f"heroes[{hi}].versions[{vi}].id")
            versions[ver.id] = (hero, ver)
    items: list[CanonItem | DilemmaItem] = []
    seen: set[str] = set()
    for section, model in (("canon", CanonItem), ("dilemmas", DilemmaItem)):
        rows = raw.get(section) or []
        _derive_ids(rows, "canon" if section == "canon" else "dilemma")
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise InputError("each item must be a mapping", file=path, line=line_of(raw, [section, i]),
                                 field=f"{section}[{i}]")
            try:
                item = validate_yaml(model, row, file=path)
            except InputError as exc:   # name the item in the field path
                raise InputError(exc.detail, file=path, line=exc.line,
                                 field=f"{section}[{i}]" + (f".{exc.field}" if exc.field else "")) from None
            if item.version not in versions:
                raise InputError(f"unknown version '{item.version}'", file=path,
                                 line=line_of(raw, [section, i, "version"]), field=f"{section}[{i}].version")
            if item.id in seen:
                raise InputError(f"duplicate item id '{item.id}'", file=path, line=line_of(raw, [section, i]),
                                 field=f"{section}[{i}].id")
            seen.add(item.id)
            items.append(item)
    return {"heroes": doc.heroes, "versions": versions, "items": items, "import_report": doc.import_report}


class MVIndex:
    """Look-ups the strategies need: a version's hero and siblings, parallel questions."""

    def __init__(self, data: dict[str, Any]):
        self.heroes: list[Hero] = data["heroes"]
        self.versions: dict[str, tuple[Hero, Version]] = data["versions"]
        self.by_key: dict[tuple[str, str], dict[str, CanonItem]] = defaultdict(dict)
        self.dilemmas: dict[tuple[str, str], list[DilemmaItem]] = defaultdict(list)
        for it in data["items"]:
            hero = self.versions[it.version][0].id
            if isinstance(it, CanonItem) and it.key:
                self.by_key[(hero, it.key)][it.version] = it
            elif isinstance(it, DilemmaItem):
                self.dilemmas[(it.version, it.conflict)].append(it)

    def hero_of(self, version: str) -> Hero:
        return self.versions[version][0]

    def siblings(self, version: str) -> list[Version]:
        return [v for v in self.hero_of(version).versions if v.id != version]

    def own_canon_answer(self, item: CanonItem, played: str) -> str | None:
        """The played version's letter for the asked question, when it has the same question
        (same key) over the same options; None otherwise."""
        if not item.key:
            return None
        twin = self.by_key.get((self.hero_of(item.version).id, item.key), {}).get(played)
        if twin is None or sorted(twin.options) != sorted(item.options):
            return None
        return LETTERS[item.options.index(twin.options[LETTERS.index(twin.answer)])]

    def own_dilemma_choice(self, item: DilemmaItem, played: str) -> str | None:
        """The played version's canonical choice for the same conflict type, when it is the only
        labelled dilemma of that type (letters mean the same pole across versions)."""
        labels = {d.canonical for d in self.dilemmas.get((played, item.conflict), []) if d.canonical}
        return labels.pop() if len(labels) == 1 else None


def _truthy(v: Any) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


class MultiverseSuite(Suite):
    name = "multiverse"
    description = "superhero versions: canon events by life phase, moral dilemmas, cross-version (Beyond One World)"
    strategies = {
        "direct": "the paper's prompt, answered directly",
        "cot": "the same prompt with \"Let's think step by step.\" (Table 3)",
        "cross-direct": "each question asked of the hero's other versions, direct (Tables 9, 11)",
        "cross-cot": "each question asked of the hero's other versions, with CoT",
    }
    default_strategies = ["direct", "cot", "cross-direct"]
    uses_judge = True
    offers_scoring = True

    def __init__(self):
        self.index: MVIndex | None = None
        self.embedder = None
        self.small_model = False     # the bundled CPU model: short generation caps by default
        self.small_judge = False

    # -- data -----------------------------------------------------------------------------------
    def load(self, data: str | None, settings: RunSettings) -> Dataset:
        path = Path(data) if data else STARTER
        loaded = load_file(path)
        tasks = settings.options.get("tasks")
        items = loaded["items"]
        if tasks:
            wanted = {t.strip() for t in (tasks if isinstance(tasks, list) else str(tasks).split(","))}
            bad = wanted - {"canon", "dilemma"}
            if bad:
                raise InputError(f"unknown task '{sorted(bad)[0]}'; use canon and/or dilemma", field="tasks")
            items = [it for it in items if it.task in wanted]
        self.index = MVIndex(loaded)
        payload = {"heroes": [h.model_dump() for h in loaded["heroes"]], "items": [it.model_dump() for it in items]}
        return Dataset(items=items, source="builtin:multiverse-starter" if not data else str(path),
                       hash=stable_hash(payload), extra={"index": self.index, "import_report": loaded["import_report"]})

    def select(self, items: Sequence[Any], limit: int | None) -> list[Any]:
        """Round-robin over versions (hero by hero), each version cycling through canon phases and
        dilemma types, so a small --limit still covers several versions of one hero."""
        if not limit or limit >= len(items):
            return list(items)
        index = self.index
        per_version: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
        for it in items:
            per_version[it.version][it.phase if it.task == "canon" else "dilemma"].append(it)
        order = ["childhood", "dilemma", "pre-hero", "hero"]
        queues = []
        for v, groups in per_version.items():
            hero_pos = [h.id for h in index.heroes].index(index.hero_of(v).id) if index else 0
            rot = order[hero_pos % len(order):] + order[:hero_pos % len(order)]
            seq, pools = [], [list(groups[g]) for g in rot if groups.get(g)]
            while any(pools):
                for p in pools:
                    if p:
                        seq.append(p.pop(0))
            queues.append(seq)
        out: list = []
        while len(out) < limit and any(queues):
            for q in queues:
                if q and len(out) < limit:
                    out.append(q.pop(0))
        return out

    def stats(self, dataset: Dataset) -> list[tuple[str, Any]]:
        return dataset_tables(dataset)

    def prompt_templates(self) -> dict[str, str]:
        return dict(TEMPLATES)

    def check(self, backend, settings: RunSettings, judge=None) -> None:
        from ..models.base import CHAT, LOGPROB

        opts = settings.options
        self.small_model = backend.backend == "bundled"
        self.small_judge = (judge or backend).backend == "bundled"
        known = {"tasks", "attributes", "analysis", "judge_input", "embedder", "cot_max_tokens",
                 "direct_max_tokens", "segment_max_tokens", "judge_max_tokens"}
        unknown = sorted(set(opts) - known)
        if unknown:
            raise InputError(f"unknown option '{unknown[0]}' for multiverse; known: {', '.join(sorted(known))}",
                             field="--set")
        if opts.get("judge_input", "raw") not in ("raw", "segmented"):
            raise InputError("judge_input must be 'raw' or 'segmented'", field="judge_input")
        if settings.scoring == "logprob":
            backend.require(LOGPROB, "--scoring logprob")
        if settings.scoring == "generate" or any("cot" in s for s in settings.strategies):
            backend.require(CHAT, "generated answers and CoT")
        if self.analysis_on(settings):
            (judge or backend).require(CHAT, "the segmenter and the thinking/acting judge")
            if not opts.get("embedder"):
                from ..scoring.embeddings import default_path

                default_path()   # fails early, with the install hint, if the embedder is missing

    def analysis_on(self, settings: RunSettings) -> bool:
        """Thinking/acting analysis needs reply text: CoT always has it, direct only when generated."""
        texts = "cot" in settings.strategies or ("direct" in settings.strategies and settings.scoring == "generate")
        return texts and _truthy(settings.options.get("analysis", True))

    # -- work -----------------------------------------------------------------------------------
    async def before_items(self, session, dataset: Dataset, items: list, settings: RunSettings) -> None:
        import asyncio

        self.index = dataset.extra["index"]
        if self.analysis_on(settings):
            from ..scoring.embeddings import get_embedder

            path = settings.options.get("embedder") or None
            self.embedder = await asyncio.to_thread(get_embedder, path)

    async def run_item(self, item, ctx, strategy: str, settings: RunSettings) -> None:
        from ..strategies.multiverse_run import run_item

        await run_item(self, item, ctx, strategy, settings)

    # -- results --------------------------------------------------------------------------------
    def metrics(self, records, manifest) -> dict[str, Any]:
        from ..metrics.multiverse import compute

        return compute(records, manifest)

    def report(self, metrics, records, manifest, run_dir) -> list[Path]:
        return build_report(metrics, records, manifest, run_dir)

    def summary(self, metrics: dict[str, Any]) -> list[tuple[str, str]]:
        return summary_lines(metrics)

    def compare(self, rep, entries) -> None:
        """`rolebound compare`: one row per run, strategy and task."""
        rows = []
        for run_dir, m, met in entries:
            for strat, block in met.get("strategies", {}).items():
                for task, b in block.items():
                    a = b.get("analysis") or {}
                    x = ((met.get("cross") or {}).get(strat) or {}).get(task) or {}
                    rows.append([str(run_dir), m.model, strat, task, b["n"], b["invalid"], _r(b["acc"]),
                                 _num((b.get("macro") or {}).get("f1"), 1), _mean(a.get("tam"), 3),
                                 _mean(a.get("judge_thinking")), _mean(a.get("judge_acting")), _diff(x.get("drop"))])
        rep.table("Runs side by side", ["run", "model", "strategy", "task", "n", "invalid", "Acc", "macro F1", "TAM",
                                        "Judge think", "Judge act", "cross drop"], rows)


# -- dataset tables, report, summary ---------------------------------------------------------------
def dataset_tables(dataset: Dataset) -> list[tuple[str, Any]]:
    import pandas as pd

    index: MVIndex = dataset.extra["index"]
    items = dataset.items
    rows = []
    for hero in index.heroes:
        vids = {v.id for v in hero.versions}
        mine = [it for it in items if it.version in vids]
        rows.append({"hero": hero.id, "name": hero.name, "versions": len(vids),
                     "canon": sum(1 for it in mine if it.task == "canon"),
                     "dilemmas": sum(1 for it in mine if it.task == "dilemma"),
                     "labelled dilemmas": sum(1 for it in mine if it.task == "dilemma" and it.canonical)})
    heroes = pd.DataFrame(rows)
    total = pd.DataFrame([{"hero": "all", "name": "", "versions": sum(r["versions"] for r in rows),
                           **{k: heroes[k].sum() if len(heroes) else 0 for k in ("canon", "dilemmas", "labelled dilemmas")}}])
    out = [("Heroes and versions", pd.concat([heroes, total], ignore_index=True))]
    canon = [it for it in items if it.task == "canon"]
    if canon:
        prow = []
        groups = [(p, None) for p in PHASES] + [("hero", k) for k in (1, 2, 3)]
        for phase, part in groups:
            sel = [it for it in canon if it.phase == phase and (part is None or it.part == part)]
            if part is not None and not sel:
                continue
            letters = Counter(it.answer for it in sel)
            prow.append({"phase": phase if part is None else f"hero{part}", "questions": len(sel),
                         **{L: letters.get(L, 0) for L in LETTERS},
                         "shared across versions (key)": sum(1 for it in sel if it.key)})
        out.append(("Canon questions by phase (answer letters)", pd.DataFrame(prow)))
    dil = [it for it in items if it.task == "dilemma"]
    if dil:
        drow = []
        for c in CONFLICTS:
            sel = [it for it in dil if it.conflict == c]
            drow.append({"conflict": c, "dilemmas": len(sel), "canonical A": sum(it.canonical == "A" for it in sel),
                         "canonical B": sum(it.canonical == "B" for it in sel),
                         "no gold": sum(it.canonical is None for it in sel)})
        out.append(("Dilemmas by conflict type (A = first pole)", pd.DataFrame(drow)))
    rep = dataset.extra.get("import_report")
    if rep:
        out.append(("Import report", pd.DataFrame([{"what": k, "count": v} for k, v in rep.get("counts", {}).items()])))
        if rep.get("irregular"):
            out.append(("Canon items changed or skipped on import",
                        pd.DataFrame(rep["irregular"])))
    return out


def _r(d: dict | None) -> str:
    from ..metrics.stats import fmt_rate

    return fmt_rate(d)


def _num(v: float | None, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _diff(d: dict | None, digits: int = 1) -> str:
    if not d:
        return "-"
    return f"{d['diff']:+.{digits}f} [{d['lo']:+.{digits}f}, {d['hi']:+.{digits}f}]"


def _mean(d: dict | None, digits: int = 2) -> str:
    if not d or d.get("mean") is None:
        return "-"
    return f"{d['mean']:.{digits}f} (n={d['n']})"


def build_report(metrics: dict[str, Any], records: list, manifest, run_dir: Path) -> list[Path]:
    from ..report.builder import Report, run_facts

    rep = Report("Beyond One World (multiverse): canon events, dilemmas, cross-version",
                 "Rates in %, 95% percentile bootstrap CIs in brackets; differences in percentage points.")
    rep.facts(run_facts(manifest))
    strat = metrics.get("strategies", {})
    notes = ["Unparseable answers, segmentations and judge replies are counted as invalid (wrong for accuracy), never guessed."]
    if manifest.scoring == "logprob":
        notes.append("Scoring is logprob: the chosen letter is the most likely one after \"Answer:\" (for CoT, after "
                     "the generated reasoning). Direct answers then have no text, so thinking/acting analysis "
                     "covers the CoT replies only.")
    rep.text("\n\n".join(notes), "How to read this")

    canon_rows, dil_rows, wt_rows, an_rows = [], [], [], []
    for s, block in strat.items():
        c = block.get("canon")
        if c:
            a = c.get("analysis") or {}
            m = c.get("macro") or {}
            parts = c.get("by_part", {})
            canon_rows.append([s, c["n"], c["invalid"], _r(c["acc"]), _num(m.get("precision"), 1),
                               _num(m.get("recall"), 1), _num(m.get("f1"), 1), _mean(a.get("judge_thinking")),
                               _mean(a.get("judge_acting")), _mean(a.get("tam"), 3)]
                              + [_r(c["by_phase"].get(p)) for p in PHASES]
                              + [_r(parts.get(f"hero{k}")) for k in (1, 2, 3)])
        d = block.get("dilemma")
        if d:
            a = d.get("analysis") or {}
            m = d.get("macro") or {}
            dil_rows.append([s, d["n"], d["labelled"], d["invalid"], _r(d["acc"]), _num(m.get("f1"), 1),
                             _r(d["choice_share"].get("A")), _mean(a.get("judge_thinking")),
                             _mean(a.get("judge_acting")), _mean(a.get("tam"), 3)]
                            + [_r(d["by_conflict"].get(k)) + " / " + _r(d.get("first_pole_share", {}).get(k))
                               for k in CONFLICTS])
        for task in ("canon", "dilemma"):
            b = block.get(task)
            if not b:
                continue
            w = b.get("weighted") or {}
            ci = b.get("macro_f1_ci") or [None, None]
            wt_rows.append([s, task, _num((b.get("macro") or {}).get("f1"), 1),
                            f"[{_num(ci[0], 1)}, {_num(ci[1], 1)}]", _num(w.get("precision"), 1),
                            _num(w.get("recall"), 1), _num(w.get("f1"), 1)])
            a = b.get("analysis")
            if a:
                an_rows.append([s, task, a["segment_calls"], a["segment_invalid"], a["judge_calls"],
                                a["judge_invalid"], a["tam"]["n"], a.get("embedder") or "-"])
    if canon_rows:
        rep.table("Canon events (Table 6)",
                  ["strategy", "n", "invalid", "Acc", "Prec", "Recall", "F1", "Judge think", "Judge act", "TAM",
                   "Childhood", "Pre-hero", "Hero", "Hero1", "Hero2", "Hero3"], canon_rows,
                  note="Prec/Recall/F1: macro over the letters A-D. Judge scores 0-5; TAM: Think-Act Matching cosine.")
    if dil_rows:
        rep.table("Moral dilemmas (Table 7)",
                  ["strategy", "n", "with gold", "invalid", "Acc (gold only)", "F1", "chose A (first pole)",
                   "Judge think", "Judge act", "TAM"] + [f"{k}: acc / chose A" for k in CONFLICTS], dil_rows,
                  note="Accuracy needs a canonical choice; dilemmas without one count only in the choice shares. "
                       "A is the conflict's first pole (Save the One You Love, Hero, Duty, The Ends Justify the Means).")
    cmd = metrics.get("cot_minus_direct") or {}
    rows = [[t, (v["acc"] or {}).get("n", "-"), _diff(v.get("acc")), _diff(v.get("macro_f1")),
             _diff(v.get("tam"), 3)] for t, v in cmd.items() if v]
    if rows:
        rep.table("CoT minus direct (Table 3)", ["task", "paired items", "Δ Acc", "Δ macro F1", "Δ TAM"], rows,
                  note="Paired over the items both strategies answered; Δ TAM needs analysed replies from both.")
    xrows, prow = [], []
    for s, tasks in (metrics.get("cross") or {}).items():
        for t, b in tasks.items():
            if not b:
                continue
            dfr = b["differs"]
            xrows.append([s, t, b["n"], b["invalid"], _r(b["acc"]), _r(b.get("in_version")),
                          _r(b.get("cross_same_items")), _diff(b.get("drop")), dfr["n"],
                          _r(dfr["asked_version"]), _r(dfr["played_version"]), dfr["other"], dfr["invalid"]])
            for p in b["by_pair"]:
                prow.append([s, t, p["hero"], p["played"], p["asked"], p["n"], _r(p)])
    if xrows:
        rep.table("Cross-version (Tables 9, 11)",
                  ["strategy", "task", "answers", "invalid", "cross Acc", "in-version Acc (same Qs)",
                   "cross Acc (same Qs)", "drop", "versions differ", "gave asked version's answer",
                   "gave played version's answer", "other", "invalid "], xrows,
                  note="The model plays another version of the hero and answers this version's question. drop = "
                       "in-version minus cross accuracy on the questions both strategies answered. 'versions differ': "
                       "the played version has the same question (same key and options) with another answer, or "
                       "(dilemmas) its own canonical choice of that conflict type differs.")
        rep.table("Cross-version accuracy by played and asked version", ["strategy", "task", "hero", "played",
                  "asked", "n", "Acc"], prow)
    if wt_rows:
        rep.table("Macro F1 CI and weighted averages", ["strategy", "task", "macro F1", "macro F1 CI",
                  "weighted Prec", "weighted Recall", "weighted F1"], wt_rows,
                  note="The paper's Recall column equals its accuracy, which is what weighted averaging gives.")
    if an_rows:
        rep.table("Reasoning analysis calls", ["strategy", "task", "segmenter calls", "segmenter invalid",
                  "judge calls", "judge invalid", "TAM values", "embedder"], an_rows)
        _think_act_figure(rep, strat)
    samples = []
    for r in records:
        if r.error is not None:
            continue
        group = r.meta.get("phase") or r.meta.get("conflict")
        parsed = r.parsed
        if isinstance(parsed, dict):
            parsed = (f"tam {parsed['tam']:.3f}, {parsed['pairs']} pair(s)" if "tam" in parsed
                      else f"think {parsed.get('thinking')}, act {parsed.get('acting')}")
        samples.append({"id": r.item_id, "strategy": r.strategy, "stage": r.stage, "task": r.meta.get("task"),
                        "version": r.meta.get("version"), "played": r.meta.get("played"), "group": group,
                        "gold": r.gold, "parsed": parsed, "correct": r.correct, "response": r.response})
    rep.samples("Per-call records", ["id", "strategy", "stage", "task", "version", "played", "group", "gold",
                                     "parsed", "correct", "response"], samples, ["strategy", "stage", "task", "correct"])
    return rep.write(run_dir)


def _think_act_figure(rep, strat: dict) -> None:
    pts = []
    for s, block in strat.items():
        for t, b in block.items():
            a = b.get("analysis") or {}
            th, ac = a.get("judge_thinking", {}).get("mean"), a.get("judge_acting", {}).get("mean")
            if th is not None and ac is not None:
                pts.append((f"{s}/{t} (n={a['judge_thinking']['n']})", th, ac))
    if not pts:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.5, 4))
    for label, th, ac in pts:
        ax.scatter([th], [ac])
        ax.annotate(label, (th, ac), fontsize=8, xytext=(4, 4), textcoords="offset points")
    ax.set_xlim(0, 5)
    ax.set_ylim(0, 5)
    ax.set_xlabel("judge thinking score (0-5)")
    ax.set_ylabel("judge acting score (0-5)")
    rep.figure("Thinking vs acting (Figure 4)", fig, name="think_act")


def summary_lines(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for s, block in metrics.get("strategies", {}).items():
        for t, b in block.items():
            out.append((f"{s} {t} accuracy", f"{_r(b['acc'])} ({b['invalid']} invalid of {b['n']})"))
    for s, tasks in (metrics.get("cross") or {}).items():
        for t, b in tasks.items():
            if b and b.get("drop"):
                out.append((f"{s} {t} drop", _diff(b["drop"])))
    return out
