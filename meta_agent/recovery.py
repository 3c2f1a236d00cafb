"""What a resumed controller finds of the work a killed one left half done, and how it is settled.

The loop saves ``state.json`` after each phase, and every write inside a phase is either
idempotent or found here before the phase is re-entered.  Each finding is one line of
output, so a user sees what the crash left and what was done about it::

    lines = recover(run, repo, archive, run_id, state)   # before the loop re-enters state["phase"]

- candidates: a branch of the round whose head is not a proposal commit (a stopped agent's
  preview commit or uncommitted edits) is parked as a draft, before worktrees are cleaned --
  see ``meta_agent.run.unfinished``;
- git: a killed git command's ``index.lock``, a half-done merge or revert, bookkeeping files
  written into main but not committed, worktrees and empty intervention branches of the round
  (a branch created but killed before its commit) -- see ``HarnessRepo.clean_interrupted``;
- files: temporary files of atomic writes that never reached their rename;
- train: the order is (1) the backend commits the round's archive part, (2) the loop writes
  ``rounds/<n>/train/result.json``, (3) the state moves on.  A kill during training leaves at most
  an uncommitted ``.part-*.parquet.tmp`` (removed with the other temporaries).  A kill between (1)
  and (2) leaves a visible part but no result: the part is removed and the round trains again
  (the metrics and evaluation died with the process, and a retrain replaces the policy it wrote, so
  a reused part would describe rows no saved result accounts for).  A result saved before the
  state moved on is reused, never trained again;
- archive, run folders from before the rows streamed (result.json holds ``rollouts`` and
  ``heldout``): a part written before the state moved on is not written again (rows are
  idempotent); a state past the archive phase whose rows are missing gets them back from
  result.json.

Merges, verdict tags, skills and live checks need no step here: the backtest phase skips
branches already merged or tagged, skills count a merge once, and live checks recognise a
revert they committed before the kill (``meta_agent.live_check``).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness_repo.repo import HarnessRepo
from meta_agent.run.unfinished import park_unfinished
from meta_agent.run_dir import RunDir
from rl_backend.archive import Archive
from rl_backend.archive_ledger import verify_run
from rl_backend.archive_records import forget_part

_PAST_ARCHIVE = ("diagnose", "digest", "propose", "backtest", "done")


def _stale_temporaries(run: RunDir) -> list[Path]:
    """Temporary files of write-then-rename writes (state, results, archive parts) a kill left behind."""
    found = list(run.path.glob(".*.tmp"))
    for folder in (run.round_dir(0).parent, run.archive):
        if folder.is_dir():
            found += [p for p in folder.rglob(".*.tmp") if p.is_file()]
    return sorted(found)


def recover(run: RunDir, repo: HarnessRepo, archive: Archive, run_id: str, state: dict) -> list[str]:
    """Settle what a killed controller left in round ``state["round"]``; one line per finding."""
    n, phase = state["round"], state["phase"]
    lines = verify_run(archive, run_id)  # before anything trains: a damaged part stops here, named
    lines += [f"{p.relative_to(run.path)}: removed a temporary file of a write that never finished"
              for p in _stale_temporaries(run)]
    for path in _stale_temporaries(run):
        path.unlink()
    if phase == "propose" and not (run.round_dir(n) / "proposals.json").exists():
        # before the worktrees are cleaned: a stopped agent's uncommitted edits live only there
        rdir = run.round_dir(n)
        lines += [f"round {n}: {branch} was stopped before its proposal commit; its work is kept under "
                  f"refs/agent-drafts/ and the round asks for the full number of candidates"
                  for branch in park_unfinished(repo, n, transcripts=rdir / "agent", only_with_work=True)]
    lines += repo.clean_interrupted(run.path / "worktrees", n)
    result_path = run.round_dir(n) / "train" / "result.json"
    if not result_path.exists():
        if phase == "train" and (run.round_dir(n) / "train").is_dir():
            lines += _drop_unaccounted_parts(run, archive, run_id, n)
            lines.append(f"round {n}: training was interrupted before it finished; it starts again")
        return lines
    if phase == "train":
        lines.append(f"round {n}: training had finished before the stop; its saved result is used, "
                     "not trained again")
        return lines
    result = json.loads(result_path.read_text())
    if "rollouts" not in result:  # rows streamed into the archive before the result was written
        return lines
    expected = len(result["rollouts"]) + len(result["heldout"])
    recorded = archive.count(run_id=run_id, round=n)
    if phase == "archive" and recorded:
        lines.append(f"round {n}: {recorded} of {expected} archive rows were already written; "
                     "only missing ones are added")
    elif phase in _PAST_ARCHIVE and recorded < expected:
        archive.append_round(run_id, n, result["rollouts"] + result["heldout"])
        lines.append(f"round {n}: state.json is past the archive phase but {expected - recorded} of {expected} "
                     f"rows were missing; written again from {result_path.relative_to(run.path)}")
    return lines


def _drop_unaccounted_parts(run: RunDir, archive: Archive, run_id: str, n: int) -> list[str]:
    """Parts of round ``n`` committed by a training whose result.json was never written: removed, since
    the round trains again and writes its rows anew."""
    lines = []
    for part in archive.parts(run_id, n):
        forget_part(archive.root, part, f"round {n} trains again")  # removed on purpose: not a loss
        shown = part.relative_to(run.path) if part.is_relative_to(run.path) else part  # an archive elsewhere
        lines.append(f"{shown}: removed archive rows of round {n}, whose training was "
                     "killed before its result was saved")
    return lines
