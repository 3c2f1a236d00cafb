"""Backtest a harness branch against ``main`` over archived trajectories: the orchestration of one gate decision.

``backtest_branch`` finds the commits (what merging the branch would produce, judged rather than its tip: main may
have moved since it branched), hands the judge one request (``meta_agent.judge.decision.decide``: the static
checks, the archive sample grown while undecided, both arms in the sandbox, the ratchet, the probe session on
fresh tasks, the statistical gate, the reward audit), writes the report (``backtest_report``) and, if asked,
merges the branch with its evidence or tags it rejected.  Every decision is the judge's; nothing here weighs a
figure.  If ``main`` itself fails in the sandbox (twice), there is no verdict, and nothing is merged or tagged.

The sample and each commit's sandboxed run over it live in ``meta_agent.judge.harness_runs``; the names other
modules import from here (``draw_sample``, ``run_harness``, ``probe_seed``, ...) are re-exported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from domains.base import Domain
from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent.config import BacktestSettings, GateThresholds
from meta_agent.cost import RoundLimits
from meta_agent.judge.decision import GateRequest, decide
from meta_agent.judge.diagnose_sessions import run_diagnostics, sandbox_limits  # noqa: F401
from meta_agent.judge.harness_runs import HarnessRun, diagnose_rounds, ratchet_rounds, run_harness  # noqa: F401
from meta_agent.judge.sample import BacktestError, SampleData, draw_sample  # noqa: F401
from meta_agent.judge.probe_plan import probe_seed  # noqa: F401
from meta_agent.judge.sample_verdict import gate_thresholds  # noqa: F401
from meta_agent.names import get_domain
from rl_backend.archive import Archive
from sandboxes.base import Sandbox

Progress = Callable[[str], None]


@dataclass
class BacktestOutcome:
    branch: str
    candidate_commit: str
    main_commit: str
    decision: str
    """merge | reject | failed (``main`` failed in the sandbox: no verdict, nothing merged or tagged)."""
    reasons: list[str]
    report: dict
    report_json: Path
    report_md: Path
    merge_commit: str | None = None
    tag: str | None = None


def backtest_branch(repo: HarnessRepo, archive: Archive, branch: str, sandbox: Sandbox, out_dir: Path, *,
                    domain: Domain | None = None, thresholds: GateThresholds = GateThresholds(),
                    settings: BacktestSettings = BacktestSettings(), limits: RoundLimits = RoundLimits(),
                    seconds_left: float | None = None, seconds_per_token: float | None = None,
                    run_id: str | None = None, apply: bool = True, progress: Progress = lambda s: None,
                    runner: Callable[..., HarnessRun] = run_harness, probe_secret: bytes | None = None,
                    ) -> BacktestOutcome:
    """Replay ``branch`` and ``main`` over the same archive sample, judge, and (if ``apply``) merge or tag.

    ``domain`` defaults to the one ``main``'s harness.yaml names; ``seconds_left`` and
    ``seconds_per_token`` (the run's remaining compute budget and its measured cost per
    generated token) let the gate refuse knobs the budget cannot pay for.  ``runner`` runs each arm's
    harness over the sample (``run_harness``'s signature and result): ``ShardedRunner`` shards it over Ray.
    ``probe_secret``: the run's draw secret (``RunDir.draw_secret``), which seeds the probe's task draw
    (``judge.probe_plan.probe_seed``); without it the seed comes from ``secrets`` alone.
    """
    from meta_agent.backtest_report import build_report, write_report

    iv = repo.intervention(branch)
    main_commit = repo.head("main")
    domain = domain or get_domain(repo.config(main_commit).domain)
    try:  # judge what merging would produce, not the branch tip: main may have moved since it branched
        cand_commit, conflict = repo.merge_preview(branch), None
    except HarnessError as exc:
        cand_commit, conflict = repo.head(branch), str(exc)
    verdict = decide(GateRequest(
        repo, archive, branch, main_commit, cand_commit, domain, sandbox, out_dir / "cache", conflict=conflict,
        predicted=iv.predicted_effects, thresholds=thresholds, settings=settings, limits=limits,
        seconds_left=seconds_left, seconds_per_token=seconds_per_token, run_id=run_id, fresh=apply, runner=runner,
        probe_secret=probe_secret, progress=progress))
    report = build_report(iv, main_commit, cand_commit, verdict, thresholds, settings)
    json_path, md_path = write_report(report, out_dir / branch.replace("/", "_"))
    outcome = BacktestOutcome(branch, cand_commit, main_commit, verdict.decision, verdict.result.reasons, report,
                              json_path, md_path)
    if apply and outcome.decision != "failed":
        failpoint("backtest.report_written")
        apply_decision(repo, outcome)
    return outcome


PREVIEW_GROUPS = 8
"""An agent's preview backtest: a small sample, no escalation (the real backtest decides)."""


def make_preview(repo: HarnessRepo, archive: Archive, sandbox: Sandbox, out_dir: Path, *, domain: Domain,
                 thresholds: GateThresholds, settings: BacktestSettings) -> Callable[[str], dict]:
    """``preview(branch) -> report``: the run's gate on a small sample, never merging or tagging.

    The loop hands this to agents (``AgentContext.preview``), so that no agent builds a sandbox or
    finds the archive itself, and previews judge with the run's own thresholds.
    """
    small = settings.model_copy(update={"sample_groups": min(PREVIEW_GROUPS, settings.sample_groups),
                                        "max_sample_groups": min(PREVIEW_GROUPS, settings.sample_groups)})

    def preview(branch: str) -> dict:
        return backtest_branch(repo, archive, branch, sandbox, out_dir, domain=domain, thresholds=thresholds,
                               settings=small, apply=False).report

    return preview


def apply_decision(repo: HarnessRepo, outcome: BacktestOutcome) -> None:
    """Merge a passing branch with its evidence; tag and keep a failing one."""
    figures = outcome.report.get("key_figures", "")
    evidence = {"Backtest": f"{outcome.report_json} sample={outcome.report['sample']['id']}",
                "Candidate": outcome.report["intervention"]["head"]}
    if outcome.decision == "merge":
        verdict = "merged on probation (its benefit is checked live next round)" if outcome.report["gate"].get(
            "probation") else "merged"
        try:
            outcome.merge_commit = repo.merge(
                outcome.branch, evidence | {"Verdict": f"{verdict}; {figures}"},
                summary=f"Merge {outcome.branch}: {outcome.report['intervention']['subject']}")
            return
        except HarnessError as exc:
            outcome.decision = "reject"
            outcome.reasons = [f"passed the gate but does not merge cleanly into main: {exc}"]
            outcome.report["decision"] = "reject"
            outcome.report["reasons"] = outcome.reasons
            outcome.report_json.write_text(json.dumps(outcome.report, indent=2))
    verdict = "rejected: " + "; ".join(outcome.reasons)
    outcome.tag = repo.reject(outcome.branch, verdict[:1000], evidence | {"Verdict": f"rejected; {figures}"})
