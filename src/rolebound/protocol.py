"""A suite's paper protocol as data, and how a run's settings are resolved against it.

A suite declares `protocol = Protocol(...)`: the paper's answer decoding, judge decoding, scoring
mode, whether a judge is required (and must be another model) and the table or section it follows.
Every model gets the protocol by default except the demo models (the default bundled SmolLM2-135M,
which writes no answer format, and the `fake:` test stand-in), which keep log-likelihood scoring and
the suite's own small limits. The other bundled model (Qwen2.5-Coder-1.5B) follows the formats, so
it gets the paper's protocol like any real model. Any
value can still be set from the CLI or a YAML config; the manifest and the report then list where
the run departs from the paper ("not the paper's protocol: top_p 1.0 instead of 0.95").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .records import Decoding

DEMO_BACKENDS = ("bundled", "fake")          # backends that have a demo model
DEMO_BUNDLED = ("smollm2-135m",)             # the bundled models that are demo-only
DEMO_LABEL = "bundled demo settings, not the paper's protocol"
STAND_IN_LABEL = "test stand-in (fake:) with default decoding, not the paper's protocol"
FORCED_DEMO_LABEL = "demo settings (default decoding, --protocol demo), not the paper's protocol"
DECODING_KEYS = ("temperature", "top_p", "max_tokens")


@dataclass(frozen=True)
class Protocol:
    source: str                                            # the paper's table/section, e.g. "CHARM Appendix H"
    decoding: dict[str, Any] = field(default_factory=dict)        # answers: temperature, top_p, max_tokens
    judge_decoding: dict[str, Any] = field(default_factory=dict)  # judge calls (empty: the answer decoding)
    scoring: str | None = None                             # "generate" | "logprob" (suites that offer both)
    judge_required: bool = False                           # a run on a real model needs --judge
    judge_separate: bool = False                           # the paper judged with another model
    notes: str = ""

    def describe(self) -> list[tuple[str, str]]:
        """(field, value) lines for `rolebound suites --protocol` and the docs."""
        rows = [("source", self.source), ("answers", fmt_decoding(self.decoding) or "-")]
        if self.judge_decoding:
            rows.append(("judge", fmt_decoding(self.judge_decoding)))
        if self.scoring:
            rows.append(("scoring", self.scoring))
        if self.judge_required or self.judge_separate:
            rows.append(("judge model", ("required (--judge)" if self.judge_required else "optional")
                         + (", another model than the one under test" if self.judge_separate else "")))
        if self.notes:
            rows.append(("notes", self.notes))
        return rows


def fmt_decoding(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {d[k]}" for k in DECODING_KEYS if k in d)


def is_demo(backend_name: str, model_name: str | None = None) -> bool:
    """True for the demo models: every `fake:` model and the default bundled one. `model_name`
    None means the backend's default model."""
    if backend_name == "fake":
        return True
    return backend_name == "bundled" and (model_name is None or model_name in DEMO_BUNDLED)


def is_demo_spec(spec: str | None) -> bool:
    """is_demo for a BACKEND:NAME spec ("bundled", "bundled:qwen2.5-coder-1.5b", "openai:x")."""
    if not spec:
        return False
    backend, _, name = str(spec).strip().partition(":")
    return is_demo(backend, name or None)


def overrides_of(decoding: Decoding | dict | None) -> dict[str, Any]:
    """The decoding values a user set: a dict as given, or the fields set on a Decoding."""
    if decoding is None:
        return {}
    if isinstance(decoding, dict):
        return {k: v for k, v in decoding.items() if v is not None}
    return {k: getattr(decoding, k) for k in decoding.model_fields_set}


@dataclass
class Resolved:
    """What a run actually uses, and how it relates to the paper."""

    mode: str                         # "paper" | "demo" | "none" (the suite has no paper protocol)
    decoding: Decoding                # answers
    judge_decoding: Decoding | None   # None: judge calls use the answer decoding
    source: str = ""
    departures: list[str] = field(default_factory=list)
    backend: str = ""                 # whose demo settings: "bundled", "fake" (a test stand-in), other: forced

    @property
    def label(self) -> str:
        if self.mode == "demo":
            return {"bundled": DEMO_LABEL, "fake": STAND_IN_LABEL}.get(self.backend, FORCED_DEMO_LABEL)
        if self.mode == "none":
            return "suite defaults (no paper protocol)"
        if self.departures:
            return f"{self.source}; not the paper's protocol: " + "; ".join(self.departures)
        return f"{self.source} (the paper's protocol)"

    def manifest(self) -> dict[str, Any]:
        return {"mode": self.mode, "source": self.source, "label": self.label,
                "departures": list(self.departures)}


def resolve(protocol: Protocol | None, backend_name: str, overrides: dict[str, Any],
            judge_overrides: dict[str, Any] | None = None, mode: str | None = None,
            model_name: str | None = None) -> Resolved:
    """Answer and judge decoding for a run. `mode`: "paper" or "demo" to force one, None picks
    by model (the demo models get demo settings)."""
    judge_overrides = dict(judge_overrides or {})
    if mode not in (None, "paper", "demo"):
        from .errors import InputError

        raise InputError(f"protocol must be 'paper' or 'demo', not {mode!r}", field="--protocol")
    if protocol is None:
        dec = Decoding().merged(**overrides)
        jd = dec.merged(**judge_overrides) if judge_overrides else None
        return Resolved("none", dec, jd)
    mode = mode or ("demo" if is_demo(backend_name, model_name) else "paper")
    if mode == "demo":
        dec = Decoding().merged(**overrides)
        jd = dec.merged(**judge_overrides) if judge_overrides else None
        return Resolved("demo", dec, jd, source=protocol.source, backend=backend_name)
    dec = Decoding().merged(**{**protocol.decoding, **overrides})
    departures = [f"{k} {getattr(dec, k)} instead of {v}" for k, v in protocol.decoding.items()
                  if getattr(dec, k) != v]
    jd = None
    if protocol.judge_decoding or judge_overrides:
        # the judge keeps the run's seed; its own temperature/top_p/max_tokens come from the paper
        jd = Decoding().merged(seed=dec.seed, stop=dec.stop, **{**protocol.judge_decoding, **judge_overrides})
        departures += [f"judge {k} {getattr(jd, k)} instead of {v}" for k, v in protocol.judge_decoding.items()
                       if getattr(jd, k) != v]
    return Resolved("paper", dec, jd, source=protocol.source, departures=departures)


def repeat_seed(seed: int, repeat: int) -> int:
    """Each repeat samples with its own seed (repeat 0 keeps the run's seed)."""
    return int(seed) + int(repeat)
