"""Promoting interventions on main: merges that carry their evidence, verdict tags, reverts and restores.

Every write here adds to history; nothing is reset or deleted.  A passing branch is merged
``--no-ff`` with the evidence as trailers, a failing one is kept and tagged
``verdict/<branch>``, and undoing a merge adds a commit::

    merge = repo.merge("iv/r1-boxed", {"Backtest": "reward_acc +0.12", "Verdict": "merged"}, "Accept boxed")
    repo.reject("iv/r1-longer", "rejected: no evidence", {"Backtest": "..."})
    repo.revert_merge(merge, "its predicted effect did not hold live")
    repo.revert_merge_cascade(merge, "the tripwire fired")   # [later merges in its way..., its own branch]

Mixed into :class:`harness_repo.repo.HarnessRepo`; git runs with hooks disabled (``gitcmd``).
"""

from __future__ import annotations

from harness_repo.failpoints import failpoint
from harness_repo.git_repo import GitRepo
from harness_repo.gitcmd import HarnessError, git_try as _git_try, run_git as _git
from harness_repo.history import main_history
from harness_repo.trailers import (
    INTERVENTION,
    RESTORES,
    REVERTS_INTERVENTION,
    VERDICT,
    TrailerValues,
    format_trailers,
    parse_trailers,
)


class RevertConflict(HarnessError):
    """Reverting ``branch``'s merge conflicts with what main changed since, in ``paths``; main is unchanged."""

    def __init__(self, branch: str, paths: list[str]) -> None:
        super().__init__(f"cannot revert {branch} (conflicts in {', '.join(paths)} with later merges); main is "
                         "unchanged: revert_merge_cascade reverts the later merges in its way first, or use restore()")
        self.branch, self.paths = branch, paths


class Promotion(GitRepo):
    """The main-changing half of :class:`~harness_repo.repo.HarnessRepo`."""

    def merge(self, branch: str, evidence: dict[str, TrailerValues], summary: str) -> str:
        """Merge ``branch`` into main with ``--no-ff``; the message is ``summary`` + evidence trailers.

        On a conflict the merge is aborted and main is left as it was.  Returns the merge commit.
        """
        self.head(f"refs/heads/{branch}")
        self.require_clean_main()
        if self.is_ancestor(f"refs/heads/{branch}", "main"):
            raise HarnessError(f"{branch} is already contained in main; nothing to merge")
        trailers = {INTERVENTION: branch, **{k: v for k, v in evidence.items() if k != INTERVENTION}}
        message = f"{summary.strip() or f'Merge {branch}'}\n\n{format_trailers(trailers)}"
        status, out, err = _git_try(
            self.path, "merge", "--no-ff", "--no-verify", "-q", "-m", message, f"refs/heads/{branch}"
        )
        if status != 0:
            conflicts = _git_try(self.path, "diff", "--name-only", "--diff-filter=U")[1].split()
            _git_try(self.path, "merge", "--abort")
            why = ", ".join(conflicts) or err.strip() or out.strip()
            raise HarnessError(
                f"merging {branch} into main failed ({why}); main is unchanged. "
                "Redo the intervention on the current main, or reject it"
            )
        failpoint("promote.merged")
        return self.head("main")

    def merge_preview(self, branch: str) -> str:
        """A commit on no branch holding what merging ``branch`` into main would produce.

        The backtest judges this, not the branch tip: a branch started before another
        one was merged must be judged on top of that merge.  HarnessError on a conflict.
        """
        self.head(f"refs/heads/{branch}")
        status, out, err = _git_try(self.path, "merge-tree", "--write-tree", "--name-only", "--no-messages",
                                    "main", f"refs/heads/{branch}")
        if status != 0:
            conflicts = ", ".join(out.split()[1:]) or err.strip()
            raise HarnessError(f"{branch} conflicts with the current main ({conflicts}); redo it on main")
        tree = out.split()[0]
        return _git(self.path, "commit-tree", tree, "-p", "main", "-p", f"refs/heads/{branch}",
                    "-m", f"Preview: merge {branch} into main").strip()

    def reject(self, branch: str, verdict: str, evidence: dict[str, TrailerValues]) -> str:
        """Tag the branch tip ``verdict/<branch>`` (verdict + evidence trailers); the tag name.

        The branch itself is kept.
        """
        sha = self.head(f"refs/heads/{branch}")
        tag = f"verdict/{branch}"
        if _git_try(self.path, "rev-parse", "--verify", "-q", f"refs/tags/{tag}")[0] == 0:
            raise HarnessError(f"{branch} already has a verdict tag {tag}")
        if not verdict.strip():
            raise HarnessError("verdict is empty; say why the intervention was rejected")
        trailers = {VERDICT: verdict.strip().splitlines()[0], **evidence}
        _git(self.path, "tag", "-a", tag, "-m", f"{verdict.strip()}\n\n{format_trailers(trailers)}", sha)
        failpoint("promote.tagged")
        return tag

    def revert_merge(
        self, merge_commit: str, reason: str, trailers: dict[str, TrailerValues] | None = None
    ) -> str:
        """Add a commit on main that undoes an intervention merge (``git revert -m 1``); its sha."""
        sha = self.head(merge_commit)
        parents = _git(self.path, "rev-list", "--parents", "-n", "1", sha).split()[1:]
        branch = (parse_trailers(self.message(sha)).get(INTERVENTION) or [None])[0]
        if len(parents) != 2 or branch is None:
            raise HarnessError(
                f"{merge_commit} is not an intervention merge (no {INTERVENTION} trailer)"
            )
        if not self.is_ancestor(sha, "main"):
            raise HarnessError(f"{merge_commit} is not on main; only merges into main can be reverted")
        if branch in main_history(self).reverted:
            raise HarnessError(f"{branch} has already been reverted")
        self.require_clean_main()
        conflicts = self._try_revert(sha, branch)
        if conflicts is not None:
            raise RevertConflict(branch, conflicts)
        extra = {REVERTS_INTERVENTION: branch, "Reverts-Merge": sha, **(trailers or {})}
        message = f"Revert intervention {branch}\n\n{reason.strip()}\n\n{format_trailers(extra)}"
        _git(self.path, "commit", "-q", "--no-verify", "-m", message)
        return self.head("main")

    def _try_revert(self, sha: str, branch: str) -> list[str] | None:
        """Stage the revert of merge ``sha`` (None), or abort it and return the paths in conflict."""
        status, out, err = _git_try(self.path, "revert", "--no-commit", "-m", "1", sha)
        if status == 0 and _git_try(self.path, "diff", "--cached", "--quiet")[0] != 0:
            return None
        conflicts = _git_try(self.path, "diff", "--name-only", "--diff-filter=U")[1].split()
        _git_try(self.path, "revert", "--abort")
        if status == 0 or not conflicts:  # nothing to undo, or git refused for another reason: not a conflict
            why = err.strip() or out.strip() or "the revert changes nothing"
            raise HarnessError(f"cannot revert {branch} ({why}); main is unchanged, use restore()")
        return conflicts

    def revert_merge_cascade(
        self, merge_commit: str, reason: str, trailers: dict[str, TrailerValues] | None = None
    ) -> list[tuple[str, str]]:
        """Revert an intervention merge; when its revert conflicts with later merges, revert those first.

        The later intervention merges on main that change a path in conflict are reverted newest first (each
        one itself by this rule), each with a ``Reverted-For`` trailer and a reason naming the merge in whose
        way it stood, until the merge's own revert applies.  Returns ``(branch, why)`` per revert made, in the
        order made; the merge's own comes last.  Raises :class:`RevertConflict` (main keeps the reverts made
        so far, each recorded) when no later merge is left to revert.
        """
        sha = self.head(merge_commit)
        try:
            self.revert_merge(sha, reason, trailers)
            return [(self._branch_of(sha), reason)]
        except RevertConflict as exc:
            conflict = exc
        made: list[tuple[str, str]] = []
        for later in self._later_merges(sha, conflict.paths):
            if self._branch_of(later) in main_history(self).reverted:
                continue
            why = (f"its changes to {', '.join(conflict.paths)} stand in the way of reverting {conflict.branch} "
                   f"({reason.strip().splitlines()[0] if reason.strip() else 'no reason given'}); reverted first")
            made += self.revert_merge_cascade(later, why, {**(trailers or {}), "Reverted-For": conflict.branch})
            try:
                self.revert_merge(sha, reason, trailers)
                return [*made, (conflict.branch, reason)]
            except RevertConflict as exc:
                conflict = exc
        raise conflict

    def _branch_of(self, merge: str) -> str:
        return (parse_trailers(self.message(merge)).get(INTERVENTION) or [""])[0]

    def _later_merges(self, sha: str, paths: list[str]) -> list[str]:
        """Intervention merges on main's first-parent line after ``sha`` that change any of ``paths``, newest first."""
        merges = _git(self.path, "rev-list", "--first-parent", "--merges", f"{sha}..main").split()
        out = []
        for merge in merges:
            changed = set(_git(self.path, "diff", "--name-only", f"{merge}^1", merge).split())
            if self._branch_of(merge) and changed & set(paths):
                out.append(merge)
        return out

    def restore(
        self, good_commit: str, reason: str, trailers: dict[str, TrailerValues] | None = None
    ) -> str:
        """Add a commit on main whose tree equals ``good_commit``'s (an earlier main state); its sha.

        Interventions merged after ``good_commit`` get ``Reverts-Intervention`` trailers.
        The commit is made even when the files already match, so the reason is recorded.
        """
        good, old = self.head(good_commit), self.head("main")
        if not self.is_ancestor(good, old):
            raise HarnessError(
                f"{good_commit} is not in main's history; restore only to an earlier main"
            )
        self.require_clean_main()
        history = main_history(self)
        undone = [
            b for b, m in history.merged.items()
            if b not in history.reverted and not self.is_ancestor(m, good)
        ]
        extra = dict(trailers or {})
        given = extra.pop(REVERTS_INTERVENTION, None)
        given_list = [given] if isinstance(given, str) else list(given or [])
        block = format_trailers({RESTORES: good, REVERTS_INTERVENTION: undone + given_list, **extra})
        message = f"Restore harness to {good[:10]}\n\n{reason.strip()}\n\n{block}"
        new = _git(self.path, "commit-tree", f"{good}^{{tree}}", "-p", old, "-m", message).strip()
        _git(self.path, "merge", "--ff-only", "-q", new)
        return new
