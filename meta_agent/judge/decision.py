"""The gate's whole decision on one branch, behind one entry: :func:`decide` takes a :class:`GateRequest` and returns
a :class:`GateVerdict` with its evidence.

The order of a decision:

1. checks that need no sandbox (:func:`static_checks`): a merge conflict, the harness contract, a valid
   ``harness.yaml`` for the run's domain, the predicted cost of the next round;
2. the archive sample (``judge.harness_runs.draw_sample``), and beside the arms' runs, in threads: the probe session
   shaped like training on fresh tasks (``judge.probe``) and the findings ratchet's diagnose sessions of whole
   archived rounds (:class:`Beside`);
3. per sample, both arms in the sandbox and every check over them (``judge.sample_verdict.judge_sample``); while
   the sample is too small to decide, a larger one is drawn, up to ``BacktestSettings.max_sample_groups``, then
   what is still undecided is a rejection for lack of evidence (``judge.verdict.insufficient``).

Everything here is trusted code: the request names what to judge and by which thresholds, and nothing the branch
holds changes either (DESIGN §3).  Exporting the branch, writing the report and merging or tagging are the
caller's (``meta_agent.backtest``).

    verdict = decide(GateRequest(repo, archive, "iv/r3-x", main_commit, cand_commit, domain=domain,
                                 sandbox=sandbox, cache_root=out_dir / "cache"))
    verdict.result.decision  # merge | reject | failed
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from harness_repo.repo import HarnessError
from meta_agent.cost import cost_check, predict
from meta_agent.judge import gate
from meta_agent.judge.diagnose_sessions import diagnose_key, sandbox_limits
from meta_agent.judge.harness_runs import HarnessRun, diagnose_rounds, ratchet_rounds

from meta_agent.judge.probe import ProbeContext, probe_commit
from meta_agent.judge.probe_plan import probe_seed
from meta_agent.judge.request import Admitted, GateRequest, GateVerdict
from meta_agent.judge.sample import BacktestError, SampleData, draw_sample
from meta_agent.judge.sample_verdict import judge_sample

__all__ = ["Admitted", "GateRequest", "GateVerdict", "decide", "reject_early", "static_checks"]


def reject_early(name: str, reason: str) -> gate.GateResult:
    return gate.GateResult("reject", [reason], [{"name": name, "passed": False, "detail": reason}], {})


def static_checks(request: GateRequest) -> gate.GateResult | Admitted:
    """Checks that need no sandbox: merge conflict, contract, harness.yaml, predicted cost."""
    repo, domain = request.repo, request.domain
    if request.conflict:
        return reject_early("merge", request.conflict)
    violations = repo.contract_violations(request.branch)
    if violations:
        return reject_early("contract", "changes outside the harness contract: " + ", ".join(violations))
    try:
        config = repo.config(request.candidate_commit)  # validated on the host: knobs stay within trusted bounds
        if config.domain != domain.name:
            raise BacktestError(f"domain is {config.domain!r} but this run's domain is {domain.name!r}")
        domain.check_task_specs(config.tasks)
    except (HarnessError, ValueError) as exc:
        return reject_early("harness.yaml", f"invalid harness.yaml: {exc}")
    cost = cost_check(predict(config.grpo), request.limits, seconds_left=request.seconds_left,
                      seconds_per_token=request.seconds_per_token)
    if not cost["passed"]:
        return gate.GateResult("reject", [cost["detail"]], [cost], {})
    return Admitted(config, cost)


def start_beside(request: GateRequest, admitted: Admitted, sample: SampleData, pool: ThreadPoolExecutor) -> None:
    """Start the probe and, for a branch whose diagnostics differ, the ratchet's round diagnoses, in ``pool``."""
    repo, settings, main_commit = request.repo, request.settings, request.main_commit
    cand_commit = request.candidate_commit
    # its own session, shaped like training from its first request (sharing the candidate's backtest session would
    # let a harness that saw archived rows first know it is judged); run beside the sandbox runs of main and the
    # candidate, so its container start and requests add little wall time; never cached: a fresh seed every time
    request.progress(f"candidate {cand_commit[:8]}: probe session shaped like training, on fresh tasks")
    # a diagnose session sees only diagnostics/ and the knobs (diagnose_sessions.export_diagnostics): a branch
    # that changes neither cannot change a finding on identical outputs, so it needs no findings ratchet
    admitted.same_diagnostics = diagnose_key(repo, cand_commit) == diagnose_key(repo, main_commit)
    context = ProbeContext.of(sample.rows)
    admitted.probe = pool.submit(
        probe_commit, repo, cand_commit, request.sandbox, sandbox_limits(settings), settings.timeout_s,
        request.domain, admitted.config, context, seed=probe_seed(request.probe_secret, context.round),
        max_error_rate=request.thresholds.max_error_rate,
        main_commit=None if admitted.same_diagnostics else main_commit, pay_main_commit=main_commit,
        predicted=request.predicted, diagnostics_changed=request.changes_diagnostics())
    # the findings ratchet needs only the commits and the archived rounds: its diagnose sessions (each a fresh
    # container, start then one call, as the diagnose phase) run beside the arms' runs too
    rounds = ratchet_rounds(sample)
    if not admitted.same_diagnostics:
        admitted.rounds = (rounds, pool.submit(diagnose_rounds, repo, main_commit, cand_commit, request.archive,
                                               rounds, request.sandbox, settings, request.cache_root, request.fresh))


def decide(request: GateRequest) -> GateVerdict:
    """Judge ``request``'s candidate against main: every check of the gate, the sample grown while undecided."""
    settings = request.settings
    checked = static_checks(request)
    n_groups = settings.sample_groups
    sample = SampleData.of(draw_sample(request.archive, settings, run_id=request.run_id, n_groups=n_groups))
    runs: dict[str, HarnessRun] = {}
    if isinstance(checked, gate.GateResult):
        return GateVerdict(checked, sample, runs)
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="beside") as pool:
        start_beside(request, checked, sample, pool)
        while True:
            request.progress(f"sample {sample.key}: {len(sample.rows)} trajectories in {len(sample.batches)} batches")
            result = judge_sample(request, checked, sample, runs)
            if result.decision != "undecided":
                break
            bigger = min(2 * n_groups, settings.max_sample_groups)
            grown = (SampleData.of(draw_sample(request.archive, settings, run_id=request.run_id, n_groups=bigger))
                     if bigger > n_groups else None)
            if grown is None or len(grown.rows) <= len(sample.rows):
                result = gate.insufficient(result)
                break
            request.progress(f"not enough evidence on {n_groups} groups ({'; '.join(result.undecided)}); "
                             f"drawing {bigger}")
            n_groups, sample = bigger, grown
        return GateVerdict(result, sample, runs, checked.cost, checked.probe.result())
