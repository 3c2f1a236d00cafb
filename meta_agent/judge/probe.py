"""The probe session: a candidate harness judged in a session shaped exactly like training.

A harness runs inside the runtime and can see how it is called, so a reward can behave
on archived rows and pay wrong answers only where it believes it is training.  The probe
takes that belief away: it opens the candidate's own harness session the way the local
backend's round does (one ``render`` of twice the round's prompts, then one ``score``
per optimizer step of ``prompts_per_step`` groups of ``group_size``), with trajectory ids,
group ids, run and next round numbers as training writes them, on fresh tasks drawn from
the candidate's own task mix with a seed keyed from the run's draw secret and a fresh nonce
(``probe_plan.probe_seed``; ``secrets`` alone without a run): no harness can know it, and it differs on every call.

About three quarters of the tasks are answered by an archived group of the latest round (math: re-targeted,
``judge/probe_archived``; code and SWE: the policy's answers around the fresh task's code,
``judge/probe_archived_code``); the others get constructed answers: right, formatted but wrong, right but
unformatted, and truncated (``finish_reason`` ``length``), worded like a policy's (``judge/probe_answers``:
math, code, SWE).  Each row carries the trusted verifier's record as a training row does
(``verifier_info``): the domain's verifier grades the answers before the harness scores them
(code runs in the domain's grader), except SWE patches, whose records are true by construction.
This module drives the sessions; what it sends is built by ``judge.probe_plan`` (the context, the seed, the
rows), and what they paid is judged by ``judge.probe_verdict``.  Checks (as gate checks, any failure rejects):

- ``probe_failure_pay`` and ``probe_execution`` (``judge.probe_verdict``): pay above ``unpaid(reward_range)`` for a
  verified failure; the session failing, or more unjudged trajectories than the gate allows;
- ``probe_render`` / ``probe_leak``: a prompt that fails to render over a fresh task, or shows
  the gold answer where the question alone does not (templates keyed on archived questions);
- ``probe_diagnostics`` (given ``open_main``; the backtest gives it to a branch whose diagnostics or GRPO knobs
  differ from main's, all a diagnose session sees: ``judge.diagnose_sessions.export_diagnostics``): the scored round
  diagnosed as its diagnose phase would (``judge.diagnose_sessions.diagnose_views``: candidate's rewards, ``keep`` true,
  one call in a session of its own, ``open_diagnose``'s) by the candidate and by ``main``; the candidate must lower
  none of main's findings and, when it changes diagnostics, add only what it predicted (``judge.findings``).
  Archived rounds are all earlier than the round a merge trains next: this one is that round.

The session is the whole round training would run (every step, every prompt, every group of ``harness.yaml``'s
knobs), never a part of it: a reward that counts the groups it has scored, or a diagnostic that reads
``harness.yaml`` and counts its rollouts, sees exactly what training shows it. Its cost grows with the round, a
small fraction of generating that round; each distinct constructed answer is graded once.

    report = run_probe(session_factory, domain, config, context=ProbeContext.of(sample_rows))
    extra_checks += report.checks

Answers are constructed for domains in ``ANSWER_MAKERS``; another domain gets one passed
check that says it was not probed.  A run whose latest round was collected in agent mode
(``--backend endpoint``: rows named ``train-agent-g<t>``) is probed the way that backend
trains: no render, agent episodes as ``swe_env.agent_loop`` archives them
(``AGENT_ANSWER_MAKERS``), one score request for the whole round.  A run whose latest round trained on
verl (archived ids as ``rl_backend.verl.ingest`` writes them) is scored in verl's two calls instead
(``judge.probe_verl``: the reward entry's, each trajectory alone, and the sampler's, whole groups), SWE
as verl's agent loop's episodes.
"""

from __future__ import annotations

import random
import secrets
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Callable

from meta_agent.diagnostic_checks import trusted_rates
from meta_agent.judge.diagnose_sessions import diagnose_views, export_diagnostics, session_life_s
from meta_agent.judge.findings import probe_diagnostics_check
from meta_agent.judge.probe_answers import AGENT_ANSWER_MAKERS, ANSWER_MAKERS
from meta_agent.judge.probe_main_pay import main_rewards
from meta_agent.judge.probe_plan import KINDS, ProbeContext, agent_rows, step_rows, with_archived
from meta_agent.judge.probe_rows import main_rendering, prompt_checks as _prompt_checks, verify as _verify
from meta_agent.judge.probe_sweep import MEMBER as SWEEP_MEMBER, sweep_groups, sweep_verdicts
from meta_agent.judge.probe_verdict import ProbeReport, failed, judge_scored, paid, unpaid
from meta_agent.judge.probe_verl import score_like_verl
from meta_agent.judge.reward_reading import Reading, read_commit, read_seed
from meta_agent.prompt_checks import template_item
from sandboxes.harness_client import HarnessFailed, HarnessSession, diagnose_memory_mb, trajectory_view

__all__ = ["KINDS", "ProbeContext", "ProbeReport", "probe_commit", "run_probe", "unpaid"]
"""``KINDS``, ``ProbeContext`` (``probe_plan``), ``ProbeReport`` and ``unpaid`` (``probe_verdict``) stay importable
here: callers and tests name the probe by this module."""


def run_probe(open_session: Callable[[], HarnessSession], domain, config, context: ProbeContext, *,
              max_error_rate: float = 0.01, seed: int | None = None,
              open_main: Callable[[list[dict]], HarnessSession] | None = None, predicted: list[str] = (),
              diagnostics_changed: bool = True,
              open_diagnose: Callable[[list[dict]], HarnessSession] | None = None,
              open_main_score: Callable[[], HarnessSession] | None = None,
              reading: tuple[Reading, Reading] = (Reading(), Reading())) -> ProbeReport:
    """Open a session with ``open_session()`` and drive it as a training round would; judge what it paid.

    ``config`` is the candidate's validated ``HarnessConfig`` (its task mix and GRPO knobs); ``seed``: the
    backtest's, keyed from the run's draw secret (``probe_plan.probe_seed``), or a test's; left out, it is drawn
    from ``secrets``.  ``open_main`` with ``open_diagnose`` (main's and
    the candidate's diagnose sessions, each opened for a call over the views it is given) adds the diagnostics
    ratchet on the probe's round, judged against ``predicted`` (the branch's Predicted-Effect lines; additions
    are judged only when ``diagnostics_changed``).  ``open_main_score`` (main's score session): a verified failure
    main pays at least as much is main's, not the candidate's (``probe_main_pay``).  ``reading``: what the
    candidate's code reads and what main's does (``reward_reading``): the SWE sweep wears the features only the
    candidate's names."""
    # a finished session's container is stopped and removed beside what follows (its CPU reading and removal
    # take a second or two on a loaded engine, and nothing of the harness runs in it any more)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="probe-close") as closer:
        judge = dict(open_main=open_main, predicted=predicted, diagnostics_changed=diagnostics_changed,
                     close=lambda session: closer.submit(session.close), open_diagnose=open_diagnose,
                     open_main_score=open_main_score)
        return _run(open_session, domain, config, context, max_error_rate, seed, judge, reading)


def _run(open_session, domain, config, context: ProbeContext, max_error_rate: float, seed: int | None,
         judge: dict, reading: tuple[Reading, Reading] = (Reading(), Reading())) -> ProbeReport:
    agent = context.agent or (context.verl and domain.name == "swe")  # SWE on verl is its agent loop
    make = (AGENT_ANSWER_MAKERS if agent else ANSWER_MAKERS).get(domain.name)
    if make is None:
        return ProbeReport([{"name": "probe", "passed": True,
                             "detail": f"no constructed answers for domain {domain.name!r}: not probed"}])
    seed = secrets.randbits(63) if seed is None else seed
    knobs = config.grpo
    if agent:
        report = ProbeReport([], seed)
        scored = _agent_round(open_session, make, domain, config, context, report)
        return _conclude(scored, open_session, domain, context, report, max_error_rate, **judge)
    # the whole round, never a part of it: a reward that counts its groups, or a diagnostic that reads
    # harness.yaml and counts its rollouts, would see a shorter round than training's and know it is probed
    steps = knobs.steps_per_round
    n_prompts = steps * knobs.prompts_per_step
    candidates = domain.tasks("train", config.tasks, 2 * n_prompts, seed)
    tasks = candidates[:n_prompts]
    rng = random.Random(seed)
    start = rng.randrange(len(KINDS))
    session = open_session()
    report = ProbeReport([], seed, len(tasks))
    # the answers depend on the tasks alone: they are made (code: graded in the domain's grader, a container
    # of its own) while the candidate's session starts and renders
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe-answers") as pool:
        pending = pool.submit(make, tasks, rng, knobs.max_completion_length, domain)
        try:
            session.start()
            rendered = session.render([template_item(t.question, t.template_vars()) for t in candidates])
            main_prompts = main_rendering(judge["open_main_score"], rendered, candidates, domain)
            report.checks += _prompt_checks(rendered, candidates, domain, main_prompts)
            if any(isinstance(r, str) for r in rendered[:len(tasks)]):
                return report
            answers = with_archived(pending.result(), tasks, context, domain, knobs.group_size, rng)
            per = knobs.prompts_per_step
            steps_rows = [step_rows(context, step, tasks[step * per:(step + 1) * per], rendered[step * per:],
                                     answers[step * per:(step + 1) * per], knobs, start) for step in range(steps)]
            verdicts = _verify([row for rows in steps_rows for row in rows], domain)
            scored = []
            # SWE: each mark worn by a wrong patch, one group a request (probe_sweep: set c's marks), the requests
            # in a drawn order among the steps' (a reward counting its requests by pid meets some variant early)
            sweep = sweep_groups(steps_rows, rng, *reading) if domain.name == "swe" and not context.verl else []
            sweep_verdicts(sweep, verdicts)
            requests = [*steps_rows, *sweep]
            if sweep:
                rng.shuffle(requests)
            for rows in requests if not context.verl else ():  # one score request per optimizer step
                results = session.score([trajectory_view(r) for r, _, _ in rows], reward_range=domain.reward_range,
                                        dynamic_sampling=knobs.dynamic_sampling, mask_truncated=knobs.mask_truncated)
                # of a sweep group only its variant is judged (its other members were judged in their own step)
                scored += [(row, kind, verdicts[row["traj_id"]], s) for (row, kind, _), s in zip(rows, results)
                           if kind != SWEEP_MEMBER]
        except HarnessFailed as exc:
            failed(report, exc)
            return report
        finally:
            judge["close"](session)
    if context.verl:  # verl's reward entry and sampler, each in a session of its own, after the controller rendered
        flat = [row for rows in steps_rows for row in rows]
        users = [rendered[step * knobs.prompts_per_step + group][-1]["content"]
                 for step, rows in enumerate(steps_rows) for group in range(len(rows) // knobs.group_size)
                 for _ in range(knobs.group_size)]
        verified = [verdicts[row["traj_id"]] for row, _, _ in flat]  # before the rows take verl's names
        try:
            results = score_like_verl(flat, users, open_session, domain, knobs)
        except HarnessFailed as exc:
            failed(report, exc)
            return report
        scored = [(row, kind, ok, s) for (row, kind, _), ok, s in zip(flat, verified, results)]
    return _conclude(scored, open_session, domain, context, report, max_error_rate, **judge)


def _conclude(scored: list | None, open_session, domain, context: ProbeContext, report: ProbeReport,
              max_error_rate: float, open_main, predicted, diagnostics_changed: bool, close,
              open_diagnose, open_main_score=None) -> ProbeReport:
    """Judge what the session paid and, given ``open_main``, the diagnostics ratchet on its round."""
    if scored is None:  # the session failed: its check says so
        return report
    main = None
    if open_main_score is not None and any(paid(s, domain) for _, _, verified, s in scored if not verified):
        main = main_rewards(open_main_score, [row for row, *_ in scored], domain)
    report.checks += judge_scored(scored, domain, report, max_error_rate, main)
    if open_main is not None:
        views = diagnose_views([dict(row, reward=s.reward) for row, _, _, s in scored])
        where = f"the probe's round {context.round} of {context.run_id}"
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="probe-diagnose") as pool:  # two container starts
            main, candidate = pool.map(lambda open_: _diagnose_alone(open_, views, close), (open_main, open_diagnose))
        report.checks.append(probe_diagnostics_check(where, main, candidate, list(predicted),
                                                     diagnostics_changed=diagnostics_changed,
                                                     bands=trusted_rates(views)))
    return report


def _diagnose_alone(open_session: Callable[[list[dict]], HarnessSession], views: list[dict], close) -> list[dict]:
    """One diagnose call in a fresh session opened for ``views``, as the diagnose phase makes it (a session that
    scored first would let a diagnostic learn, from what the same container saw, that it is probed)."""
    session = open_session(views)
    try:
        session.start()
        return session.diagnose(views)
    except HarnessFailed as exc:
        return [{"name": "diagnostics:failed", "severity": "error", "rate": 1.0, "example_ids": [],
                 "message": str(exc), "source": "sandbox"}]
    finally:
        close(session)


def _agent_round(open_session, make, domain, config, context: ProbeContext, report: ProbeReport) -> list | None:
    """An agent-mode round as ``--backend endpoint`` collects and scores it (``probe_plan.agent_rows``), one score
    request for the whole round.  None (and a failed ``probe_execution``) when the session fails."""
    knobs = config.grpo
    tasks, rows = agent_rows(make, domain, config, context, report.seed)
    report.tasks = len(tasks)
    verdicts = _verify(rows, domain)
    verified = [verdicts[row["traj_id"]] for row, _, _ in rows]  # before verl's names replace the ids
    try:
        if context.verl:  # verl's agent loop: its episodes reach the reward entry and the sampler
            results = score_like_verl(rows, [row["prompt"] for row, _, _ in rows], open_session, domain, knobs)
        else:
            results = _score_alone(open_session, [trajectory_view(r) for r, _, _ in rows], domain, knobs)
    except HarnessFailed as exc:
        failed(report, exc)
        return None
    return [(row, kind, ok, s) for (row, kind, _), ok, s in zip(rows, verified, results)]


def _score_alone(open_session, views: list[dict], domain, knobs) -> list:
    """One score request for the whole round, in a session of its own (``--backend endpoint``)."""
    session = open_session()
    try:
        session.start()
        return session.score(views, reward_range=domain.reward_range, dynamic_sampling=knobs.dynamic_sampling,
                             mask_truncated=knobs.mask_truncated)
    finally:
        session.close()


def probe_commit(repo, commit: str, sandbox, limits, request_timeout_s: float, domain, config, context: ProbeContext,
                 *, max_error_rate: float = 0.01, main_commit: str | None = None,
                 predicted: list[str] = (), diagnostics_changed: bool = True, seed: int | None = None,
                 pay_main_commit: str | None = None) -> ProbeReport:
    """:func:`run_probe` over the harness at ``commit`` of ``repo``, exported to a temporary folder;
    given ``main_commit``, with the diagnostics ratchet against main's diagnostics on the probe's round."""
    k = config.grpo  # a session's life covers every request one may send (diagnose_sessions.session_life_s): render
    # both halves, a score per step or the whole round at once, a diagnose of the round
    requests = [2 * k.steps_per_round * k.prompts_per_step, *[k.prompts_per_step * k.group_size] * k.steps_per_round,
                k.steps_per_round * k.prompts_per_step * k.group_size]
    limits = replace(limits, timeout_s=session_life_s(limits.timeout_s, requests))
    with tempfile.TemporaryDirectory(prefix="probe-") as tmp:
        def opener(at: str, name: str, export=repo.export) -> Callable[[], HarnessSession]:
            harness_dir = export(at, Path(tmp) / name)
            return lambda: HarnessSession(sandbox, harness_dir, limits=limits, request_timeout_s=request_timeout_s)

        def diagnostics(at: str, name: str) -> Callable[[list[dict]], HarnessSession]:  # what the diagnose phase
            harness_dir = export_diagnostics(repo, at, Path(tmp) / name)  # hands them, in a session sized alike
            return lambda views: HarnessSession(sandbox, harness_dir, limits=limits,
                                                request_timeout_s=request_timeout_s,
                                                diagnose_memory_mb=diagnose_memory_mb(views))

        return run_probe(opener(commit, "candidate"), domain, config, context, max_error_rate=max_error_rate, seed=seed,
                         open_main=diagnostics(main_commit, "main-diagnostics") if main_commit else None,
                         open_diagnose=diagnostics(commit, "candidate-diagnostics") if main_commit else None,
                         predicted=predicted, diagnostics_changed=diagnostics_changed,
                         open_main_score=opener(pay_main_commit, "main") if pay_main_commit else None,
                         reading=(read_commit(repo, commit), read_commit(repo, main_commit or pay_main_commit)
                                  if main_commit or pay_main_commit else read_seed(domain.name)))
