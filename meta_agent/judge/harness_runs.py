"""What a backtest runs before it judges: each harness commit's sandboxed run over the drawn sample.

The sample itself (``SampleData``, ``draw_sample``) is ``judge.sample``'s, re-exported here.  ``run_harness``
scores it (batch by batch, as training did), renders its tasks and diagnoses it with one commit in its own
sandboxed runtime (``sandboxes.harness_client.HarnessSession``), cached by
the commit's tree, the sample and the runtime; ``run_diagnostics`` and ``run_ratchet`` run a
commit's diagnostics over given outputs.  Nothing here judges: ``judge.decision`` does.

Diagnostics see how they are called, so every diagnose call whose findings are compared
between ``main`` and a candidate (the ratchet) is shaped exactly as a round's diagnose phase
calls it: ``diagnose_views`` (which the loop's diagnose phase also uses) over one whole archived
round, one call in a session of its own (``diagnose_rounds``).  The sample-shaped diagnose of
``run_harness`` only ever adds evidence against the candidate (its new error findings).

Every diagnose session gets only what a finding may depend on (``export_diagnostics``): the commit's
``diagnostics/`` and a ``harness.yaml`` the host writes from its validated domain and GRPO knobs; never
its prompts, reward, filters, task mix or notes.  So a branch whose :func:`diagnose_key` equals main's
cannot change one of main's findings on identical outputs, and needs no findings ratchet.

``meta_agent.backtest`` re-exports the names other modules use, so ``from meta_agent.backtest import ...`` works.
"""

from __future__ import annotations

import hashlib
import json
import operator
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.diagnostic_checks import round_bands
from meta_agent.judge.diagnose_sessions import (diagnose_call, diagnose_key, diagnose_views, open_diagnose_session,
                                                run_diagnostics, sandbox_limits)
from meta_agent.judge.findings import normalise_findings
from meta_agent.judge.sample import BacktestError, SampleData, draw_sample  # noqa: F401  (re-exported)
from rl_backend.archive import Archive
from sandboxes.base import Sandbox
from sandboxes.harness_client import REQUEST_VIEWS, RUNTIME_ID, HarnessFailed, HarnessSession
from sandboxes.harness_wire import collector_paused


@dataclass
class HarnessRun:
    """What one harness commit produced over one sample (never a judgement)."""

    commit: str
    results: dict[str, dict]
    findings: list[dict]
    failure: str | None
    prompts: list = field(default_factory=list)
    """Per render item: chat messages, or the rendering error as text."""
    sandbox: dict = field(default_factory=dict)
    cached: bool = False


def score_requests(batches: list[int]) -> list[int]:
    """The sizes of the score requests ``HarnessSession.score_batches`` sends for batches of these sizes."""
    sizes: list[int] = []
    for n in batches:
        if sizes and sizes[-1] + n <= REQUEST_VIEWS:
            sizes[-1] += n
        else:
            sizes.append(n)
    return sizes


@collector_paused()
def run_harness(repo: HarnessRepo, commit: str, sample: SampleData, sandbox: Sandbox, cache_root: Path,
                settings: BacktestSettings, reward_range: tuple[float, float], fresh: bool = False) -> HarnessRun:
    """Score (batch by batch), filter, render and diagnose ``sample`` with the harness at ``commit``, sandboxed.

    The render and the diagnose need only the scores, so they run side by side in the two sessions, and the
    cache's results are encoded meanwhile.

    ``fresh`` ignores a cached run (and replaces it): what a harness does can depend on the clock, which
    no cache key covers, so a backtest that may merge runs its candidate now.  The host's side builds plain
    data in bulk (a result per trajectory, the views again for the diagnose, the cache file) and runs no
    harness code, so the cyclic collector is paused for the run: at 250,000 trajectories its full passes over
    the controller's rows took 2-3 s of the run's critical path.
    """
    cache, done, knobs = start_run(repo, commit, sample, cache_root, fresh)
    if done is not None:
        return done
    results: dict[str, dict] = {}
    findings: list[dict] = []
    failure = None
    with tempfile.TemporaryDirectory(prefix="backtest-") as tmp, ThreadPoolExecutor(3) as side:
        # the diagnose session's container starts beside the scoring one (``open_diagnose_session``)
        early = side.submit(open_diagnose_session, repo, commit, sample.views, sandbox, settings)
        requests = [len(sample.render_items)] * bool(sample.render_items)
        requests += score_requests([len(b) for b in sample.batches])
        session = HarnessSession(sandbox, repo.export(commit, Path(tmp) / "harness"),
                                 limits=sandbox_limits(settings, requests), request_timeout_s=settings.timeout_s)
        diagnosing = SampleDiagnose(early, sample, results)
        try:
            session.start()
            # the batches training scored, many per request (the runtime shows harness code one group at a time);
            # each request's views go on to the diagnose session as soon as the sample's order allows
            with closing(session.scored_requests([[sample.views[i] for i in batch] for batch in sample.batches],
                                                 reward_range=reward_range, dynamic_sampling=knobs.dynamic_sampling,
                                                 mask_truncated=knobs.mask_truncated)) as scored_requests:
                for scored in scored_requests:
                    for s in scored:
                        results[s.traj_id] = {"reward": s.reward, "keep": s.keep, "error": s.error,
                                              "reward_info": s.reward_info, "invalid_reward": s.invalid_reward}
                    diagnosing.scored()
        except HarnessFailed as exc:
            failure = str(exc)
        except BaseException:  # not the harness's (the engine, a kill): both sessions go
            side.submit(_close_opened, early)
            side.submit(session.close)
            raise
        # Then the scoring session renders the sample's tasks, beside the diagnose, and stops.  Nothing of the
        # harness's Python runs in its render process (templates see only their variables), and verl's reward
        # workers render nothing at all, so harness code sees a session like training's either way.
        rendered = side.submit(render_and_close, session, sample.render_items, results if failure is None else None)
        diagnosed = []
        if failure is None:
            findings, failure, summary = diagnosing.findings()
            diagnosed.append(summary)
        else:
            _close_opened(early)
        prompts, render_failure, closed, encoded = rendered.result()
        failure = failure or render_failure
        summaries = [closed, *diagnosed]
    run = HarnessRun(commit, results if not failure else {}, findings, failure, prompts, merge_summaries(summaries))
    if failure is None:  # a failure may be transient or time-dependent: never cached
        write_cache(cache, run, encoded)
    return run


class SampleDiagnose:
    """A harness run's diagnose over its whole sample with its own rewards and masks, in the session
    :func:`open_diagnose_session` started for it (``opening``), fed while the sample is scored: each time scores
    come in (``scored``), the views of the longest prefix of the sample that is scored go on to that session
    (``HarnessSession.diagnose_stream``: the views the diagnostics get, in the sample's order, do not depend on
    when they went).  ``findings``: (findings, failure, sandbox summary), as :func:`diagnose_sample` gives.

    That session starts while the sample is scored, so its age at the call tells its diagnostics they serve a
    backtest (see :func:`diagnose_sample`); when its views arrived, they cannot see (``sandboxes.harness_runtime``).
    """

    def __init__(self, opening: Future, sample: SampleData, results: dict[str, dict]) -> None:
        self.opening, self.sample, self.results = opening, sample, results
        self.stream = None
        self.done = 0  # the sample's views sent so far: its first ``done``
        self.failure: str | None = None

    def scored(self) -> None:
        """Send on the views of the sample's prefix whose scores are in ``results`` now."""
        views, results, start = self.sample.views, self.results, self.done
        while self.done < len(views) and views[self.done]["traj_id"] in results:
            self.done += 1
        if self.done > start and self._open():
            part = views[start:self.done]
            entries = list(map(results.__getitem__, map(operator.itemgetter("traj_id"), part)))
            try:  # each view with its ``reward`` and ``keep`` (``annotated_views``), as columns
                self.stream.add(part, {k: list(map(operator.itemgetter(k), entries)) for k in ("reward", "keep")})
            except HarnessFailed as exc:
                self.failure = str(exc)

    def _open(self) -> bool:
        """Whether the call is open (its session started, nothing failed), opening it first if need be."""
        if self.stream is None and self.failure is None:
            session, self.failure = self.opening.result()
            if session is not None:
                self.stream = session.diagnose_stream(self.sample.views)
        return self.failure is None

    def findings(self) -> tuple[list[dict], str | None, dict]:
        self.scored()
        if not self._open():
            session, _ = self.opening.result()
            return [], self.failure, session.close() if session is not None else {}
        findings, failure = [], None
        try:  # as ``diagnose_call``, with the call's views sent already
            findings = normalise_findings(self.stream.findings())
        except HarnessFailed as exc:
            failure = str(exc)
        finally:
            summary = self.stream.session.close()
        return [f | {"source": "candidate"} for f in findings], failure, summary


def render_and_close(session: HarnessSession, items: list[dict],
                     results: dict[str, dict] | None) -> tuple[list, str | None, dict, dict[str, str] | None]:
    """After a scoring that went well (``results``; None after a failure: nothing more is asked), ``items``
    rendered in ``session`` and the results encoded for the cache, while the diagnose runs (a JSON encoder holds
    the interpreter: it would slow the diagnose's own encoding if it ran beside it); then the session stops.
    (prompts, the harness's failure, the sandbox summary, the JSON of the results and the prompts, or None)."""
    if results is None:
        return [], None, session.close(), None
    try:
        prompts = session.render(items) if items else []
    except HarnessFailed as exc:
        return [], str(exc), session.close(), None
    except BaseException:
        session.close()
        raise
    summary = session.close()
    return prompts, None, summary, {"results": json.dumps(results), "prompts": json.dumps(prompts)}


def _close_opened(opening: Future) -> None:
    """Close the session ``open_diagnose_session`` started in ``opening``, if it started."""
    session, _ = opening.result()
    if session is not None:
        session.close()


def merge_summaries(summaries: list[dict]) -> dict:
    """One arm's sandbox summary over its sessions: CPU summed (unknown if any is), the worst of the rest, so
    the gate's CPU check (``meta_agent.judge.cpu_cost``) compares a sharded candidate with a sharded main."""
    cpu = [s.get("cpu_s") for s in summaries]
    pids = [s["pids_at_close"] for s in summaries if isinstance(s.get("pids_at_close"), int)]
    peaks = [s["peak_memory_mb"] for s in summaries if isinstance(s.get("peak_memory_mb"), (int, float))]
    codes = [s.get("exit_code") for s in summaries]
    return {"sessions": len(summaries),
            "exit_code": next((c for c in codes if c not in (0, None)), codes[-1] if codes else None),
            "duration_s": round(sum(s.get("duration_s") or 0.0 for s in summaries), 3),
            "timed_out": any(s.get("timed_out") for s in summaries),
            "oom_killed": any(s.get("oom_killed") for s in summaries),
            "output_exceeded": any(s.get("output_exceeded") for s in summaries),
            "peak_memory_mb": max(peaks, default=None),
            "session_peaks_mb": [s.get("peak_memory_mb") for s in summaries],
            "cpu_s": round(sum(cpu), 3) if cpu and all(isinstance(c, (int, float)) for c in cpu) else None,
            "pids_at_close": max(pids, default=None),
            "stderr_tail": "".join(s.get("stderr_tail") or "" for s in summaries)[-2000:]}


def round_views(archive: Archive, run_id: str, round: int) -> list[dict]:
    """:func:`diagnose_views` over one archived round, read as the loop's diagnose phase reads it."""
    return diagnose_views(archive.rows(run_id=run_id, round=round, split="train"))


RATCHET_ROUNDS = 2
"""Archived rounds the ratchet replays whole (the sample's latest): one diagnose session per round and arm."""


def ratchet_rounds(sample: SampleData) -> list[tuple[str, int]]:
    """The (run, round)s the ratchet replays: the sample's latest :data:`RATCHET_ROUNDS`, newest first."""
    keys = sorted({(int(r["round"]), r["run_id"]) for r in sample.rows}, reverse=True)[:RATCHET_ROUNDS]
    return [(run_id, n) for n, run_id in keys]


def diagnose_rounds(repo: HarnessRepo, main_commit: str, cand_commit: str, archive: Archive,
                    rounds: list[tuple[str, int]], sandbox: Sandbox, settings: BacktestSettings, cache_root: Path,
                    fresh: bool = False) -> list[tuple[str, list[dict], list[dict]]]:
    """Per archived round: (label, main's findings, the candidate's findings) over identical outputs.

    Each is one diagnose call over :func:`round_views`, in a session of its own, exactly as the diagnose
    phase of that round called it; main's are cached by its tree and the round's content, the
    candidate's too unless ``fresh``.
    """
    jobs = []
    keys = {commit: diagnose_key(repo, commit) for commit in (main_commit, cand_commit)}
    for run_id, n in rounds:
        views = round_views(archive, run_id, n)
        key = hashlib.sha256(json.dumps(views, sort_keys=True, default=str).encode()).hexdigest()[:16]
        for commit, cached in ((main_commit, True), (cand_commit, not fresh)):
            cache = cache_root / f"round-{keys[commit][:16]}-{key}-{RUNTIME_ID}.json" if cached else None
            jobs.append((commit, views, cache))
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="diagnose-round") as pool:  # container starts overlap
        findings = list(pool.map(lambda job: run_diagnostics(repo, job[0], job[1], sandbox, settings, job[2]), jobs))
    return [(f"round {n} of {run_id}", findings[2 * i], findings[2 * i + 1],
             round_bands(archive.rows(run_id=run_id, round=n, split="train"))) for i, (run_id, n) in enumerate(rounds)]


def diagnose_sample(session: HarnessSession | None, failure: str | None, sample: SampleData,
                    results: dict[str, dict]) -> tuple[list[dict], str | None, dict]:
    """A harness run's diagnose over its whole sample with its own rewards and masks, in the session
    :func:`open_diagnose_session` started for it (or its failure to start): (findings, failure, sandbox summary).

    That session starts while the sample is scored, so its age at the call tells its diagnostics they serve a
    backtest.  Harmless: this diagnose only ever adds evidence against the candidate (module docstring), its
    new error findings, which its own diagnostics could withhold anyway.  Errors that main's diagnostics raised
    only here would hide a candidate's, but a diagnostic cannot tell main's run from a candidate's, so it
    raised them as a candidate too, as new errors, and was rejected.  Every diagnose whose findings are
    compared (the ratchet's, the loop's) starts with its call.
    """
    if session is None:
        return [], failure, {}
    findings, failure, summary = diagnose_call(session, annotated_views(sample.views, results))
    return [f | {"source": "candidate"} for f in findings], failure, summary


def annotated_views(views: list[dict], results: dict[str, dict]) -> list[dict]:
    """The views (a sample's) with the ``reward`` and ``keep`` a harness run gave each: what its diagnostics see."""
    return [v | {"reward": results[v["traj_id"]]["reward"], "keep": results[v["traj_id"]]["keep"]} for v in views]


def run_ratchet(repo: HarnessRepo, main_commit: str, candidate: HarnessRun, sample: SampleData, sandbox: Sandbox,
                cache_root: Path, settings: BacktestSettings) -> list[dict]:
    """Main's diagnostics over the candidate's rewards and masks: a deleted diagnostic still runs."""
    annotated = annotated_views(sample.views, candidate.results)
    cache = cache_root / (f"ratchet-{diagnose_key(repo, main_commit)[:16]}-{repo.tree(candidate.commit)[:16]}-"
                          f"{sample.key}-{RUNTIME_ID}.json")
    findings = run_diagnostics(repo, main_commit, annotated, sandbox, settings, cache)
    return [f | {"source": "ratchet"} for f in findings]


def start_run(repo: HarnessRepo, commit: str, sample: SampleData, cache_root: Path,
              fresh: bool) -> tuple[Path, HarnessRun | None, Any]:
    """A harness run's cache file, and either the run that needs no sandbox (a cached one unless ``fresh``, or the
    failure of an invalid ``harness.yaml``) or, to run it, the commit's GRPO knobs."""
    cache = cache_root / f"{repo.tree(commit)[:16]}-{sample.key}-{RUNTIME_ID}.json"
    if cache.exists() and not fresh:
        return cache, HarnessRun(**json.loads(cache.read_text()) | {"cached": True}), None
    try:
        return cache, None, repo.config(commit).grpo
    except (HarnessError, ValueError) as exc:
        return cache, HarnessRun(commit, {}, [], f"invalid harness.yaml: {exc}"), None


def write_cache(path: Path, run: HarnessRun, encoded: dict[str, str] | None = None) -> None:
    """Save ``run`` at ``path`` whole or not at all (written beside it, then renamed).  ``encoded``: the JSON of
    some of its fields, made already (``run_harness`` encodes the results and prompts while the diagnose runs)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    encoded = encoded or {}
    # the fields as they are (json.dumps walks them once); asdict deep-copied every result first, which cost
    # more than the sandboxed run's scoring at 10,000 trajectories
    parts = [f"{json.dumps(f.name)}: {encoded.get(f.name) or json.dumps(getattr(run, f.name))}"
             for f in fields(run) if f.name != "cached"]
    tmp.write_text("{" + ", ".join(parts) + "}")
    tmp.replace(path)
