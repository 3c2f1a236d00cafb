"""The harness repo: one git repository per run line, handled with GitPython and the git CLI.

Interventions are branches ``iv/r<round>-<slug>`` worked on in their own
worktrees; a passing one is merged ``--no-ff`` into ``main`` with the evidence as
trailers, a failing one is kept and tagged ``verdict/<branch>``; undoing a merge
adds a new commit, so nothing is ever lost (no ``reset --hard``; the only branch ever
deleted is one a killed agent created without a commit, see ``clean_interrupted``).
This module creates, opens and reads; ``worktrees.py`` works on branches and
``promote.py`` merges, tags and reverts (both mixed into :class:`HarnessRepo`)::

    repo = HarnessRepo.create(Path("runs/r1/harness"), "math")
    wt = repo.start_intervention(1, "boxed answers")          # branch iv/r1-boxed-answers
    (wt.path / "reward.py").write_text(...)
    repo.commit(wt, "Reward reads boxed answers", {"Hypothesis": "...", "Predicted-Effect": ["..."]})
    if not repo.contract_violations(wt.branch):
        repo.merge(wt.branch, {"Backtest": "reward_acc +0.12", "Verdict": "merged"}, "Accept boxed")

The content of the repo is untrusted (an LLM writes it): this module only reads
and writes files and git objects, never imports or runs them, and runs git with
hooks disabled so that a file planted in ``.git/hooks`` cannot execute either.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path, PurePosixPath

import git
import yaml
from pydantic import ValidationError

from harness_repo.contract import EDITABLE_GLOBS, HARNESS_FILES, HarnessConfig, is_editable
from harness_repo.gitcmd import HarnessError, require_empty
from harness_repo.gitcmd import git_try as _git_try
from harness_repo.gitcmd import run_git as _git
from harness_repo.history import BRANCH_RE, Intervention, main_history, read_intervention
from harness_repo.promote import Promotion
from harness_repo.trailers import parse_trailers
from harness_repo.worktrees import Worktree, Worktrees, sanitise_slug

__all__ = ["HarnessError", "HarnessRepo", "Intervention", "Worktree", "sanitise_slug"]

SEEDS_DIR = Path(__file__).parent / "seeds"
COMMITTER = ("meta-agent", "meta-agent@localhost")
# Bytecode and test caches appear when harness files are imported in a worktree;
# they must never be staged (they would also violate the contract).
_EXCLUDES = ("__pycache__/", "*.pyc", ".pytest_cache/")
_SYMLINK_MODE, _SUBMODULE_MODE = "120000", "160000"


def _configure(path: Path) -> None:
    """Committer identity (a machine may have no global git config) and local excludes.

    Writes only what is missing: opening a repo that is already configured must not
    take git's config lock, since parallel readers (re-scoring workers) open the same
    repo at once and a second writer fails on ``.git/config.lock``.
    """
    for key, value in (("user.name", COMMITTER[0]), ("user.email", COMMITTER[1])):
        if _git_try(path, "config", "--local", "--get", key)[1].strip() != value:
            _git(path, "config", key, value)
    exclude = path / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    missing = [p for p in _EXCLUDES if p not in lines]
    if missing:
        exclude.write_text("\n".join([*lines, *missing]) + "\n")


class HarnessRepo(Worktrees, Promotion):
    """A harness git repository (main working tree at ``path``).

    Creating, opening and reading live here; working on intervention branches in
    :mod:`harness_repo.worktrees`, and merging, tagging and reverting on main in
    :mod:`harness_repo.promote`; the refs all three ask about in :mod:`harness_repo.git_repo`.
    Use :meth:`create`, :meth:`open` or :meth:`clone_line`; they validate the repo.
    """

    # -- creating and opening ---------------------------------------------------------

    @classmethod
    def create(cls, path: Path, domain: str) -> HarnessRepo:
        """Copy ``seeds/<domain>`` to ``path`` (new or empty), ``git init -b main``, commit it."""
        seed = SEEDS_DIR / domain
        if not (seed / "harness.yaml").is_file():
            available = sorted(p.name for p in SEEDS_DIR.iterdir() if (p / "harness.yaml").is_file())
            raise HarnessError(f"no seed harness for domain {domain!r}; available: {available}")
        path = Path(path)
        require_empty(path, "pick a new directory, or HarnessRepo.open() an existing harness")
        shutil.copytree(
            seed, path, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        _git(path, "init", "-q", "-b", "main")
        _configure(path)
        _git(path, "add", "-A")
        message = f"Seed {domain} harness\n\nCopied from harness_repo/seeds/{domain}."
        _git(path, "commit", "-q", "--no-verify", "-m", message)
        return cls.open(path)

    @classmethod
    def open(cls, path: Path) -> HarnessRepo:
        """Open an existing harness repo; HarnessError if ``path`` is not one."""
        path = Path(path).resolve()
        if not (path / ".git").is_dir():
            raise HarnessError(
                f"{path} is not a harness repo (no .git directory); create one with "
                "HarnessRepo.create(path, domain)"
            )
        if _git_try(path, "rev-parse", "--verify", "-q", "refs/heads/main^{commit}")[0] != 0:
            raise HarnessError(f"{path} is a git repo without a 'main' branch; not a harness repo")
        if _git_try(path, "cat-file", "-e", "refs/heads/main:harness.yaml")[0] != 0:
            raise HarnessError(f"{path}: branch main has no harness.yaml; not a harness repo")
        _configure(path)
        return cls(path)

    @classmethod
    def clone_line(cls, source: Path, branch: str, dest: Path) -> HarnessRepo:
        """Start a new run line at ``dest``: a clone of ``source`` whose ``branch`` is the new main.

        All history, tags and other branches are kept; the source's own ``main``
        becomes ``parent-main`` when another branch is promoted.  The source is
        recorded as the remote ``parent``.
        """
        src = cls.open(source)
        src.head(f"refs/heads/{branch}")
        dest = Path(dest)
        require_empty(dest, "pick a new directory for the new run line")
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git(dest.parent, "clone", "-q", "--origin", "parent", "--branch", branch, "--",
             str(src.path), str(dest))
        if branch != "main":
            _git(dest, "branch", "-m", branch, "main")
        _git(dest, "branch", "--unset-upstream", "main")
        remote = _git(dest, "for-each-ref", "--format=%(refname:strip=3)", "refs/remotes/parent")
        names = [n for n in remote.splitlines() if n not in ("HEAD", branch)]
        for name in names:
            local = name
            if name == "main":
                local, i = "parent-main", 2
                while local in names:
                    local, i = f"parent-main-{i}", i + 1
            _git(dest, "branch", "--no-track", local, f"refs/remotes/parent/{name}")
        _configure(dest)
        return cls.open(dest)

    # -- reading ---------------------------------------------------------------------

    def read_file(self, ref: str, path: str) -> str:
        """The text of ``path`` in commit ``ref``; HarnessError if absent or not UTF-8."""
        sha = self.head(ref)
        try:
            obj = self._repo.commit(sha).tree / path
        except KeyError:
            raise HarnessError(f"{path} does not exist at {ref} ({sha[:10]})") from None
        if obj.type != "blob":
            raise HarnessError(f"{path} at {ref} ({sha[:10]}) is a {obj.type}, not a file")
        try:
            return obj.data_stream.read().decode("utf-8")
        except UnicodeDecodeError as exc:
            raise HarnessError(f"{path} at {ref} ({sha[:10]}) is not UTF-8 text: {exc}") from None

    def files_in(self, ref: str, folder: str) -> list[str]:
        """The paths of the files directly in ``folder`` (no sub-folders) at commit ``ref``, sorted; [] if none."""
        try:
            tree = self._repo.commit(self.head(ref)).tree / folder
        except KeyError:
            return []
        return sorted(b.path for b in tree.blobs) if tree.type == "tree" else []

    def config(self, ref: str = "main") -> HarnessConfig:
        """``harness.yaml`` at ``ref``, validated; HarnessError names each bad field."""
        where = f"harness.yaml at {ref} ({self.head(ref)[:10]})"
        try:
            data = yaml.safe_load(self.read_file(ref, "harness.yaml"))
        except yaml.YAMLError as exc:
            raise HarnessError(f"{where} is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise HarnessError(f"{where} must be a mapping with domain, tasks and grpo keys")
        try:
            return HarnessConfig.model_validate(data)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                loc = ".".join(str(p) for p in err["loc"]) or "<top level>"
                got = err.get("input")
                shown = f" (got {got!r})" if isinstance(got, str | int | float | bool) else ""
                problems.append(f"{loc}: {err['msg']}{shown}")
            raise HarnessError(f"{where} is invalid: " + "; ".join(problems)) from None

    def log(self, ref: str = "main", n: int = 50) -> list[dict]:
        """The newest ``n`` commits reachable from ``ref``: sha, subject, trailers, date, parents."""
        return [
            {
                "sha": c.hexsha,
                "subject": str(c.summary),
                "trailers": parse_trailers(str(c.message)),
                "date": c.committed_datetime.isoformat(),
                "parents": [p.hexsha for p in c.parents],
            }
            for c in self._repo.iter_commits(self.head(ref), max_count=n)
        ]

    def export(self, ref: str, dest: Path) -> Path:
        """Write the files of commit ``ref`` to ``dest`` (new or empty) via ``git archive``.

        Entries that would land outside ``dest`` (``..`` paths, absolute or escaping
        symlinks) make it fail before anything is written.
        """
        sha = self.head(ref)
        dest = Path(dest)
        require_empty(dest, "export needs a fresh directory")
        buffer = io.BytesIO()
        try:
            self._repo.archive(buffer, treeish=sha, format="tar")
        except git.GitCommandError as exc:  # git itself refuses e.g. a ".." path
            raise HarnessError(f"refusing to export {ref} ({sha[:10]}): {exc.stderr.strip()}") from None
        buffer.seek(0)
        with tarfile.open(fileobj=buffer) as tar:
            members = tar.getmembers()
            for member in members:
                try:
                    tarfile.data_filter(member, str(dest.resolve()))
                except tarfile.FilterError as exc:
                    raise HarnessError(f"refusing to export {ref} ({sha[:10]}): {exc}") from None
            dest.mkdir(parents=True, exist_ok=True)
            tar.extractall(dest, members=members, filter="data")
        return dest.resolve()

    # -- interventions ---------------------------------------------------------------

    def changed_paths(self, branch: str, base: str = "main") -> list[str]:
        """Paths changed on ``branch`` since its merge-base with ``base`` (renames as delete+add)."""
        return sorted({path for _, path, _ in self._changes(branch, base)})

    def contract_violations(self, branch: str) -> list[str]:
        """``"<path>: <why>"`` for each change on ``branch`` that breaks the file contract.

        Breaks: a path outside ``EDITABLE_GLOBS``, a path escaping the repo, a
        symlink or submodule, the deletion of a required file (``HARNESS_FILES``).
        """
        violations = []
        for status, path, mode in self._changes(branch, "main"):
            parts = PurePosixPath(path).parts
            if status == "D" and path in HARNESS_FILES:
                violations.append(f"{path}: required harness file deleted")
            elif path.startswith("/") or ".." in parts or "." in parts:
                violations.append(f"{path}: path escapes the harness repo")
            elif status != "D" and mode == _SYMLINK_MODE:
                violations.append(f"{path}: symlink; only regular files are allowed")
            elif status != "D" and mode == _SUBMODULE_MODE:
                violations.append(f"{path}: submodule; only regular files are allowed")
            elif not is_editable(path):
                violations.append(
                    f"{path}: outside the harness contract (editable: {', '.join(EDITABLE_GLOBS)})"
                )
        return violations

    def tree(self, ref: str) -> str:
        """The tree sha of ``ref``: equal trees hold equal harnesses."""
        return _git(self.path, "rev-parse", f"{self.head(ref)}^{{tree}}").strip()

    def interventions(self) -> list[Intervention]:
        """All ``iv/r<round>-<slug>`` branches, sorted by round then name."""
        history = main_history(self)
        names = _git(self.path, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/iv/")
        found = [read_intervention(self, n, history) for n in names.splitlines() if BRANCH_RE.fullmatch(n)]
        return sorted(found, key=lambda iv: (iv.round, iv.branch))

    def intervention(self, branch: str) -> Intervention:
        """One intervention by branch name; HarnessError if there is no such branch."""
        if not BRANCH_RE.fullmatch(branch) or not self.branch_exists(branch):
            raise HarnessError(f"no intervention branch {branch!r} in {self.path}")
        return read_intervention(self, branch, main_history(self))

    # -- checks ---------------------------------------------------------------------

    def _changes(self, branch: str, base: str) -> list[tuple[str, str, str]]:
        """(status letter, path, new mode) per path changed on ``branch`` since the merge-base."""
        head, base_sha = self.head(branch), self.head(base)
        merge_base = _git(self.path, "merge-base", base_sha, head).strip()
        raw = _git(self.path, "diff", "--raw", "-z", "--no-renames", "--no-abbrev", merge_base, head)
        tokens = [t for t in raw.split("\0") if t]
        changes = []
        for meta, path in zip(tokens[0::2], tokens[1::2]):
            _, new_mode, _, _, status = meta.lstrip(":").split(" ")
            changes.append((status[0], path, new_mode))
        return changes
