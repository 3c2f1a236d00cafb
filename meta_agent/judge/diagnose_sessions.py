"""Diagnose sessions: a commit's ``diagnostics/`` over given views, one call in a sandboxed session of its own.

Every diagnose runs here, the loop's diagnose phase as the backtest's, so a session's limits are one function
of its one call's size (``diagnose_memory_mb``), which harness code sees anyway.  A session holds only what a
finding may depend on (:func:`export_diagnostics`), so :func:`diagnose_key` says when two commits' diagnostics
must agree on identical outputs.  :func:`diagnose_views` is what a round's diagnose phase hands them (the loop,
the ratchet and the probe all build it here).  ``sandbox_limits`` sizes every harness session's life, this one's too.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import yaml
from pydantic import ValidationError

from harness_repo.contract import HarnessConfig
from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.judge.findings import normalise_findings
from sandboxes.base import Limits, Sandbox
from sandboxes.harness_client import (REQUEST_S_BASE, REQUEST_S_PER_ITEM, HarnessFailed, HarnessSession,
                                      diagnose_memory_mb, trajectory_view)


def sandbox_limits(settings: BacktestSettings, requests: list[int] = ()) -> Limits:
    """The sandbox of a session that serves ``requests`` (their sizes, in trajectories or prompts): its life
    is the start's ``settings.timeout_s`` plus what each request may take (:func:`session_life_s`)."""
    return Limits(timeout_s=session_life_s(settings.timeout_s, requests), memory_mb=settings.memory_mb,
                  cpus=settings.cpus, pids=settings.pids)


def session_life_s(timeout_s: float, requests: list[int]) -> float:
    """``timeout_s`` to start, plus each request's own deadline (``HarnessSession.request_deadline_s``, at most
    ``timeout_s``): a session that serves a large sample, or a loaded machine, is never cut short of the time
    its requests are allowed, so a slow machine is not a harness's failure (a flat life was: Deliver 6)."""
    return timeout_s + sum(min(timeout_s, REQUEST_S_BASE + REQUEST_S_PER_ITEM * n) for n in requests)


DIAGNOSTICS_DIR = "diagnostics"


def export_diagnostics(repo: HarnessRepo, commit: str, dest: Path) -> Path:
    """What a diagnose session of ``commit`` receives, written to ``dest`` (new): its ``diagnostics/`` and a
    ``harness.yaml`` holding only the validated ``domain`` and ``grpo`` knobs (a diagnostic may size what it
    counts by them).  Harness code cannot key a finding on a prompt, the reward, a filter, the task mix or
    the notes: it never sees them.  Raises HarnessError or ValueError for an invalid harness.yaml.

    Read from ``git archive``'s files, not ``repo.config``: this runs in the backtest's threads, and GitPython's
    object reader is not safe to share between threads (it hung)."""
    with tempfile.TemporaryDirectory(prefix="export-") as tmp:
        full = repo.export(commit, Path(tmp) / "harness")
        try:
            config = HarnessConfig.model_validate(yaml.safe_load((full / "harness.yaml").read_text()))
        except (OSError, yaml.YAMLError, ValidationError) as exc:
            raise ValueError(f"harness.yaml at {commit[:10]}: {exc}") from None
        dest.mkdir(parents=True)
        if (full / DIAGNOSTICS_DIR).is_dir():
            shutil.copytree(full / DIAGNOSTICS_DIR, dest / DIAGNOSTICS_DIR)
    knobs = {"domain": config.domain, "grpo": config.grpo.model_dump(mode="json")}
    (dest / "harness.yaml").write_text(yaml.safe_dump(knobs, sort_keys=True))
    return dest.resolve()


def diagnose_key(repo: HarnessRepo, commit: str) -> str:
    """A digest of everything :func:`export_diagnostics` hands a diagnose session of ``commit``: equal keys,
    equal findings on identical outputs (up to the diagnostics' own clock or randomness, which are main's)."""
    with tempfile.TemporaryDirectory(prefix="diagnose-key-") as tmp:
        root = export_diagnostics(repo, commit, Path(tmp) / "d")
        digest = hashlib.sha256()
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            rel = path.relative_to(root).as_posix().encode()
            digest.update(b"%d:%s%d:" % (len(rel), rel, path.stat().st_size) + path.read_bytes())
        return digest.hexdigest()[:32]


def run_diagnostics(repo: HarnessRepo, commit: str, views: list[dict], sandbox: Sandbox,
                    settings: BacktestSettings, cache_file: Path | None = None) -> list[dict]:
    """The diagnostics of ``commit`` over ``views`` (which carry ``reward`` and ``keep``), in their own sandbox
    that holds only :func:`export_diagnostics` of ``commit``; a failure is its finding (``_failed_finding``)."""
    if cache_file is not None and cache_file.exists():
        return json.loads(cache_file.read_text())
    findings, failure, _ = diagnose_session(repo, commit, views, sandbox, settings)
    if failure is not None:
        return [_failed_finding(failure)]
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(findings))
    return findings


def diagnose_views(rows: list[dict]) -> list[dict]:
    """What a round's diagnose phase hands the harness's diagnostics: the round's archived training rows,
    in archive order, with the archived reward and ``keep`` true.  The loop and the backtest build it here,
    so a diagnostic cannot tell the two apart by the call's fields, rows, groups or order."""
    return [trajectory_view(r) | {"reward": r["reward"], "keep": True} for r in rows]


def diagnose_session(repo: HarnessRepo, commit: str, views: list[dict], sandbox: Sandbox,
                     settings: BacktestSettings) -> tuple[list[dict], str | None, dict]:
    """One diagnose call over ``views`` in a session that holds only :func:`export_diagnostics` of ``commit``
    and is sized for the call (``diagnose_memory_mb``): (findings, failure, the session's sandbox summary).

    Every diagnose, the loop's diagnose phase as the backtest's, runs here, so its session's limits are one
    function of the one call's size, which harness code sees anyway: a limit tells nothing about the caller.
    """
    session, failure = open_diagnose_session(repo, commit, views, sandbox, settings)
    if session is None:
        return [], failure, {}
    return diagnose_call(session, views)


def open_diagnose_session(repo: HarnessRepo, commit: str, views: list[dict], sandbox: Sandbox,
                          settings: BacktestSettings) -> tuple[HarnessSession | None, str | None]:
    """A started session for one diagnose call over ``views`` (its size only: they need no rewards yet), or
    None and why it could not start."""
    with tempfile.TemporaryDirectory(prefix="diagnose-") as tmp:  # the files travel at start: gone after it
        try:
            root = export_diagnostics(repo, commit, Path(tmp) / "harness")
        except (HarnessError, ValueError) as exc:
            return None, f"invalid harness.yaml: {exc}"
        session = HarnessSession(sandbox, root, limits=sandbox_limits(settings, [len(views)]),
                                 request_timeout_s=settings.timeout_s, diagnose_memory_mb=diagnose_memory_mb(views))
        try:
            session.start()
        except HarnessFailed as exc:
            return None, str(exc)
    return session, None


def diagnose_call(session: HarnessSession, views: list[dict]) -> tuple[list[dict], str | None, dict]:
    """``session``'s one diagnose call over ``views``, then its close: (findings, failure, sandbox summary)."""
    findings, failure = [], None
    try:
        findings = normalise_findings(session.diagnose(views))  # once, on the trusted side (issue 45)
    except HarnessFailed as exc:
        failure = str(exc)
    finally:
        summary = session.close()
    return findings, failure, summary


def _failed_finding(message: str) -> dict:
    """The record of a diagnose session that failed: the sandbox's word (``findings.failed_in_sandbox``)."""
    return {"name": "diagnostics:failed", "severity": "error", "rate": 1.0, "example_ids": [], "message": message,
            "source": "sandbox"}
