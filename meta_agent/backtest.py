"""Backtest a harness branch against ``main`` over archived trajectories.

Each harness commit runs in its own sandboxed harness runtime (``sandboxes.harness_client``,
the same runtime training uses): it renders its prompts over the sample's archived tasks,
scores the sample in the generation batches training scored it in, applies its
filters and runs its diagnostics.  Main's diagnostics also run, in their own sandbox,
over the candidate's outputs: deleting or rewriting a diagnostic on the branch cannot
make it disappear from the gate (the ratchet of DESIGN §3).  Every decision is made
on the host: prompt checks (``prompt_checks``), the predicted cost of the next round
(``cost``), and the statistical gate (``gate.decide``).  When the sample is too small
to decide, more archived groups are drawn, up to ``BacktestSettings.max_sample_groups``;
then the branch is rejected for lack of evidence.  If ``main`` itself fails in the
sandbox (twice), there is no verdict.  Outputs are cached by (tree, sample, runtime
version); failures never are, and a backtest that may merge runs its candidate fresh
(a harness can change with the clock, which no key covers).  Every candidate is also
judged in a probe session shaped like training on fresh tasks (``meta_agent.judge.probe``):
a harness cannot behave on the archive and pay wrong answers in training.  The probe has a
session of its own and runs beside the sandbox runs of the arms (a thread), so it adds
little wall time (``bench/bench_probe.py``).

The sample and each commit's sandboxed run over it live in ``meta_agent.judge.harness_runs``
(re-exported here); this module judges.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from domains.base import Domain, normalised_paid_cut
from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent import gate
from meta_agent.config import BacktestSettings, GateThresholds
from meta_agent.cost import RoundLimits, cost_check, predict
from meta_agent.digest import HIGH
from meta_agent.judge.audit_contrast import gate_audit
from meta_agent.judge.baseline import revert_breaking_merges
from meta_agent.judge.cpu_cost import cpu_check
from meta_agent.judge.diagnose_sessions import diagnose_key, run_diagnostics, sandbox_limits  # noqa: F401
from meta_agent.judge.findings import ratchet_checks_over
from meta_agent.judge.harness_runs import (BacktestError, HarnessRun, SampleData, diagnose_rounds,  # noqa: F401
                                           draw_sample, ratchet_rounds, run_harness, run_ratchet)
from meta_agent.judge.probe import ProbeContext, probe_commit
from meta_agent.judge.reward_audit import AUDITED_DOMAINS
from meta_agent.names import get_domain
from meta_agent.prompt_checks import prompt_checks
from meta_agent.templates import harness_name
from rl_backend.archive import Archive
from sandboxes.base import Sandbox

Progress = Callable[[str], None]


def _arm(run: HarnessRun, traj_ids: list[str]) -> gate.Arm:
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


def _reject_early(name: str, reason: str) -> gate.GateResult:
    check = {"name": name, "passed": False, "detail": reason}
    return gate.GateResult("reject", [reason], [check], {})


def _static_checks(repo: HarnessRepo, branch: str, cand_commit: str, conflict: str | None, domain: Domain,
                   limits: RoundLimits, seconds_left: float | None, seconds_per_token: float | None,
                   ) -> tuple[gate.GateResult | None, dict | None]:
    """Checks that need no sandbox: merge conflict, contract, harness.yaml, predicted cost."""
    if conflict:
        return _reject_early("merge", conflict), None
    violations = repo.contract_violations(branch)
    if violations:
        return _reject_early("contract", "changes outside the harness contract: " + ", ".join(violations)), None
    try:
        config = repo.config(cand_commit)  # validated on the host: knobs stay within trusted bounds
        if config.domain != domain.name:
            raise BacktestError(f"domain is {config.domain!r} but this run's domain is {domain.name!r}")
        domain.check_task_specs(config.tasks)
    except (HarnessError, ValueError) as exc:
        return _reject_early("harness.yaml", f"invalid harness.yaml: {exc}"), None
    cost = cost_check(predict(config.grpo), limits, seconds_left=seconds_left, seconds_per_token=seconds_per_token)
    if not cost["passed"]:
        return gate.GateResult("reject", [cost["detail"]], [cost], {}), None
    return None, {"cost": cost, "config": config}


def probe_seed(secret: bytes | None, round: int) -> int:
    """The probe's task seed: HMAC-SHA256 of ``probe/<round>/<nonce>`` under the run's draw secret, keyed apart
    from training's ``train-draw/<n>`` (``loop.round_seed``), with a fresh nonce for every probe, so neither a
    resume nor a second backtest of the round replays a draw, and no probe seed tells a training one."""
    if secret is None:
        return secrets.randbits(63)
    nonce = secrets.token_hex(16)
    digest = hmac.new(secret, f"probe/{round}/{nonce}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # 63 bits, as the probe's own draw


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
    (:func:`probe_seed`); without it the seed comes from ``secrets`` alone.
    """
    from meta_agent.backtest_report import build_report, write_report

    iv = repo.intervention(branch)
    main_commit = repo.head("main")
    domain = domain or get_domain(repo.config(main_commit).domain)
    try:  # judge what merging would produce, not the branch tip: main may have moved since it branched
        cand_commit, conflict = repo.merge_preview(branch), None
    except HarnessError as exc:
        cand_commit, conflict = repo.head(branch), str(exc)
    cache_root = out_dir / "cache"
    result, static = _static_checks(repo, branch, cand_commit, conflict, domain, limits, seconds_left,
                                    seconds_per_token)
    n_groups = settings.sample_groups
    sample = SampleData.of(draw_sample(archive, settings, run_id=run_id, n_groups=n_groups))
    runs: dict[str, HarnessRun] = {}
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="beside") as pool:
        probe = None
        if result is None:  # never cached: a fresh secret seed every time
            # its own session, shaped like training from its first request (sharing the candidate's backtest
            # session would let a harness that saw archived rows first know it is judged); run beside the
            # sandbox runs of main and the candidate, so its container start and requests add little wall time
            progress(f"candidate {cand_commit[:8]}: probe session shaped like training, on fresh tasks")
            # a diagnose session sees only diagnostics/ and the knobs (diagnose_sessions.export_diagnostics): a branch
            # that changes neither cannot change a finding on identical outputs, so it needs no findings ratchet
            static["same_diagnostics"] = diagnose_key(repo, cand_commit) == diagnose_key(repo, main_commit)
            context = ProbeContext.of(sample.rows)
            probe = pool.submit(probe_commit, repo, cand_commit, sandbox, sandbox_limits(settings), settings.timeout_s,
                                domain, static["config"], context, seed=probe_seed(probe_secret, context.round),
                                max_error_rate=thresholds.max_error_rate,
                                main_commit=None if static["same_diagnostics"] else main_commit,
                                pay_main_commit=main_commit,
                                predicted=iv.predicted_effects, diagnostics_changed=_changes_diagnostics(repo, branch))
            static["probe"] = lambda: probe.result().checks
            # the findings ratchet needs only the commits and the archived rounds: its diagnose sessions (each a
            # fresh container, start then one call, as the diagnose phase) run beside the arms' runs too
            rounds = ratchet_rounds(sample)
            if not static["same_diagnostics"]:
                static["rounds"] = (rounds, pool.submit(diagnose_rounds, repo, main_commit, cand_commit, archive,
                                                        rounds, sandbox, settings, cache_root, apply))
        while result is None:
            progress(f"sample {sample.key}: {len(sample.rows)} trajectories in {len(sample.batches)} batches")
            result = _judge(repo, archive, main_commit, cand_commit, iv, sample, sandbox, cache_root, settings,
                            thresholds, domain, static, runs, progress, fresh=apply, runner=runner)
            if result.decision != "undecided":
                break
            bigger = min(2 * n_groups, settings.max_sample_groups)
            grown = (SampleData.of(draw_sample(archive, settings, run_id=run_id, n_groups=bigger))
                     if bigger > n_groups else None)
            if grown is None or len(grown.rows) <= len(sample.rows):
                result = gate.insufficient(result)
                break
            progress(f"not enough evidence on {n_groups} groups ({'; '.join(result.undecided)}); drawing {bigger}")
            n_groups, sample, result = bigger, grown, None
        probe_report = probe.result() if probe is not None else None

    report = build_report(iv, main_commit, cand_commit, sample.table, sample.key, runs, result, thresholds, settings)
    if static:
        report["cost"] = static["cost"]
    if probe_report is not None:
        report["probe"] = probe_report.to_dict()
    json_path, md_path = write_report(report, out_dir / branch.replace("/", "_"))
    outcome = BacktestOutcome(branch, cand_commit, main_commit, result.decision, result.reasons, report,
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


def _judge(repo: HarnessRepo, archive: Archive, main_commit: str, cand_commit: str, iv, sample: SampleData,
           sandbox: Sandbox, cache_root: Path, settings: BacktestSettings, thresholds: GateThresholds, domain: Domain,
           static: dict,
           runs: dict[str, HarnessRun], progress: Progress, fresh: bool = False,
           runner: Callable[..., HarnessRun] = run_harness) -> gate.GateResult:
    """One sample: both harnesses in the sandbox, the ratchet, the prompt checks, the statistical gate."""
    thresholds = gate_thresholds(thresholds, domain.reward_range)
    for attempt in (1, 2):  # a failing main may be transient: one rerun (failures are never cached)
        progress(f"main {main_commit[:8]}: running in the sandbox" + (" (again)" if attempt == 2 else ""))
        runs["main"] = runner(repo, main_commit, sample, sandbox, cache_root, settings, domain.reward_range)
        if not runs["main"].failure:
            break
    if runs["main"].failure:
        reverted = revert_breaking_merges(
            repo, runs["main"].failure, message=progress,
            runs_ok=lambda commit: not runner(repo, commit, sample, sandbox, cache_root, settings,
                                                   domain.reward_range).failure)
        reason = f"no verdict: main failed in the sandbox twice ({runs['main'].failure})"
        if reverted:
            reason += f"; reverted the merges that made it so: {', '.join(reverted)}"
        return gate.GateResult("failed", [reason], [{"name": "baseline", "passed": False, "detail": reason}], {})
    progress(f"candidate {cand_commit[:8]}: running in the sandbox")
    runs["candidate"] = runner(repo, cand_commit, sample, sandbox, cache_root, settings, domain.reward_range,
                                    fresh=fresh)
    traj_ids = [v["traj_id"] for v in sample.views]
    group_index = {g: i for i, g in enumerate(dict.fromkeys(v["group_id"] for v in sample.views))}
    gate_sample = gate.Sample(np.array([group_index[v["group_id"]] for v in sample.views]),
                              np.array([r["verified"] >= HIGH for r in sample.rows], bool))
    if runs["candidate"].failure:
        return gate.decide(_arm(runs["main"], traj_ids), _arm(runs["candidate"], traj_ids), gate_sample,
                           iv.predicted_effects, thresholds, reward_range=domain.reward_range, seed=settings.seed,
                           extra_checks=static["probe"]())
    progress("main's diagnostics over the candidate's outputs (ratchet)")
    ratchet = run_ratchet(repo, main_commit, runs["candidate"], sample, sandbox, cache_root, settings)
    runs["candidate"].findings = runs["candidate"].findings + ratchet
    extra = [static["cost"], *static["probe"](), cpu_check(runs["main"].sandbox, runs["candidate"].sandbox)]
    if sample.render_items:
        extra += prompt_checks(runs["main"].prompts, runs["candidate"].prompts, sample.render_truths,
                               domain.leaks_answer, static["config"].grpo.max_prompt_length)
    elif any(path.startswith("prompts/") for path in repo.changed_paths(iv.branch)):
        extra.append({"name": "prompt_render", "passed": False,
                      "detail": "the branch changes prompts, but no archived row of the sample records the task "
                                "text to render them over (imported rows); the change cannot be judged"})
    new_errors = sorted(_error_names(runs["candidate"].findings) - _error_names(runs["main"].findings))
    changed = repo.changed_paths(iv.branch)
    bookkeeping = all(path.startswith(("diagnostics/", "skills/")) or path == "JOURNAL.md" for path in changed)
    if static["same_diagnostics"]:
        extra += SAME_DIAGNOSTICS
    else:  # the diagnostics or the knobs they are handed differ from main's
        extra += _findings_ratchet(repo, archive, main_commit, cand_commit, iv, sample, sandbox, cache_root,
                                   settings, bookkeeping, fresh, progress, static.get("rounds"))

    def decide(checks: list[dict], audit_metrics: dict) -> gate.GateResult:
        return gate.decide(_arm(runs["main"], traj_ids), _arm(runs["candidate"], traj_ids), gate_sample,
                           iv.predicted_effects, thresholds, new_error_findings=new_errors, seed=settings.seed,
                           reward_range=domain.reward_range, extra_checks=checks, bookkeeping_only=bookkeeping,
                           extra_metrics=audit_metrics, format_credit=static["config"].format_credit)

    result = decide(extra, {})
    # The audit can add a failure or measure a prediction, never undo a rejection: skip its sessions then.
    # Otherwise every branch is audited, whatever it changes: the reward runs beside its whole harness and may
    # read harness.yaml, a prompt or a diagnostic, so a knob alone can flip what main's reward pays.
    if result.decision == "reject" or domain.name not in AUDITED_DOMAINS:  # (a domain without an audit: none)
        return result
    progress("reward audit: main and candidate on the same constructed answers")
    audit_checks, audit_metrics = gate_audit(repo, main_commit, cand_commit, sample.rows, domain.name,
                                             domain.verify, sandbox, settings, domain.reward_range)
    return decide(extra + audit_checks, audit_metrics)


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


def _findings_ratchet(repo: HarnessRepo, archive: Archive, main_commit: str, cand_commit: str, iv, sample: SampleData,
                      sandbox: Sandbox, cache_root: Path, settings: BacktestSettings, diagnostics_only: bool,
                      fresh: bool, progress: Progress, early: tuple | None = None) -> list[dict]:
    """The branch's diagnostics against main's over identical outputs (``meta_agent.judge.findings``): whole
    archived rounds, each diagnosed exactly as its diagnose phase did (``harness_runs.diagnose_rounds``).
    ``early`` is ``(rounds, future)`` of the same diagnose sessions started beside the arms' runs; used when the
    sample (it may have grown) still names those rounds."""
    rounds = ratchet_rounds(sample)
    progress("the branch's and main's diagnostics over " + ", ".join(f"round {n} of {r}" for r, n in rounds)
             + ", whole, as each round's diagnose phase called them (ratchet on every finding)")
    started, beside = early if early is not None else (None, None)
    pairs = beside.result() if started == rounds else diagnose_rounds(repo, main_commit, cand_commit, archive,
                                                                       rounds, sandbox, settings, cache_root, fresh)
    return ratchet_checks_over(pairs, iv.predicted_effects, diagnostics_changed=_changes_diagnostics(repo, iv.branch),
                               diagnostics_only=diagnostics_only)


def _changes_diagnostics(repo: HarnessRepo, branch: str) -> bool:
    """Whether ``branch`` edits ``diagnostics/``: then what its diagnostics add must be predicted."""
    return any(path.startswith("diagnostics/") for path in repo.changed_paths(branch))


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
