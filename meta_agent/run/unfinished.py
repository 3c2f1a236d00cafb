"""A stopped candidate is not a proposal: on resume, park what a killed agent left on its branches.

A branch ``iv/r<n>-<slug>`` is a proposal only when its head is the proposal commit, the one
that carries the ``Hypothesis`` trailer (``LLMAgent._commit``, the recipe agent's commit).  A
controller killed mid-conversation leaves other heads: the base commit (nothing done yet), a
``WIP: backtest preview`` commit without trailers, and edits never committed in the worktree.
Judging such a branch would reject an empty hypothesis and ask the agent for one candidate
fewer.  Instead, resume commits any edits left in the worktree, keeps the work under
``refs/agent-drafts/<branch>`` (as an agent does for a candidate that never submitted), removes
the worktree and the branch, and the round asks the agent for the full number again.

    parked = park_unfinished(repo, round=3)   # ["iv/r3-boxed"] -> refs/agent-drafts/iv/r3-boxed
"""

from __future__ import annotations

from pathlib import Path

from harness_repo.gitcmd import git_try, run_git
from harness_repo.repo import HarnessRepo

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


def park_unfinished(repo: HarnessRepo, round: int) -> list[str]:
    """Move every open branch of ``round`` that is not a proposal to ``refs/agent-drafts/``; their names.

    Nothing is lost: uncommitted edits are committed first (``WIP: stopped candidate``, no trailers)
    and the draft ref keeps the commits.  Idempotent: a second call finds nothing to park.
    """
    parked = []
    for iv in repo.interventions():
        if iv.round != round or iv.status != "open" or is_proposal(repo, iv.branch):
            continue
        wt = _worktree_of(repo, iv.branch)
        if wt is not None and wt.is_dir():
            run_git(wt, "add", "-A")
            if git_try(wt, "diff", "--cached", "--quiet")[0] != 0:
                run_git(wt, "-c", "core.hooksPath=/dev/null", "commit", "-q", "--no-verify", "-m",
                        "WIP: stopped candidate (unfinished work kept as a draft)")
        head = repo.head(f"refs/heads/{iv.branch}")
        if wt is not None:
            git_try(repo.path, "worktree", "remove", "--force", str(wt))
            git_try(repo.path, "worktree", "prune")
        if head != iv.base:
            run_git(repo.path, "update-ref", f"{DRAFTS}{iv.branch}", head)
        run_git(repo.path, "branch", "-D", iv.branch)
        parked.append(iv.branch)
    return parked
