"""The Backend seam: train one round of GRPO from a gated harness commit and a policy.

A backend applies the harness it is given exactly (prompts, reward, filters,
knobs), archives every rollout as a trajectory row (``rl_backend.schema``), and
evaluates the new policy on the domain's held-out tasks with the domain's trusted
verifier only.  It never decides what is merged.

    backend = LocalBackend()
    result = backend.train_round(RoundSpec(run_id="r1", round=0, harness_dir=exported, harness_commit=sha,
                                           policy_in=None, out_dir=run / "rounds/0/train", domain=domain))
    result.policy_ref        # checkpoint folder for the next round's ``policy_in``
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, runtime_checkable

from harness_repo.contract import TaskSpec

Progress = Callable[[int, int, dict], None]
"""``progress(step, total_steps, metrics_of_that_step)``, called after every optimizer step."""


class TaskLike(Protocol):
    """What a backend uses of one task (``meta_agent.domains.base.Task`` is one)."""

    task_id: str
    data_source: str
    question: str
    ground_truth: dict

    def template_vars(self) -> dict:
        """The ``task`` variable the harness's prompt templates see (never the answer)."""
        ...


class DomainLike(Protocol):
    """What a backend needs from a domain (``meta_agent.domains`` implements it; declared here so
    that this layer never imports the one above it)."""

    name: str
    eval_specs: list[TaskSpec]
    reward_range: tuple[float, float]
    exam_max_tokens: int

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Any]:
        """``n`` tasks (``TaskLike``) of ``split``."""
        ...

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """The trusted verifier: 0.0 or 1.0 and why; never raises."""
        ...

    def exam_messages(self, task: Any) -> list[dict]:
        """The trusted held-out exam prompt for a task."""
        ...


@dataclass
class RoundSpec:
    """What one training round needs."""

    run_id: str
    round: int
    harness_dir: Path
    """Exported files of the harness commit (already gated)."""
    harness_commit: str
    policy_in: str | None
    """Previous round's checkpoint folder; ``None`` starts from the base model."""
    out_dir: Path
    """``rounds/<n>/train/``: the new policy, ``train.log`` and ``metrics.jsonl`` go here."""
    domain: DomainLike
    seed: int = 0
    """Seeds sampling, the training-task draw and torch; the same spec trains the same way."""
    heldout_size: int = 16
    heldout_seed: int = 0
    """Seed of the held-out draw: keep it fixed across rounds so their accuracies are comparable."""
    heldout_max_tokens: int | None = None
    """Generation budget of the held-out exam; ``None`` uses ``domain.exam_max_tokens``.  Trusted code
    fixes it, never harness.yaml: a harness raising ``max_completion_length`` cannot move the exam."""
    heldout_specs: list[TaskSpec] | None = None
    """Held-out task mix; ``None`` uses ``domain.eval_specs`` (never the harness's own mix)."""


@dataclass
class RoundResult:
    """What a round produced."""

    policy_ref: str
    """Checkpoint folder written this round."""
    metrics: list[dict]
    """One dict per optimizer step: loss, reward mean/std, kl, lengths, kept trajectories, ..."""
    rollouts: list[dict]
    """Trajectory rows (``schema.TRAJECTORY_SCHEMA`` fields) of split ``train``."""
    heldout: list[dict]
    """Trajectory rows of the held-out evaluation, split ``heldout``, ``reward`` None."""
    eval: dict = field(default_factory=dict)
    """``{"heldout_accuracy": float, "n": int, ...}``, scored by the domain's verifier only."""


class TrainingFailed(Exception):
    """Harness code (or training itself) failed during a round; the message names the log to read."""


@runtime_checkable
class Backend(Protocol):
    """Trains one GRPO round.

    Example::

        result = backend.train_round(spec, progress=lambda step, total, m: print(step, total, m["reward"]))
    """

    name: str

    def train_round(self, spec: RoundSpec, progress: Progress | None = None) -> RoundResult:
        """Train ``spec``'s round and return its checkpoint, metrics, rollouts and held-out eval."""
        ...
