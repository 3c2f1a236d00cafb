"""Working on interventions: a branch per intervention in its own worktree, commits with trailers.

An agent starts a branch ``iv/r<round>-<slug>`` at main in a fresh worktree, edits files there
and commits them with trailers; trusted bookkeeping (a confirmed skill) is committed on main
directly.  After a crash, :meth:`Worktrees.clean_interrupted` removes what a killed controller
left half done::

    wt = repo.start_intervention(1, "boxed answers", worktree_root=run / "worktrees")
    (wt.path / "reward.py").write_text(...)
    repo.commit(wt, "Reward reads boxed answers", {"Hypothesis": "...", "Predicted-Effect": ["..."]})
    repo.remove_worktree(wt)                       # the branch and its commit stay

Mixed into :class:`harness_repo.repo.HarnessRepo`; git runs with hooks disabled (``gitcmd``).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from harness_repo.contract import EDITABLE_GLOBS, is_editable
from harness_repo.failpoints import failpoint
from harness_repo.git_repo import GitRepo
from harness_repo.gitcmd import HarnessError, git_try as _git_try, require_empty, run_git as _git
from harness_repo.history import main_history
from harness_repo.trailers import TrailerValues, format_trailers


@dataclass(frozen=True)
class Worktree:
    """A checked-out intervention branch in its own directory."""

    path: Path
    branch: str
    base_commit: str


def sanitise_slug(slug: str) -> str:
    """``"Boxed answers!"`` -> ``"boxed-answers"`` (lowercase ``[a-z0-9-]``, at most 48 chars)."""
    clean = re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-")[:48].strip("-")
    if not clean:
        raise HarnessError(f"slug {slug!r} has no letters or digits; name the intervention")
    return clean


class Worktrees(GitRepo):
    """The intervention-writing half of :class:`~harness_repo.repo.HarnessRepo`."""

    def start_intervention(
        self, round: int, slug: str, base: str = "main", worktree_root: Path | None = None
    ) -> Worktree:
        """Create branch ``iv/r<round>-<slug>`` at ``base`` and check it out in a new worktree.

        The worktree goes to ``worktree_root/<branch with / -> _>``, by default under
        a ``<repo>.worktrees`` directory next to the repo.  A relative ``worktree_root`` is relative
        to this process's working directory (as any path it is given), not to the repo.
        """
        if round < 0:
            raise HarnessError(f"round must be >= 0, got {round}")
        branch = f"iv/r{round}-{sanitise_slug(slug)}"
        if self.branch_exists(branch):
            raise HarnessError(f"branch {branch} already exists; choose another slug")
        base_commit = self.head(base)
        root = Path(worktree_root).absolute() if worktree_root else self.path.parent / f"{self.path.name}.worktrees"
        path = root / branch.replace("/", "_")
        require_empty(path, "remove the stale worktree directory or choose another slug")
        root.mkdir(parents=True, exist_ok=True)
        _git(self.path, "worktree", "add", "-q", "-b", branch, str(path), base_commit)
        failpoint("propose.branch_created")
        return Worktree(path.resolve(), branch, base_commit)

    def commit(self, worktree: Worktree, message: str, trailers: dict[str, TrailerValues]) -> str:
        """Stage every change in ``worktree`` and commit it with ``trailers`` appended; the new sha."""
        if not message.strip():
            raise HarnessError("commit message is empty; say what the change does")
        common = Path(_git(worktree.path, "rev-parse", "--path-format=absolute", "--git-common-dir"))
        if common.resolve() != (self.path / ".git").resolve():
            raise HarnessError(f"{worktree.path} is not a worktree of {self.path}")
        current = _git(worktree.path, "symbolic-ref", "-q", "--short", "HEAD").strip()
        if current != worktree.branch:
            raise HarnessError(f"{worktree.path} has {current} checked out, not {worktree.branch}")
        _git(worktree.path, "add", "-A")
        if _git_try(worktree.path, "diff", "--cached", "--quiet")[0] == 0:
            raise HarnessError(f"nothing changed in {worktree.path}: edit a harness file first")
        block = format_trailers(trailers)
        full = message.strip() + (f"\n\n{block}" if block else "")
        _git(worktree.path, "commit", "-q", "--no-verify", "-m", full)
        failpoint("propose.committed")
        return _git(worktree.path, "rev-parse", "HEAD").strip()

    def commit_files(
        self, files: dict[str, str], message: str, trailers: dict[str, TrailerValues] | None = None
    ) -> str:
        """Write ``{path: text}`` into the main working tree and commit them on main; the new sha.

        For trusted bookkeeping directly on main (e.g. a skill confirmed live), not
        for interventions.  Every path must be editable under the file contract.
        """
        outside = [p for p in files if not is_editable(p)]
        if outside:
            editable = ", ".join(EDITABLE_GLOBS)
            raise HarnessError(f"{outside} are outside the harness contract ({editable})")
        if not message.strip():
            raise HarnessError("commit message is empty; say what the change does")
        self.require_clean_main()
        for rel, text in files.items():
            (self.path / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.path / rel).write_text(text)
        failpoint("main.files_written")
        _git(self.path, "add", "--", *files)
        if _git_try(self.path, "diff", "--cached", "--quiet")[0] == 0:
            raise HarnessError(f"{sorted(files)} already have that content on main; nothing to commit")
        block = format_trailers(trailers or {})
        full = message.strip() + (f"\n\n{block}" if block else "")
        _git(self.path, "commit", "-q", "--no-verify", "-m", full)
        return self.head("main")

    def remove_worktree(self, worktree: Worktree, force: bool = False) -> None:
        """Remove the worktree directory (the branch and its commits stay).

        Uncommitted changes make this fail unless ``force`` discards them.
        """
        args = ["worktree", "remove", *(["--force"] if force else []), str(worktree.path)]
        status, out, err = _git_try(self.path, *args)
        if status != 0:
            raise HarnessError(
                f"cannot remove worktree {worktree.path}: {err.strip() or out.strip()}; commit "
                "the changes first or pass force=True to discard them"
            )
        _git(self.path, "worktree", "prune")

    def clean_interrupted(self, worktree_root: Path, round: int) -> list[str]:
        """Undo what a killed controller left half done in git; one line per finding.

        Only for the one controller holding the run's lock: a git lock file, a half-done
        merge or revert, uncommitted bookkeeping in main's working tree, the worktrees under
        ``worktree_root`` and the branches of ``round`` created without a commit.  Nothing
        committed is touched: a branch with commits keeps them, and only an empty branch
        (no work on it) is deleted so that its agent can start it again.
        """
        found = []
        git_dir = self.path / ".git"
        if (git_dir / "index.lock").exists():
            (git_dir / "index.lock").unlink()
            found.append("git: removed index.lock left by a git command that was killed")
        for marker, command in (("MERGE_HEAD", "merge"), ("REVERT_HEAD", "revert"),
                                ("CHERRY_PICK_HEAD", "cherry-pick")):
            if (git_dir / marker).exists():
                _git(self.path, command, "--abort")
                found.append(f"git: aborted a {command} on main that was killed half way; main is as before it")
        status = _git(self.path, "status", "--porcelain", "--untracked-files=all").splitlines()
        # only what commit_files writes for the controller (skills); anything else stays for its owner
        bookkeeping = [line[3:] for line in status if line[3:].startswith("skills/")]
        if bookkeeping:
            _git(self.path, "reset", "-q", "--", *bookkeeping)  # unstage only; the files are handled below
            tracked = [p for p in bookkeeping if _git_try(self.path, "cat-file", "-e", f"HEAD:{p}")[0] == 0]
            if tracked:
                _git(self.path, "checkout", "-q", "HEAD", "--", *tracked)
            _git(self.path, "clean", "-q", "-f", "--", *bookkeeping)
            found.append(f"git: discarded bookkeeping written into main but not committed "
                         f"({', '.join(bookkeeping)}); the phase that wrote it runs again")
        root = Path(worktree_root).resolve()
        listed = _git(self.path, "worktree", "list", "--porcelain").splitlines()
        for path in (Path(line[len("worktree "):]) for line in listed if line.startswith("worktree ")):
            if path.is_relative_to(root):
                _git(self.path, "worktree", "remove", "--force", str(path))
                found.append(f"git: removed worktree {path.name} left by an agent that was stopped")
        _git(self.path, "worktree", "prune")
        if root.is_dir():
            for path in root.iterdir():  # killed inside `git worktree add`: a folder git never registered
                shutil.rmtree(path)
                found.append(f"git: removed unregistered worktree folder {path.name}")
        names = _git(self.path, "for-each-ref", "--format=%(refname:strip=2)", f"refs/heads/iv/r{round}-*")
        for branch in names.splitlines():
            head = self.head(f"refs/heads/{branch}")
            if self.is_ancestor(head, "main") and not self.tag_exists(f"verdict/{branch}") \
                    and branch not in main_history(self).merged:
                _git(self.path, "branch", "-D", branch)
                found.append(f"git: deleted {branch}, created without a commit before the stop; "
                             "its agent may propose it again")
        return found
