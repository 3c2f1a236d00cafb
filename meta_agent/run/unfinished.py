"""A stopped candidate is not a proposal: on resume, park what a killed agent left on its branches.

A branch ``iv/r<n>-<slug>`` is a proposal only when its head is the proposal commit, the one
that carries the ``Hypothesis`` trailer (``LLMAgent._commit``, the recipe agent's commit).  A
controller killed mid-conversation leaves other heads: the base commit (nothing done yet), a
``WIP: backtest preview`` commit without trailers, and edits never committed in the worktree.
Judging such a branch would reject an empty hypothesis and ask the agent for one candidate
fewer.  Instead, resume commits any edits left in the worktree, keeps the work under
``refs/agent-drafts/<branch>`` (as an agent does for a candidate that never submitted), removes
the worktree and the branch, and the round asks the agent for the full number again.

Recovery parks before it cleans worktrees (``meta_agent.recovery``): cleaning first would
delete the uncommitted edits.  The stopped candidate's transcript is kept beside the others as
``<branch>.stopped.json`` (a new candidate may take the freed branch name), so the transcripts
of a round still add up to what the budget charged.

    parked = park_unfinished(repo, round=3, transcripts=run.round_dir(3) / "agent")
"""

from __future__ import annotations

import json
from pathlib import Path

from harness_repo.gitcmd import git_try, run_git
from harness_repo.repo import HarnessRepo
from meta_agent.run_dir import write_json_atomic

PROPOSAL_TRAILER = "Hypothesis"
DRAFTS = "refs/agent-drafts/"


def is_proposal(repo: HarnessRepo, branch: str) -> bool:
    """Whether ``branch``'s head is a proposal commit (it carries the proposal's trailers)."""
    head = repo.log(f"refs/heads/{branch}", 1)[0]
    return bool(head["trailers"].get(PROPOSAL_TRAILER))


def _worktree_of(repo: HarnessRepo, branch: str) -> Path | None:
    out = run_git(repo.path, "worktree", "list", "--porcelain")
    path = None
    for line in out.splitlines():
        if line.startswith("worktree "):
            path = Path(line[len("worktree "):])
        elif line == f"branch refs/heads/{branch}":
            return path
    return None


def _commit_leftovers(wt: Path) -> None:
    """Commit what a killed agent left uncommitted in ``wt`` (after a lock its killed git command left)."""
    code, git_dir, _ = git_try(wt, "rev-parse", "--absolute-git-dir")
    if code == 0 and (Path(git_dir) / "index.lock").exists():
        (Path(git_dir) / "index.lock").unlink()  # only one controller holds the run's lock: nobody else writes here
    run_git(wt, "add", "-A")
    if git_try(wt, "diff", "--cached", "--quiet")[0] != 0:
        run_git(wt, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--no-verify", "-m",
                "WIP: stopped candidate (unfinished work kept as a draft)")


def _free_draft(repo: HarnessRepo, branch: str) -> str:
    """``refs/agent-drafts/<branch>``, or ``-stopped-2``... when an earlier draft holds that name."""
    ref, n = f"{DRAFTS}{branch}", 2
    while git_try(repo.path, "rev-parse", "-q", "--verify", ref)[0] == 0:
        ref, n = f"{DRAFTS}{branch}-stopped-{n}", n + 1
    return ref


def _keep_transcript(transcripts: Path | None, branch: str, draft: str | None) -> None:
    """Move the stopped conversation's transcript aside, marked stopped; a new candidate may reuse the name."""
    path = transcripts / f"{branch.replace('/', '_')}.json" if transcripts else None
    if path is None or not path.is_file():
        return
    try:
        record = json.loads(path.read_text())
    except ValueError:  # written atomically, so only a foreign file: keep it as it is
        record = None
    target, n = path.with_name(f"{path.stem}.stopped.json"), 2
    while target.exists():
        target, n = path.with_name(f"{path.stem}.stopped-{n}.json"), n + 1
    if isinstance(record, dict):
        record.update(status="stopped", error="the controller was stopped during this conversation; "
                      "its work was parked on resume, not judged")
        record.setdefault("events", []).append({"drafts": draft})
        write_json_atomic(target, record)
        path.unlink()
    else:
        path.rename(target)


def park_unfinished(repo: HarnessRepo, round: int, transcripts: Path | None = None, *,
                    only_with_work: bool = False) -> list[str]:
    """Move every open branch of ``round`` that is not a proposal to ``refs/agent-drafts/``; their names.

    Nothing is lost: uncommitted edits are committed first (``WIP: stopped candidate``, no trailers),
    the draft ref keeps the commits, and the transcript under ``transcripts`` (the round's ``agent/``
    folder) is renamed ``<branch>.stopped.json``.  ``only_with_work`` leaves a branch with neither a
    commit nor an edit alone (recovery's git cleaning deletes those).  Idempotent: a second call finds
    nothing to park.
    """
    parked = []
    for iv in repo.interventions():
        if iv.round != round or iv.status != "open" or is_proposal(repo, iv.branch):
            continue
        wt = _worktree_of(repo, iv.branch)
        edited = wt is not None and wt.is_dir() and bool(git_try(wt, "status", "--porcelain")[1].strip())
        if only_with_work and not edited and repo.head(f"refs/heads/{iv.branch}") == iv.base:
            continue
        if wt is not None and wt.is_dir():
            _commit_leftovers(wt)
        head = repo.head(f"refs/heads/{iv.branch}")
        if wt is not None:
            git_try(repo.path, "worktree", "remove", "--force", str(wt))
            git_try(repo.path, "worktree", "prune")
        draft = _free_draft(repo, iv.branch) if head != iv.base else None
        if draft:
            run_git(repo.path, "update-ref", draft, head)
        run_git(repo.path, "branch", "-D", iv.branch)
        _keep_transcript(transcripts, iv.branch, draft)
        parked.append(iv.branch)
    return parked
