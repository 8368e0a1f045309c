"""The charm suite's `--set` options and its per-run state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from ..base import DialogueOptions, RunState


class CharmOptions(DialogueOptions):
    builtin: bool = Field(True, description="include the starter set (false: only the --data files)")
    data_seed: int = Field(0, description="seed of the option shuffle when items are expanded")
    similarity: bool = Field(True, description="compute the Table 14 distractor-similarity split (loads the embedder)")
    embedder: str | None = Field(None, description="local sentence-transformers folder (default: the bundled all-MiniLM-L6-v2)")
    kv_control: bool = Field(True, description="ask each override candidate's Knowledge Verification question again "
                                                "with its options in a fixed, seeded order that moves the factual "
                                                "option (position-bias control of the override rate)")
    ba_control: bool = Field(True, description="ask each historical role whose BA questions ran its three in-boundary "
                                                "awareness questions whose answer is Yes (data/ba_control.yaml) and "
                                                "report the share answered No beside BA accuracy (No-bias control: "
                                                "every BA question's answer is No)")
    permutations: int = Field(1, ge=1, le=5, description="ask every BC and KV question under this many cyclic shifts "
                                                        "of its options (1: the paper's order only)")
    prompt: Literal["paper", "authors"] = Field(
        "paper", description="the BC/KV prompt: paper (Table 20) or authors (their release's "
                             "mc_eval_template_0-shot.txt, with all five options where theirs lists four)")
    characters: str | None = Field(None, description="comma-separated character ids: only the questions asked as one "
                                                     "of them (BA and BC as the role, KV as the target), after "
                                                     "--limit's selection; e.g. a pairs folder's held-out characters")
    extraction: Literal["rules", "strict"] = Field(
        "rules", description="how answers are read: rules (scoring.choice, in-character replies) or strict "
                             "(the paper's: Yes/No opening the reply, the last 'Answer: <n>'; with prompt=authors, "
                             "the authors' first digit 1-5)")


@dataclass
class CharmState(RunState):
    """What before_items() measures for the records' meta (items: the run's, for the dialogue)."""

    sim: dict[str, float] | None = None     # distractor-to-answer similarity per MCQ (Table 14)
    embedder: str | None = None             # the embedder that measured it
    sim_groups: dict | None = None          # an inspect task's MCQs, measured on their first job
