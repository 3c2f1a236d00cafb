"""Parked drafts: what a stopped candidate left, kept under ``refs/agent-drafts/<branch>`` and never judged
(``meta_agent.run.unfinished``, an LLM agent's unsubmitted preview). ``history`` lists them and ``show`` opens one
by its branch name or its ref, so work a stop set aside is found where users look.

    for d in drafts(repo): print(d.ref, d.subject)
    record = draft_record(repo, "iv/r1-loosen")      # or "refs/agent-drafts/iv/r1-loosen"
"""

from __future__ import annotations

from typing import NamedTuple

from harness_repo.gitcmd import git_try, run_git
from harness_repo.repo import HarnessRepo

DRAFTS = "refs/agent-drafts/"


class Draft(NamedTuple):
    ref: str
    branch: str
    head: str
    subject: str


def drafts(repo: HarnessRepo) -> list[Draft]:
    """Every parked draft of the harness repo, by ref name."""
    out = run_git(repo.path, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(subject)", DRAFTS)
    found = []
    for line in out.splitlines():
        ref, head, subject = (line.split("\0") + ["", ""])[:3]
        found.append(Draft(ref, ref.removeprefix(DRAFTS), head, subject))
    return found


def find(repo: HarnessRepo, name: str) -> Draft | None:
    """The draft ``name`` names: its ref, ``agent-drafts/<branch>``, its branch, or the branch without ``iv/``."""
    for d in drafts(repo):
        if name in (d.ref, d.ref.removeprefix("refs/"), d.branch, d.branch.removeprefix("iv/")):
            return d
    return None


def draft_record(repo: HarnessRepo, d: Draft) -> dict:
    """What ``show`` prints for a draft: its commits since main and the diff, marked as never judged."""
    base = git_try(repo.path, "merge-base", "main", d.head)[1].strip() or d.head
    log = run_git(repo.path, "log", "--format=%h %s", f"{base}..{d.head}")
    diff = run_git(repo.path, "diff", base, d.head)
    return {"kind": "draft", "ref": d.ref, "branch": d.branch, "head": d.head, "subject": d.subject,
            "commits": log.splitlines(), "diff": diff,
            "note": "a stopped candidate's work, parked when the controller stopped; never backtested or judged. "
                    f"To judge it: git -C <run>/harness branch {d.branch}-draft {d.ref}, then backtest that "
                    "branch once it carries a Hypothesis: trailer"}
