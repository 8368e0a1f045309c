"""The multiverse suite's `--set` options and its per-run state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..base import DialogueOptions, RunState, choice

if TYPE_CHECKING:  # pragma: no cover
    from .data import MVIndex


class MultiverseOptions(DialogueOptions):
    tasks: str | list[str] | None = Field(None, description="canon and/or dilemma, comma-separated (default: both)")
    permutations: int = Field(1, ge=1, le=4, description="ask every in-version question under this many cyclic "
                                                        "shifts of its options (1: the paper's order only)")
    attributes: bool = Field(True, description="put the version's attributes in the role prompt")
    analysis: bool = Field(True, description="thinking/acting analysis: segmenter, TAM and the 0-5 judge")
    judge_input: choice("raw", "segmented") = Field(
        None, description="what the judge reads: the raw reply or the segmenter's tagged text (default: "
                          "segmented under the paper's protocol, raw on the demo model)")
    embedder: str | None = Field(None, description="local sentence-transformers folder for TAM")
    cot_max_tokens: int | None = Field(None, ge=1, description="token limit of CoT answers (default 1024; 64 on the bundled model)")
    direct_max_tokens: int | None = Field(None, ge=1, description="token limit of direct answers")
    segment_max_tokens: int | None = Field(None, ge=1, description="token limit of the segmenter (default 1024; 192 bundled)")
    judge_max_tokens: int | None = Field(None, ge=1, description="token limit of the judge (default 64; 16 bundled)")
    judge_scoring: choice("generate", "logprob") = Field(
        None, description="how the 0-5 judge is read (default: logprob on the demo models, generate on every other)")
    segment_fallback: choice("rules", "none") = Field(None, description="rule-based segmenter when the LLM's "
                                                                          "segmentation is invalid (default: rules)")


@dataclass
class MultiverseState(RunState):
    index: "MVIndex | None" = None     # heroes and versions of the run's data (load())
    embedder: Any = None               # the TAM embedder (a LazyEmbedder), when the run measures it
