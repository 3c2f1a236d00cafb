"""The git repository under a harness repo: its main working tree and the questions about its refs.

``HarnessRepo`` (creating, opening, reading), its two halves ``Worktrees`` (intervention branches) and
``Promotion`` (merging, tagging, reverting on main), and the history reader all ask these; they sit here, below
all four, so that none of them imports the class the others make up.

    repo = HarnessRepo.open(path)        # a GitRepo
    repo.head("main"), repo.message("main~1"), repo.is_ancestor(a, b), repo.branch_exists("iv/r1-x")
"""

from __future__ import annotations

from pathlib import Path

import git

from harness_repo.gitcmd import HarnessError
from harness_repo.gitcmd import git_try as _git_try
from harness_repo.gitcmd import run_git as _git


class GitRepo:
    """A git repository whose main working tree is at ``path``; git runs with hooks disabled (``gitcmd``)."""

    def __init__(self, path: Path) -> None:
        """Use :meth:`HarnessRepo.create`, :meth:`~HarnessRepo.open` or :meth:`~HarnessRepo.clone_line`; they
        validate the repo."""
        self.path = Path(path).resolve()
        self._repo = git.Repo(self.path)

    def head(self, ref: str = "main") -> str:
        """The commit sha ``ref`` points to (branch, tag, sha or ``main~1``-style expression)."""
        status, out, _ = _git_try(self.path, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        if status != 0:
            raise HarnessError(f"{ref!r} does not name a commit in {self.path}")
        return out.strip()

    def message(self, ref: str) -> str:
        """The full commit message of ``ref``."""
        return str(self._repo.commit(self.head(ref)).message)

    def require_clean_main(self) -> None:
        """HarnessError unless main is checked out in the main working tree and nothing is uncommitted."""
        status, out, _ = _git_try(self.path, "symbolic-ref", "-q", "--short", "HEAD")
        if status != 0 or out.strip() != "main":
            has = out.strip() or "a detached HEAD"
            raise HarnessError(f"{self.path} must have main checked out (has {has})")
        dirty = _git(self.path, "status", "--porcelain", "--untracked-files=all").strip()
        if dirty:
            raise HarnessError(
                f"the main working tree {self.path} has uncommitted changes; commit or remove "
                f"them first:\n{dirty}"
            )

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether commit ``ancestor`` is reachable from ``descendant``."""
        return _git_try(self.path, "merge-base", "--is-ancestor", ancestor, descendant)[0] == 0

    def branch_exists(self, branch: str) -> bool:
        """Whether ``refs/heads/<branch>`` exists."""
        return _git_try(self.path, "rev-parse", "--verify", "-q", f"refs/heads/{branch}")[0] == 0

    def tag_exists(self, tag: str) -> bool:
        """Whether ``refs/tags/<tag>`` exists."""
        return _git_try(self.path, "rev-parse", "--verify", "-q", f"refs/tags/{tag}")[0] == 0
