"""One archive sample judged: both arms in the sandbox, then every check over what they produced.

``main`` runs first (twice if it fails: a failure may be transient; still failing, there is no verdict, and the
merges that broke it are reverted, ``judge.baseline``); then the candidate; then main's diagnostics over the
candidate's outputs (the ratchet), the prompt checks, the findings ratchet over whole archived rounds, the probe's
checks and the CPU check, all combined by the statistical gate (``judge.gate.decide``); last, for a branch not
already rejected, the reward audit on constructed answers (``judge.audit_contrast``).
"""

from __future__ import annotations

import numpy as np

from domains.base import normalised_paid_cut
from meta_agent.config import GateThresholds
from meta_agent.digest import HIGH
from meta_agent.judge import gate
from meta_agent.judge.audit_contrast import gate_audit
from meta_agent.judge.baseline import revert_breaking_merges
from meta_agent.judge.cpu_cost import cpu_check
from meta_agent.judge.findings import ratchet_checks_over
from meta_agent.judge.harness_runs import HarnessRun, diagnose_rounds, ratchet_rounds, run_ratchet
from meta_agent.judge.request import Admitted, GateRequest
from meta_agent.judge.reward_audit import AUDITED_DOMAINS
from meta_agent.judge.sample import SampleData
from meta_agent.judge.verifier_order import order_check, settled
from meta_agent.prompt_checks import prompt_checks
from meta_agent.templates import harness_name


def arm(run: HarnessRun, traj_ids: list[str]) -> gate.Arm:
    """One arm of the gate from a harness run, trajectory by trajectory in ``traj_ids``' order."""
    if run.failure:
        n = len(traj_ids)
        return gate.Arm(np.full(n, np.nan), np.ones(n, bool), np.ones(n, bool), failed=run.failure)
    rows = [run.results[t] for t in traj_ids]
    # a reward refused for the domain's range or float32 goes to the gate as the number it was, so that the
    # gate's reward-validity check (no allowance) sees it, rather than as one error among the 1% allowed
    invalid = [r.get("invalid_reward") is not None for r in rows]
    reward = np.array([r["invalid_reward"] if bad else np.nan if r["reward"] is None else r["reward"]
                       for r, bad in zip(rows, invalid)], float)
    error = np.array([r["error"] is not None and not bad for r, bad in zip(rows, invalid)], bool)
    return gate.Arm(reward, np.array([r["keep"] for r in rows], bool), error)


def _error_names(findings: list[dict]) -> set[str]:
    return {harness_name(f.get("name")) for f in findings if f.get("severity") == "error"}


def gate_thresholds(thresholds: GateThresholds, reward_range: tuple[float, float]) -> GateThresholds:
    """``thresholds`` with the paid cut on the gate's [0, 1] scale taken from the domain's reward range, so the
    backtest's hack_rate counts the same trajectories as paid as the round digest does (SWE: reward >= 0.5)."""
    return thresholds.model_copy(update={"high_reward": normalised_paid_cut(reward_range, thresholds.high_reward)})


_SAME = ("not run: the branch hands its diagnose sessions what main's get (diagnostics/ and the GRPO knobs are "
         "main's, and a diagnose session sees nothing else), so it cannot change one of main's findings on identical "
         "outputs")
SAME_DIAGNOSTICS = [{"name": "diagnostics_ratchet", "passed": True, "detail": _SAME},
                    {"name": "probe_diagnostics", "passed": True, "detail": _SAME}]
"""The findings checks of a branch whose ``diagnose_key`` is main's (``diagnose_sessions.export_diagnostics``)."""


def run_arms(request: GateRequest, sample: SampleData, runs: dict[str, HarnessRun]) -> gate.GateResult | None:
    """Main (with one rerun), then the candidate, into ``runs``; a ``failed`` result when main fails twice."""
    repo, main_commit, domain = request.repo, request.main_commit, request.domain

    def run(commit: str, **fresh: bool) -> HarnessRun:
        return request.runner(repo, commit, sample, request.sandbox, request.cache_root, request.settings,
                              domain.reward_range, **fresh)

    for attempt in (1, 2):  # a failing main may be transient: one rerun (failures are never cached)
        request.progress(f"main {main_commit[:8]}: running in the sandbox" + (" (again)" if attempt == 2 else ""))
        runs["main"] = run(main_commit)
        if not runs["main"].failure:
            break
    if runs["main"].failure:
        reverted = revert_breaking_merges(repo, runs["main"].failure, message=request.progress,
                                          runs_ok=lambda commit: not run(commit).failure)
        reason = f"no verdict: main failed in the sandbox twice ({runs['main'].failure})"
        if reverted:
            reason += f"; reverted the merges that made it so: {', '.join(reverted)}"
        return gate.GateResult("failed", [reason], [{"name": "baseline", "passed": False, "detail": reason}], {})
    request.progress(f"candidate {request.candidate_commit[:8]}: running in the sandbox")
    runs["candidate"] = run(request.candidate_commit, fresh=request.fresh)
    return None


def judge_sample(request: GateRequest, admitted: Admitted, sample: SampleData,
                 runs: dict[str, HarnessRun]) -> gate.GateResult:
    """One sample: both harnesses in the sandbox, the ratchet, the prompt checks, the statistical gate."""
    domain = request.domain
    thresholds = gate_thresholds(request.thresholds, domain.reward_range)
    failed = run_arms(request, sample, runs)
    if failed is not None:
        return failed
    traj_ids = [v["traj_id"] for v in sample.views]
    group_index = {g: i for i, g in enumerate(dict.fromkeys(v["group_id"] for v in sample.views))}
    gate_sample = gate.Sample(np.array([group_index[v["group_id"]] for v in sample.views]),
                              np.array([r["verified"] >= HIGH for r in sample.rows], bool))
    main, candidate = runs["main"], runs["candidate"]
    if candidate.failure:
        return gate.decide(arm(main, traj_ids), arm(candidate, traj_ids), gate_sample, request.predicted, thresholds,
                           reward_range=domain.reward_range, seed=request.settings.seed,
                           extra_checks=admitted.probe_checks())
    request.progress("main's diagnostics over the candidate's outputs (ratchet)")
    candidate.findings = candidate.findings + run_ratchet(request.repo, request.main_commit, candidate, sample,
                                                          request.sandbox, request.cache_root, request.settings)
    extra = [admitted.cost, *admitted.probe_checks(), cpu_check(main.sandbox, candidate.sandbox)]
    changed = request.changed_paths()
    if sample.render_items:
        extra += prompt_checks(main.prompts, candidate.prompts, sample.render_truths, domain.leaks_answer,
                               admitted.config.grpo.max_prompt_length,
                               [str(item.get("question") or "") for item in sample.render_items])
    elif any(path.startswith("prompts/") for path in changed):
        extra.append({"name": "prompt_render", "passed": False,
                      "detail": "the branch changes prompts, but no archived row of the sample records the task "
                                "text to render them over (imported rows); the change cannot be judged"})
    new_errors = sorted(_error_names(candidate.findings) - _error_names(main.findings))
    bookkeeping = all(path.startswith(("diagnostics/", "skills/")) or path == "JOURNAL.md" for path in changed)
    if admitted.same_diagnostics:
        extra += SAME_DIAGNOSTICS
    else:  # the diagnostics or the knobs they are handed differ from main's
        extra += findings_ratchet(request, admitted, sample, bookkeeping)

    def decide(checks: list[dict], audit_metrics: dict) -> gate.GateResult:
        return gate.decide(arm(main, traj_ids), arm(candidate, traj_ids), gate_sample, request.predicted, thresholds,
                           new_error_findings=new_errors, seed=request.settings.seed,
                           reward_range=domain.reward_range, extra_checks=checks, bookkeeping_only=bookkeeping,
                           extra_metrics=audit_metrics, format_credit=admitted.config.format_credit)

    result = decide(extra, {})
    # a reward_auc settled by the order of the sample's rewards needs the audit's word on the side the sample lacks
    ordered = settled(result.checks)
    # The audit can add a failure or measure a prediction, never undo a rejection: skip its sessions then.
    # Otherwise every branch is audited, whatever it changes: the reward runs beside its whole harness and may
    # read harness.yaml, a prompt or a diagnostic, so a knob alone can flip what main's reward pays.
    if result.decision == "reject":
        return result
    if domain.name not in AUDITED_DOMAINS:  # (a domain without an audit: none)
        return decide(extra + [order_check({})], {}) if ordered else result
    request.progress("reward audit: main and candidate on the same constructed answers")
    audit_checks, audit_metrics = gate_audit(request.repo, request.main_commit, request.candidate_commit, sample.rows,
                                             domain.name, domain.verify, request.sandbox, request.settings,
                                             domain.reward_range)
    return decide(extra + audit_checks + ([order_check(audit_metrics)] if ordered else []), measured(audit_metrics))


def measured(audit_metrics: dict[str, gate.MetricResult]) -> dict[str, gate.MetricResult]:
    """The audit's figures that have an interval.  Over fewer tasks than the audit needs for one
    (``audit_contrast.MIN_GROUPS``) a figure measures nothing here: a prediction naming it is then not judged
    inconclusive (a rejection once the sample cannot grow) but left to the live check of the next round
    (``judge.audit_live``), as every field the gate cannot measure is; the audit's harm check is unchanged."""
    return {k: r for k, r in audit_metrics.items() if not (np.isnan(r.ci_low) or np.isnan(r.ci_high))}


def findings_ratchet(request: GateRequest, admitted: Admitted, sample: SampleData,
                     diagnostics_only: bool) -> list[dict]:
    """The branch's diagnostics against main's over identical outputs (``meta_agent.judge.findings``): whole
    archived rounds, each diagnosed exactly as its diagnose phase did (``harness_runs.diagnose_rounds``).  The
    diagnose sessions started beside the arms' runs (``admitted.rounds``) are used when the sample (it may have
    grown) still names those rounds."""
    rounds = ratchet_rounds(sample)
    request.progress("the branch's and main's diagnostics over " + ", ".join(f"round {n} of {r}" for r, n in rounds)
                     + ", whole, as each round's diagnose phase called them (ratchet on every finding)")
    started, beside = admitted.rounds if admitted.rounds is not None else (None, None)
    pairs = beside.result() if started == rounds else diagnose_rounds(
        request.repo, request.main_commit, request.candidate_commit, request.archive, rounds, request.sandbox,
        request.settings, request.cache_root, request.fresh)
    return ratchet_checks_over(pairs, request.predicted, diagnostics_changed=request.changes_diagnostics(),
                               diagnostics_only=diagnostics_only)
