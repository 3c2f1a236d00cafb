"""The gate's request and its verdict: what ``judge.decision.decide`` reads and what it returns with its evidence.

A request is trusted: the caller (``meta_agent.backtest``) builds it from the run's own settings, thresholds and
domain, and nothing the branch holds reaches one of them (DESIGN §3).
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from domains.base import Domain
from harness_repo.contract import HarnessConfig
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings, GateThresholds
from meta_agent.cost import RoundLimits
from meta_agent.judge.gate import GateResult
from meta_agent.judge.harness_runs import HarnessRun, run_harness
from meta_agent.judge.probe_verdict import ProbeReport
from meta_agent.judge.sample import SampleData
from rl_backend.archive import Archive
from sandboxes.base import Sandbox

Progress = Callable[[str], None]


@dataclass(frozen=True)
class GateRequest:
    """What to judge, against what, and with which trusted settings: everything a decision reads."""

    repo: HarnessRepo
    archive: Archive
    branch: str
    main_commit: str
    candidate_commit: str
    """What merging the branch into main would produce (``HarnessRepo.merge_preview``), or its tip on a conflict."""
    domain: Domain
    sandbox: Sandbox
    cache_root: Path
    conflict: str | None = None
    """Why the branch does not merge into main, if it does not: a rejection before any sandbox."""
    predicted: list[str] = field(default_factory=list)
    """The branch's Predicted-Effect lines."""
    thresholds: GateThresholds = field(default_factory=GateThresholds)
    settings: BacktestSettings = field(default_factory=BacktestSettings)
    limits: RoundLimits = field(default_factory=RoundLimits)
    seconds_left: float | None = None
    """The run's remaining compute budget; with ``seconds_per_token``, refuses knobs it cannot pay for."""
    seconds_per_token: float | None = None
    run_id: str | None = None
    """The archive's run to sample; every run when None."""
    fresh: bool = True
    """Run the candidate now, never from the cache: a backtest that may merge (a harness can change with the
    clock, which no cache key covers)."""
    runner: Callable[..., HarnessRun] = run_harness
    """Runs one arm over the sample (``run_harness``'s signature; ``ShardedRunner`` shards it over Ray)."""
    probe_secret: bytes | None = None
    """The run's draw secret, keying the probe's task seed (``probe_plan.probe_seed``)."""
    progress: Progress = lambda s: None

    def changed_paths(self) -> list[str]:
        return self.repo.changed_paths(self.branch)

    def changes_diagnostics(self) -> bool:
        """Whether the branch edits ``diagnostics/``: then what its diagnostics add must be predicted."""
        return any(path.startswith("diagnostics/") for path in self.changed_paths())


@dataclass
class Admitted:
    """A branch the static checks let through: its validated config, its cost check, and what runs beside the
    arms' sandbox runs (the probe; the ratchet's diagnose sessions of whole rounds, when its diagnostics differ)."""

    config: HarnessConfig
    cost: dict
    same_diagnostics: bool = False
    """Its diagnose sessions get what main's get (``diagnose_sessions.diagnose_key``): no findings ratchet."""
    probe: Future[ProbeReport] | None = None
    rounds: tuple[list[tuple[str, int]], Future] | None = None
    """(the archived rounds, their diagnose sessions' future), started beside the arms' runs."""

    def probe_checks(self) -> list[dict]:
        return self.probe.result().checks if self.probe is not None else []


@dataclass
class GateVerdict:
    """The decision with its evidence: the checks and metrics (``result``), the sample, both arms' runs, the cost
    check and the probe's report."""

    result: GateResult
    sample: SampleData
    runs: dict[str, HarnessRun]
    cost: dict | None = None
    probe: ProbeReport | None = None

    @property
    def decision(self) -> str:
        """merge | reject | failed (``main`` failed in the sandbox: no verdict)."""
        return self.result.decision


