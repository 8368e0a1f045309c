"""The capability suite's `--set` options and its per-run state."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BeforeValidator, Field

from ..base import DialogueOptions, RunState

if TYPE_CHECKING:  # pragma: no cover
    from .data import Role, RolesConfig


def _lower(v):
    return v.strip().lower() if isinstance(v, str) else v


class CapabilityOptions(DialogueOptions):
    roles: str | list[str] | None = Field(None, description="comma-separated role ids (default: all)")
    roles_file: str | None = Field(None, description="YAML of levels and roles (default: the built-in roles.yaml)")
    per_level: Annotated[Annotated[int, Field(ge=1)] | Literal["all"] | None, BeforeValidator(_lower)] = Field(
        None, description="questions per level, or 'all' (default: all; 2 for the starter bank on the bundled model)")
    judge: bool | None = Field(None, description="score RV, C, RC with the judge model "
                                                 "(default: on when --judge differs from --model)")
    permutations: int = Field(1, ge=1, le=4, description="ask every question under this many cyclic shifts of its "
                                                        "options (1: the paper's order only; shifted answers are "
                                                        "not judged and not in TA/IA/A)")
    judge_max_tokens: int | None = Field(None, ge=1, description="token limit of judge calls (default: --max-tokens)")
    think_tag: str | None = Field(None, description="reasoning marker before the Injection prefill "
                                                    "(default: read from the model's chat template, "
                                                    "or --backend-opt think_tag=...; '' for none)")


@dataclass
class CapabilityState(RunState):
    """The run's roles file and chosen roles (read once per run: data.run_roles), its per-level
    cap, and whether the judge scores RV, C and RC."""

    cfg: "RolesConfig | None" = None
    roles: "list[Role]" = field(default_factory=list)
    per_level: int | None = None
    judge_on: bool = False
