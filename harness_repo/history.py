"""Reading interventions back from git: trailers, status, verdict and evidence.

Status comes from replaying main's first-parent history (a merge commit with an
``Intervention:`` trailer merges; a later ``Reverts-Intervention:`` undoes) and
from ``verdict/<branch>`` tags (rejected).  Read-only: nothing here writes git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness_repo.git_repo import GitRepo
from harness_repo.gitcmd import git_try, run_git
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

    @property
    def on_probation(self) -> bool:
        """Merged on probation: its merge verdict says so (its benefit is left to the next round's live check)."""
        return bool(self.merge_commit) and "probation" in (self.verdict or "")


@dataclass
class MainHistory:
    """What main's first-parent history says about each intervention."""

    merged: dict[str, str] = field(default_factory=dict)  # branch -> merge commit
    reverted: dict[str, str] = field(default_factory=dict)  # branch -> undoing commit


def _commits(repo: GitRepo, rev: str, *, first_parent: bool = False) -> list[tuple[str, list[str], str]]:
    """(sha, parents, full message) of the commits ``git log rev`` lists, oldest first."""
    args = ["log", "--reverse", "--format=%H %P%x00%B%x1e", *(["--first-parent"] if first_parent else []), rev]
    out = run_git(repo.path, *args)
    commits = []
    for record in filter(str.strip, out.split("\x1e")):
        head, message = record.lstrip("\n").split("\x00", 1)
        sha, *parents = head.split()
        commits.append((sha, parents, message))
    return commits


def read_intervention(repo: GitRepo, branch: str, history: MainHistory) -> Intervention:
    match = BRANCH_RE.fullmatch(branch)
    assert match is not None
    head = repo.head(f"refs/heads/{branch}")
    merge_sha = history.merged.get(branch)
    # Once merged, main contains the branch, so its base is the merge-base at merge time.
    against = repo.head(f"{merge_sha}^1") if merge_sha else repo.head("main")
    status, out, _ = git_try(repo.path, "merge-base", against, head)
    base = out.strip() if status == 0 else ""
    commits = _commits(repo, f"{base}..{head}" if base else head)
    trailers = merge_trailers(*(parse_trailers(message) for _, _, message in commits))
    evidence: dict[str, list[str]] = {}
    state, verdict = "open", None
    if merge_sha:
        evidence = parse_trailers(repo.message(merge_sha))
        evidence.pop(INTERVENTION, None)
        state = "reverted" if branch in history.reverted else "merged"
    else:
        found, message, _ = git_try(repo.path, "for-each-ref", "--format=%(contents)", f"refs/tags/verdict/{branch}")
        if found == 0 and message.strip():
            evidence, state = parse_trailers(message), "rejected"
            verdict = message.strip().splitlines()[0]
    verdict = (evidence.get(VERDICT) or [verdict])[0]
    return Intervention(
        branch=branch, round=int(match[1]), slug=match[2], status=state, head=head, base=base,
        subject=commits[0][2].strip().splitlines()[0] if commits else "",
        hypothesis="\n".join(trailers.get(HYPOTHESIS, [])),
        predicted_effects=list(trailers.get(PREDICTED_EFFECT, [])),
        skill=(trailers.get(SKILL) or [None])[0], trailers=trailers, verdict=verdict,
        evidence=evidence, merge_commit=merge_sha, revert_commit=history.reverted.get(branch),
    )


def main_history(repo: GitRepo) -> MainHistory:
    """Replay main's first-parent history: which interventions were merged, which undone."""
    history = MainHistory()
    for sha, parents, message in _commits(repo, "main", first_parent=True):
        trailers = parse_trailers(message)
        if len(parents) == 2 and trailers.get(INTERVENTION):
            branch = trailers[INTERVENTION][0]
            history.merged[branch] = sha
            history.reverted.pop(branch, None)
        for branch in trailers.get(REVERTS_INTERVENTION, []):
            if branch in history.merged:
                history.reverted[branch] = sha
    return history
