"""What the next round would cost under a harness's knobs, and whether that fits trusted limits.

``harness.yaml`` knobs are untrusted: range checks alone let a branch set every knob
to its upper bound (millions of tasks drawn before the first step).  The gate
predicts the round's size from the knobs and refuses what breaks the trusted
per-round limits (``RoundLimits``) or what the run's remaining compute budget
cannot pay for.

    cost = predict(config.grpo)
    check = cost_check(cost, RoundLimits(), seconds_left=1800.0, seconds_per_token=0.02)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pydantic import BaseModel, ConfigDict, Field

from harness_repo.contract import GRPOKnobs


class RoundLimits(BaseModel):
    """Trusted ceilings on one training round (not in the harness repo: nothing an agent writes moves them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps: int = Field(64, ge=1)
    """Optimizer steps in one round."""
    max_tasks: int = Field(512, ge=1)
    """Training prompts drawn for one round (steps x prompts per step)."""
    max_rollouts: int = Field(2048, ge=1)
    """Completions generated in one round (tasks x group size)."""
    max_generated_tokens: int = Field(262_144, ge=1)
    """Completion tokens one round may generate at most (rollouts x max completion length)."""
    max_prompt_tokens: int = Field(1024, ge=16)
    """Largest prompt budget (``max_prompt_length``) a harness may ask for."""


@dataclass(frozen=True)
class RoundCost:
    """The size of one round under some knobs (upper bounds: every completion at full length)."""

    steps: int
    tasks: int
    rollouts: int
    generated_tokens: int
    prompt_tokens: int


def predict(knobs: GRPOKnobs) -> RoundCost:
    """The round ``knobs`` describe."""
    tasks = knobs.steps_per_round * knobs.prompts_per_step
    rollouts = tasks * knobs.group_size
    return RoundCost(steps=knobs.steps_per_round, tasks=tasks, rollouts=rollouts,
                     generated_tokens=rollouts * knobs.max_completion_length,
                     prompt_tokens=knobs.max_prompt_length)


def cost_check(cost: RoundCost, limits: RoundLimits, *, seconds_left: float | None = None,
               seconds_per_token: float | None = None) -> dict:
    """A gate check (``name``, ``passed``, ``detail``, ``cost``) for the predicted round."""
    over = []
    for name, value, cap in (("steps", cost.steps, limits.max_steps), ("tasks", cost.tasks, limits.max_tasks),
                             ("rollouts", cost.rollouts, limits.max_rollouts),
                             ("generated tokens", cost.generated_tokens, limits.max_generated_tokens),
                             ("prompt tokens", cost.prompt_tokens, limits.max_prompt_tokens)):
        if value > cap:
            over.append(f"{name} {value} > {cap}")
    detail = (f"next round: {cost.steps} steps, {cost.tasks} tasks, {cost.rollouts} rollouts, "
              f"<= {cost.generated_tokens} generated tokens")
    if seconds_left is not None and seconds_per_token:
        predicted = cost.generated_tokens * seconds_per_token
        detail += f", ~{predicted / 3600:.2f} h of compute ({seconds_left / 3600:.2f} h left in the run budget)"
        if predicted > seconds_left:
            over.append(f"predicted compute {predicted / 3600:.2f} h > {seconds_left / 3600:.2f} h left in the budget")
    if over:
        detail = "over the trusted per-round limits: " + "; ".join(over) + f" ({detail})"
    return {"name": "cost", "passed": not over, "detail": detail, "cost": asdict(cost)}
