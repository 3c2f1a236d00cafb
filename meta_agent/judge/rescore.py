"""``rescore``: re-judge the whole archive with main's current harness and the trusted verifier.

    python -m meta_agent rescore --run-dir R                      # here, one part after another
    python -m meta_agent rescore --run-dir R --workers 2          # a local Ray, 2 workers
    python -m meta_agent rescore --run-dir R --ray-address auto --workers 16   # a Ray cluster
    python -m meta_agent rescore --run-dir R --skip-bad-parts     # judge without unreadable parts (counted)
    python -m meta_agent rescore --run-dir R --revert             # then revert the merges it re-judges

Every archive part is one shard (``meta_agent.judge.shards``) re-scored on its own
(``meta_agent.judge.rescore_parts``); each merge still on main is then judged again by the rule of
``meta_agent.judge.rejudge``.  The results go beside the archive, which is only read::

    R/rescore/<main commit, 12>/summary.json                  judge, counts, per-round figures, the merges' verdicts
    R/rescore/<main commit, 12>/parts/<part path>             per trajectory: reward and verified, then and now

They are built in a staging folder and renamed into place when every shard has finished: a
command that fails (a worker dying twice, a bad part without ``--skip-bad-parts``) leaves no
half result, and one re-run for the same main replaces the folder whole.  The run lock is held
throughout, so a run another controller holds is refused.  The loop calls :func:`rescore_if_judge_changed`
after its backtests: a merge that changed ``diagnostics/``, or a new verifier version of the domain,
re-scores the archive (listing, never reverting: reverts are a person's ``--revert``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import shutil
import sys
import time
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Callable

from domains.base import Domain
from harness_repo.gitcmd import git_try
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.errors import UserError
from meta_agent.judge.rejudge import RoundScore, error_names, judge_merges, revert_rejudged
from meta_agent.judge.rescore_parts import PartJob, score_part
from meta_agent.judge.shards import run_shards
from meta_agent.names import get_domain
from meta_agent.run_dir import RunDir, write_json_atomic

JUDGE_FILE = "judge.json"
"""``R/rescore/judge.json``: the diagnostics tree and verifier version the archive was last re-scored with."""


class BadParts(UserError):
    """Archive parts that cannot be read; the message names each and how to go on."""


def verifier_version(domain: Domain) -> str:
    """The domain's ``verifier_version`` when it declares one, else a hash of the source of its verifier's modules."""
    declared = getattr(domain, "verifier_version", None)
    if isinstance(declared, str) and declared:
        return declared
    modules = {type(domain).__module__, getattr(type(domain).verify, "__module__", "")}
    digest = hashlib.sha256()
    for name in sorted(m for m in modules if m in sys.modules):
        digest.update(inspect.getsource(sys.modules[name]).encode())
    return "source-" + digest.hexdigest()[:12]


def judge_of(repo: HarnessRepo, domain: Domain) -> dict:
    """What judges the archive now: main's commit, its diagnostics tree, the verifier version."""
    main = repo.head("main")
    status, out, _ = git_try(repo.path, "rev-parse", "--verify", "-q", f"{main}:diagnostics")
    diagnostics = out.strip() if status == 0 else None  # a harness without diagnostics/: None
    return {"main": main, "diagnostics": diagnostics, "verifier": verifier_version(domain)}


def archive_parts(archive: Path) -> list[str]:
    """Every part file of the archive, as its path inside the archive, sorted."""
    return sorted(str(p.relative_to(archive)) for p in archive.glob("run_id=*/round=*/part-*.parquet"))


def rescore_run(rd: RunDir, *, workers: int = 1, ray_address: str | None = None, skip_bad_parts: bool = False,
                revert: bool = False, progress: Callable[[str], None] = lambda s: None,
                hold_lock: bool = True) -> dict:
    """Re-score every archived part, judge every merge again; the summary (also in ``summary.json``).

    ``hold_lock=False`` only for a caller that holds the run lock already (the loop).
    """
    rd.require()
    with rd.lock() if hold_lock else nullcontext():
        repo = HarnessRepo.open(rd.harness)
        config = rd.config()
        domain = get_domain(repo.config("main").domain)
        judge = judge_of(repo, domain)
        parts = archive_parts(rd.archive)
        if not parts:
            raise UserError(f"{rd.archive} holds no archive parts to re-score; train a round first")
        root = rd.path / "rescore"
        out = root / judge["main"][:12]
        staging = root / f".{judge['main'][:12]}.staging-{os.getpid()}"
        for stale in root.glob(".*.staging-*"):  # a killed rescore's: the run lock says no one else writes here
            shutil.rmtree(stale, ignore_errors=True)
        jobs = [PartJob(shard=p, archive=str(rd.archive), harness=str(rd.harness), commit=judge["main"],
                        domain=domain.name, settings=_settings(rd).model_dump(), staging=str(staging),
                        cache=str(root / "cache")) for p in parts]
        try:
            results = run_shards(jobs, score_part, workers=workers, ray_address=ray_address, progress=progress)
            bad = [r for r in results if r["bad"]]
            if bad and not skip_bad_parts:
                raise BadParts(f"{len(bad)} archive part(s) cannot be read:\n  " + "\n  ".join(r["bad"] for r in bad)
                               + "\nrestore each from a backup (parts are written once and never change), or move "
                               "it out of the archive (its rows are then lost to the run); or judge without them "
                               "with --skip-bad-parts (they are counted in the summary)")
            run_id = config.get("run_id") or rd.path.name
            rounds = _rounds(rd, run_id, results)
            verdicts = judge_merges(repo, rounds)
            summary = {"judge": judge, "time": time.time(), "run_id": run_id, "parts": len(parts),
                       "rows": sum(r["rows"] for r in results), "bad_parts": [r["bad"] for r in bad],
                       "failures": {r["shard"]: r["failure"] for r in results if r["failure"]},
                       "rounds": {str(n): _round_dict(s) for n, s in sorted(rounds.items())},
                       "shards": results, "merges": verdicts, "reverted": []}
            write_json_atomic(staging / "summary.json", summary)
            _swap(staging, out)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        write_json_atomic(root / JUDGE_FILE, {k: judge[k] for k in ("diagnostics", "verifier", "main")})
        if revert:
            summary["reverted"] = revert_rejudged(repo, verdicts, f"rescore at main {judge['main'][:12]}", progress)
            write_json_atomic(out / "summary.json", summary)
        return summary | {"out": str(out)}


def _settings(rd: RunDir) -> BacktestSettings:
    from meta_agent.run_config import RunConfigError, load_run_config

    try:
        return load_run_config(rd.run_json).backtest
    except RunConfigError:  # a run.json without settings (demo, bench): the defaults
        return BacktestSettings()


def _rounds(rd: RunDir, run_id: str, results: list[dict]) -> dict[int, RoundScore]:
    """Per round of ``run_id``: its parts' results pooled, and the error findings recorded at the time."""
    rounds: dict[int, RoundScore] = {}
    for r in results:
        if r["run_id"] != run_id:
            continue
        score = rounds.setdefault(r["round"], RoundScore(r["round"]))
        if r["bad"]:
            score.problems.append(f"part {r['shard']} was skipped as unreadable")
            continue
        if r["failure"]:
            score.problems.append(f"main's harness failed on part {r['shard']}: {r['failure'][:300]}")
        score.rows += r["rows"]
        score.harness_commit = score.harness_commit or r["harness_commit"]
        score.errors |= error_names(r["findings"])
        score.known += r["verifier"].get("known", 0)
        score.paid_failures_now += r["verifier"].get("paid_failures_now", 0)
    for n, score in rounds.items():
        recorded = rd.round_dir(n) / "findings.json"
        if recorded.exists():
            score.recorded_errors = error_names(json.loads(recorded.read_text()))
    return rounds


def _round_dict(score: RoundScore) -> dict:
    data = asdict(score)
    data["errors"], data["recorded_errors"] = sorted(score.errors), sorted(score.recorded_errors)
    return data


def _swap(staging: Path, out: Path) -> None:
    """Put ``staging`` where ``out`` is, replacing an older result for the same main whole."""
    old = out.with_name(f".{out.name}.old-{os.getpid()}")
    if out.exists():
        out.rename(old)
    staging.rename(out)
    shutil.rmtree(old, ignore_errors=True)


def latest_summary(run_dir: Path) -> dict | None:
    """The newest ``R/rescore/*/summary.json`` (None when the archive was never re-scored)."""
    found = []
    for path in Path(run_dir).glob("rescore/*/summary.json"):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return max(found, key=lambda s: s.get("time", 0), default=None)


def rescore_if_judge_changed(rd: RunDir, repo: HarnessRepo, domain: Domain, merged: list[str],
                             message: Callable[[str], None] = lambda s: None) -> dict | None:
    """The loop's hook after a round's backtests (the caller holds the run lock): re-score the archive when a
    branch merged this round changed ``diagnostics/`` or the verifier version differs from the last re-scoring.
    The first call records the verifier version it finds, as the baseline."""
    judge_file = rd.path / "rescore" / JUDGE_FILE
    last = json.loads(judge_file.read_text()) if judge_file.exists() else None
    why = [f"{b} changed the diagnostics" for b in merged if any(
        p.startswith("diagnostics/") for p in repo.changed_paths(b, base=f"{repo.intervention(b).merge_commit}^1"))]
    version = verifier_version(domain)
    if last is None:
        write_json_atomic(judge_file, {"diagnostics": None, "verifier": version, "main": None})
    elif last.get("verifier") != version:
        why.append(f"the verifier changed ({last.get('verifier')} -> {version})")
    if not why:
        return None
    message(f"re-scoring the archive: {'; '.join(why)}")
    try:
        summary = rescore_run(rd, hold_lock=False, progress=message)
    except UserError as exc:  # the round's work is done: a failed re-scoring is reported, never fatal to it
        message(f"rescore after the merges failed: {exc}; run `python -m meta_agent rescore --run-dir {rd.path}`")
        return None
    for v in summary["merges"]:
        if v["status"] in ("rejudged", "unjudged"):
            message(f"rescore: {v['branch']} {v['status']}: {'; '.join(v['reasons'])}")
    return summary
