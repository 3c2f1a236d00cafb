"""Named crash points for testing recovery: off unless a test turns them on.

Every step that writes durable state calls :func:`failpoint` right after the write.
A test names points in ``META_AGENT_FAILPOINTS`` and the process SIGKILLs itself
there -- no cleanup, no ``finally``, no flushed buffers, as a power cut or an OOM kill
would leave it (the idea of etcd's gofail, without code generation)::

    META_AGENT_FAILPOINTS=propose.branch_created python -m meta_agent --resume --run-dir runs/r
    META_AGENT_FAILPOINTS=promote.merged@2 ...     # on the second time the point is reached

A name that is not in :data:`POINTS` is refused, so a misspelt point cannot make a
crash test pass without crashing.  This module sits in the bottom layer so that the
harness repo, the archive and the controller can all place points.
"""

from __future__ import annotations

import os
import signal

ENV = "META_AGENT_FAILPOINTS"

POINTS = {
    "train.result_saved": "training finished and rounds/<n>/train/result.json written; state not yet saved",
    "budget.charged": "the round's compute charged to the budget in memory; state not yet saved",
    "archive.part_written": "an archive part made visible (a training round's rows: before its result.json); "
                            "state not yet saved",
    "diagnose.findings_written": "rounds/<n>/findings.json written; state not yet saved",
    "tripwire.reverted": "a tripwire revert committed on main; the miss not yet recorded",
    "live_check.reverted": "a refuted merge reverted on main; the miss not yet recorded",
    "skill.recorded": "a skill written to the library; not yet committed to the harness repo",
    "main.files_written": "bookkeeping files written into main's working tree; not yet committed",
    "digest.written": "rounds/<n>/digest.json written; state not yet saved",
    "propose.branch_created": "an intervention branch and its worktree created; nothing committed on it",
    "propose.committed": "an intervention commit written; its worktree not yet removed",
    "propose.proposals_written": "rounds/<n>/proposals.json written; state not yet saved",
    "backtest.report_written": "a backtest report written; the branch neither merged nor tagged",
    "promote.merged": "a branch merged into main with its evidence; state not yet saved",
    "promote.tagged": "a rejected branch tagged with its verdict; state not yet saved",
    "state.saved": "state.json replaced (any phase)",
    "rescore.part_scored": "one archive part re-scored in its worker (rescore); its results not yet written",
    "backtest.shard_scored": "one part's batches scored in its worker (a sharded backtest); nothing returned yet",
}
"""Every point placed in the code, with what has been written when it fires."""


def _armed() -> dict[str, int]:
    """``{point: hit that kills}`` from the environment; ValueError naming an unknown point."""
    armed: dict[str, int] = {}
    for item in filter(None, (s.strip() for s in os.environ.get(ENV, "").split(","))):
        name, _, nth = item.partition("@")
        if name not in POINTS:
            raise ValueError(f"{ENV}: unknown failpoint {name!r}; known: {', '.join(POINTS)}")
        armed[name] = int(nth or 1)
    return armed


_hits: dict[str, int] = {}


def failpoint(name: str) -> None:
    """SIGKILL this process if ``name`` is armed and reached for the armed time; otherwise nothing."""
    if name not in POINTS:
        raise ValueError(f"failpoint {name!r} is not declared in harness_repo.failpoints.POINTS")
    if ENV not in os.environ:
        return
    nth = _armed().get(name)
    if nth is None:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] == nth:
        os.kill(os.getpid(), signal.SIGKILL)
