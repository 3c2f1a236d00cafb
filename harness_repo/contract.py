"""The file contract of a harness repo (DESIGN §4).

A harness repo is untrusted: an LLM writes it.  Its files only ever run inside the
sandboxed harness runtime (the ``sandboxes/harness_runtime/`` package), for backtests, the
local backend and verl alike, so everything here must be importable with the
standard library plus the packages baked into the sandbox image (pyyaml, jinja2,
math-verify).  Templates render in Jinja's sandboxed environment.

Layout of the repo root::

    harness.yaml          HarnessConfig below: domain, task mix / curriculum, GRPO knobs
    reward.py             compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw)
                            -> float | {"score": float, ...}          (verl's signature)
    filters.py            keep_trajectory(traj: dict) -> bool          (optional, default keep)
                          keep_group(group: list[dict]) -> bool        (optional, default keep)
    prompts/system.j2     policy system prompt (optional)
    prompts/user.j2       policy user prompt; variables: question, task (dict)
    diagnostics/*.py      diagnose(rollouts: list[dict]) -> list[dict] findings
    skills/*.md           skills adopted in this line
    JOURNAL.md            human-readable log of interventions

A *trajectory view* is the dict harness code sees for one rollout.  It never
contains the trusted verifier's outcome (``verified``/``verifier_info``): the
harness must not be able to read the answer key it is judged against.  Keys:
``traj_id, group_id, sample_idx, task_id, data_source, prompt, response,
ground_truth`` (parsed JSON), ``response_tokens, truncated, finish_reason,
extra_info`` (what ``compute_score`` receives: ``traj_id, task_id, group_id,
sample_idx, split``) and, once the reward has been computed, ``reward`` (and, for
``keep_group`` and diagnostics, ``keep``).  Filters run in one order: the reward of
every trajectory, then ``keep_trajectory`` on each, then ``keep_group`` on each group.

A *finding* is ``{"name": str, "severity": "info"|"warning"|"error",
"rate": float in [0, 1], "example_ids": [traj_id, ...], "message": str}``.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

HARNESS_FILES = ("harness.yaml", "reward.py", "filters.py", "JOURNAL.md")
HARNESS_DIRS = ("prompts", "diagnostics", "skills")
# Paths an agent may create or edit; anything else is outside the contract.
EDITABLE_GLOBS = (
    "harness.yaml",
    "reward.py",
    "filters.py",
    "JOURNAL.md",
    "prompts/*.j2",
    "diagnostics/*.py",
    "skills/*.md",
)
HIDDEN_FROM_HARNESS = ("verified", "verifier_info")
SEVERITIES = ("info", "warning", "error")


class TaskSpec(BaseModel):
    """One entry of the task mix."""

    model_config = ConfigDict(extra="forbid")

    name: str
    """Generator name inside the domain, e.g. ``chain_sum`` for reasoning-gym."""
    weight: float = Field(1.0, gt=0)
    """Relative share of this task in each round's training prompts."""
    config: dict = Field(default_factory=dict)
    """Difficulty knobs passed to the generator (e.g. ``min_terms``, ``max_digits``)."""


class GRPOKnobs(BaseModel):
    """Training knobs the harness controls.  Bounds are enforced here, on the host."""

    model_config = ConfigDict(extra="forbid")

    group_size: int = Field(4, ge=2, le=64)
    """Completions sampled per prompt (one GRPO group)."""
    prompts_per_step: int = Field(2, ge=1, le=1024)
    """Distinct prompts per optimizer step."""
    steps_per_round: int = Field(4, ge=1, le=100_000)
    """Optimizer steps in one round."""
    learning_rate: float = Field(1e-5, gt=0, le=1e-2)
    beta: float = Field(0.0, ge=0, le=1.0)
    """KL coefficient against the reference policy (0 disables the reference model)."""
    epsilon: float = Field(0.2, gt=0, le=1.0)
    """PPO clip range."""
    temperature: float = Field(1.0, gt=0, le=2.0)
    max_completion_length: int = Field(48, ge=4, le=65_536)
    max_prompt_length: int = Field(256, ge=16, le=65_536)
    dynamic_sampling: bool = False
    """Drop zero-variance groups from the loss (DAPO-style) instead of training on them."""
    mask_truncated: bool = False
    """Exclude truncated completions from the loss."""


class HarnessConfig(BaseModel):
    """``harness.yaml``."""

    model_config = ConfigDict(extra="forbid")

    domain: Literal["math", "code", "swe"]
    tasks: list[TaskSpec] = Field(min_length=1)
    grpo: GRPOKnobs = Field(default_factory=GRPOKnobs)
    format_credit: float = Field(0.0, ge=0, le=1)  # most the reward pays a verified failure (0..1 scale): gate.py
    notes: str = ""


def is_editable(path: str) -> bool:
    """Whether a repo-relative ``path`` matches one of :data:`EDITABLE_GLOBS`."""
    # fnmatch's "*" crosses "/", so compare component by component.
    parts = path.split("/")
    for pattern in EDITABLE_GLOBS:
        pattern_parts = pattern.split("/")
        if len(parts) == len(pattern_parts) and all(fnmatchcase(p, q) for p, q in zip(parts, pattern_parts)):
            return True
    return False
