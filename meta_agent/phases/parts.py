"""What every phase of a round works with: the run's parts, the progress callbacks and the round's seeds.

A phase is a class over :class:`RoundParts` (``meta_agent.phases.train`` and its siblings); ``RoundLoop`` is
all of them together plus the driver that runs them in order.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Callable

from domains.base import Domain
from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import Agent
from meta_agent.budget import Budget
from meta_agent.config import BacktestSettings, EvaluationSettings, GateThresholds, TripwireThresholds
from meta_agent.run_dir import RunDir
from rl_backend.archive import Archive
from rl_backend.base import Backend
from sandboxes.base import Sandbox


def round_seed(run: RunDir, n: int, public_seed: int | None = None) -> int:
    """The seed of round ``n``'s training draw (its tasks, and the trainer's own seed).

    By default a keyed hash of the round under the run's secret (``RunDir.draw_secret``): nothing an agent or
    harness code can read (run.json, the harness, the archive, earlier rounds' seeds) tells the next round's
    tasks, and a resume reads the same secret, so it draws the same tasks.  ``public_seed`` (``--draw-seed``)
    gives the formula every run used before, ``n + 1000 * public_seed``: predictable, for benchmarks that must
    reproduce exact figures."""
    if public_seed is not None:
        return n + 1000 * public_seed
    digest = hmac.new(run.draw_secret(), f"train-draw/{n}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF  # a 31-bit seed: every trainer and generator takes it


class RoundFailed(RuntimeError):
    """A round could not train; ``main`` was restored to the last good harness."""


class InfrastructureFailed(RoundFailed):
    """A round could not train for a reason outside the harness (the job, GPUs, cluster, engine): ``main`` and its
    merges are untouched, the state stays in the round's train phase and ``--resume`` retries the same commit."""


@dataclass
class Events:
    """Callbacks the loop reports progress through (the CLI draws them; tests may record them)."""

    phase: Callable[[int, str], None] = lambda n, phase: None
    train_step: Callable[[int, int, dict], None] = lambda step, total, metrics: None
    message: Callable[[str], None] = lambda text: None
    round_done: Callable[[dict], None] = lambda summary: None


@dataclass
class RoundParts:
    run: RunDir
    repo: HarnessRepo
    archive: Archive
    backend: Backend
    domain: Domain
    agent: Agent
    sandbox: Sandbox
    run_id: str
    thresholds: GateThresholds = field(default_factory=GateThresholds)
    tripwire: TripwireThresholds = field(default_factory=TripwireThresholds)
    settings: BacktestSettings = field(default_factory=BacktestSettings)
    evaluation: EvaluationSettings = field(default_factory=EvaluationSettings)
    """The trusted exam's size, seed and budget, handed to every round's RoundSpec."""
    candidates: int = 2
    seed: int | None = None
    """Public draw seed: round n trains with seed ``n + 1000 * seed``, which anyone can compute (benchmarks that
    reproduce exact figures).  None (the default): ``run.json``'s ``draw_seed`` if set, else the run's secret
    (:func:`round_seed`)."""
    budget: Budget = field(default_factory=Budget)
    """Shared with the agent; persisted in state.json after every phase."""
    events: Events = field(default_factory=Events)
    rollback: bool = True
    """After an exam that fell, train the next round from the fallen round's start (``meta_agent.run.lineage``)."""

    def _save(self, state: dict, phase: str) -> None:
        state["phase"] = phase
        state["updated"] = time.time()
        state["budget"] = self.budget.to_dict()
        self.run.save_state(state)
        failpoint("state.saved")

    def _saved_result(self, n: int) -> dict | None:
        """Round ``n``'s saved training result (harness commit, metrics, evaluation), or None if it has none."""
        saved = self.run.round_dir(n) / "train" / "result.json"
        return json.loads(saved.read_text()) if saved.exists() else None

    def _public_seed(self) -> int | None:
        """The public draw seed: this loop's, else run.json's ``draw_seed``; None draws with the run's secret."""
        if self.seed is not None or not self.run.run_json.exists():
            return self.seed
        recorded = self.run.config().get("draw_seed")
        return int(recorded) if recorded is not None else None

    @property
    def domain_ref(self) -> str:
        """The domain as ``"module:attr"``: what a ``RoundSpec`` carries instead of the live object."""
        cls = type(self.domain)
        return f"{cls.__module__}:{cls.__qualname__}"
