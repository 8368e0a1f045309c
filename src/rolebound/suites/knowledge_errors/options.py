"""The knowledge-errors suite's `--set` options and its per-run state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ..base import Options, RunState, choice

if TYPE_CHECKING:  # pragma: no cover
    from .strategies import Methods


class KnowledgeErrorsOptions(Options):
    corpus: str | None = Field(None, description="corpus YAML for RAG/S2RD (default: the one beside --data)")
    few_shot: str | None = Field(None, description="YAML pool of few-shot cases (default: the built-in few_shot.yaml)")
    embedder: str | None = Field(None, description="local sentence-transformers folder for retrieval")
    rag_k: int = Field(3, ge=1, description="chunks retrieved per query (RAG)")
    m: int = Field(3, ge=1, description="recollections per query (S2RD)")
    chunk_sentences: int = Field(8, ge=1, description="sentences per corpus chunk")
    step_max_tokens: int = Field(192, ge=1, description="token limit of S2RD's intermediate steps")
    answer_max_tokens: int | None = Field(None, ge=1, description="token limit of answers (default: --max-tokens)")
    judge_max_tokens: int | None = Field(None, ge=1, description="token limit of judge calls (default: --max-tokens)")
    hidden_states: bool | Literal["all"] = Field(True, description="save last-token hidden states of the run's "
                                                                   "items (all: of every item)")
    judge_scoring: choice("generate", "logprob") = Field(
        None, description="how the judge's yes/no is read (default: logprob on the demo models, generate on every other)")


@dataclass
class KnowledgeErrorsState(RunState):
    methods: "Methods | None" = None     # the run's retriever and detectors (load())
