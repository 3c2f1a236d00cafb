"""Reading interventions back from git: trailers, status, verdict and evidence.

Status comes from replaying main's first-parent history (a merge commit with an
``Intervention:`` trailer merges; a later ``Reverts-Intervention:`` undoes) and
from ``verdict/<branch>`` tags (rejected).  Read-only: nothing here writes git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import git

from harness_repo.gitcmd import git_try as _git_try
from harness_repo.trailers import (
    HYPOTHESIS,
    INTERVENTION,
    PREDICTED_EFFECT,
    REVERTS_INTERVENTION,
    SKILL,
    VERDICT,
    merge_trailers,
    parse_trailers,
)

if TYPE_CHECKING:
    from harness_repo.repo import HarnessRepo

BRANCH_RE = re.compile(r"iv/r(\d+)-([a-z0-9][a-z0-9-]*)")


@dataclass
class Intervention:
    """One ``iv/*`` branch as recorded in git: proposal trailers, status and verdict."""

    branch: str
    round: int
    slug: str
    status: str  # "open" | "merged" | "rejected" | "reverted"
    head: str
    base: str
    subject: str
    hypothesis: str
    predicted_effects: list[str]
    skill: str | None
    trailers: dict[str, list[str]]
    verdict: str | None
    evidence: dict[str, list[str]]
    merge_commit: str | None
    revert_commit: str | None = None
    """The commit on main that undid the merge (a revert or a restore), if any."""


@dataclass
class MainHistory:
    """What main's first-parent history says about each intervention."""

    merged: dict[str, str] = field(default_factory=dict)  # branch -> merge commit
    reverted: dict[str, str] = field(default_factory=dict)  # branch -> undoing commit


def read_intervention(repo: "HarnessRepo", branch: str, history: MainHistory) -> Intervention:
    match = BRANCH_RE.fullmatch(branch)
    assert match is not None
    head = repo.head(f"refs/heads/{branch}")
    merge_sha = history.merged.get(branch)
    # Once merged, main contains the branch, so its base is the merge-base at merge time.
    against = repo._repo.commit(merge_sha).parents[0].hexsha if merge_sha else repo.head("main")
    status, out, _ = _git_try(repo.path, "merge-base", against, head)
    base = out.strip() if status == 0 else ""
    commits = list(repo._repo.iter_commits(f"{base}..{head}" if base else head, reverse=True))
    trailers = merge_trailers(*(parse_trailers(str(c.message)) for c in commits))
    evidence: dict[str, list[str]] = {}
    state, verdict = "open", None
    if merge_sha:
        evidence = parse_trailers(str(repo._repo.commit(merge_sha).message))
        evidence.pop(INTERVENTION, None)
        state = "reverted" if branch in history.reverted else "merged"
    elif repo._tag_exists(f"verdict/{branch}"):
        tag_obj = git.TagReference(repo._repo, f"refs/tags/verdict/{branch}").tag
        message = str(tag_obj.message) if tag_obj is not None else ""
        evidence, state = parse_trailers(message), "rejected"
        verdict = message.strip().splitlines()[0] if message.strip() else None
    verdict = (evidence.get(VERDICT) or [verdict])[0]
    return Intervention(
        branch=branch, round=int(match[1]), slug=match[2], status=state, head=head, base=base,
        subject=str(commits[0].summary) if commits else "",
        hypothesis="\n".join(trailers.get(HYPOTHESIS, [])),
        predicted_effects=list(trailers.get(PREDICTED_EFFECT, [])),
        skill=(trailers.get(SKILL) or [None])[0], trailers=trailers, verdict=verdict,
        evidence=evidence, merge_commit=merge_sha, revert_commit=history.reverted.get(branch),
    )

def main_history(repo: "HarnessRepo") -> MainHistory:
    """Replay main's first-parent history: which interventions were merged, which undone."""
    history = MainHistory()
    for commit in reversed(list(repo._repo.iter_commits("main", first_parent=True))):
        trailers = parse_trailers(str(commit.message))
        if len(commit.parents) == 2 and trailers.get(INTERVENTION):
            branch = trailers[INTERVENTION][0]
            history.merged[branch] = commit.hexsha
            history.reverted.pop(branch, None)
        for branch in trailers.get(REVERTS_INTERVENTION, []):
            if branch in history.merged:
                history.reverted[branch] = commit.hexsha
    return history
