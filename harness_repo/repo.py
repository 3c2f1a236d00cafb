"""The harness repo: one git repository per run line, handled with GitPython and the git CLI.

Interventions are branches ``iv/r<round>-<slug>`` worked on in their own
worktrees; a passing one is merged ``--no-ff`` into ``main`` with the evidence as
trailers, a failing one is kept and tagged ``verdict/<branch>``; undoing a merge
adds a new commit, so nothing is ever lost (no ``reset --hard``, no branch
deletion)::

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
import re
import shutil
import tarfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

import git
import yaml
from pydantic import ValidationError

from harness_repo.contract import EDITABLE_GLOBS, HARNESS_FILES, HarnessConfig
from harness_repo.failpoints import failpoint
from harness_repo.gitcmd import HarnessError
from harness_repo.gitcmd import git_try as _git_try
from harness_repo.gitcmd import run_git as _git
from harness_repo.history import BRANCH_RE as _BRANCH_RE
from harness_repo.history import Intervention, main_history, read_intervention
from harness_repo.trailers import (
    INTERVENTION,
    RESTORES,
    REVERTS_INTERVENTION,
    VERDICT,
    TrailerValues,
    format_trailers,
    parse_trailers,
)

SEEDS_DIR = Path(__file__).parent / "seeds"
COMMITTER = ("meta-agent", "meta-agent@localhost")
# Bytecode and test caches appear when harness files are imported in a worktree;
# they must never be staged (they would also violate the contract).
_EXCLUDES = ("__pycache__/", "*.pyc", ".pytest_cache/")
_SYMLINK_MODE, _SUBMODULE_MODE = "120000", "160000"


@dataclass(frozen=True)
class Worktree:
    """A checked-out intervention branch in its own directory."""

    path: Path
    branch: str
    base_commit: str


def _require_empty(path: Path, what: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise HarnessError(f"{path} already exists and is not an empty directory: {what}")


def _configure(path: Path) -> None:
    """Committer identity (a machine may have no global git config) and local excludes."""
    _git(path, "config", "user.name", COMMITTER[0])
    _git(path, "config", "user.email", COMMITTER[1])
    exclude = path / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    missing = [p for p in _EXCLUDES if p not in lines]
    if missing:
        exclude.write_text("\n".join([*lines, *missing]) + "\n")


def sanitise_slug(slug: str) -> str:
    """``"Boxed answers!"`` -> ``"boxed-answers"`` (lowercase ``[a-z0-9-]``, at most 48 chars)."""
    clean = re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-")[:48].strip("-")
    if not clean:
        raise HarnessError(f"slug {slug!r} has no letters or digits; name the intervention")
    return clean


def _is_editable(path: str) -> bool:
    # fnmatch's "*" crosses "/", so compare component by component.
    parts = path.split("/")
    for pattern in EDITABLE_GLOBS:
        pattern_parts = pattern.split("/")
        if len(parts) == len(pattern_parts) and all(
            fnmatchcase(p, q) for p, q in zip(parts, pattern_parts)
        ):
            return True
    return False


class HarnessRepo:
    """A harness git repository (main working tree at ``path``)."""

    def __init__(self, path: Path) -> None:
        """Use :meth:`create`, :meth:`open` or :meth:`clone_line`; they validate the repo."""
        self.path = Path(path).resolve()
        self._repo = git.Repo(self.path)

    # -- creating and opening ---------------------------------------------------------

    @classmethod
    def create(cls, path: Path, domain: str) -> HarnessRepo:
        """Copy ``seeds/<domain>`` to ``path`` (new or empty), ``git init -b main``, commit it."""
        seed = SEEDS_DIR / domain
        if not (seed / "harness.yaml").is_file():
            available = sorted(p.name for p in SEEDS_DIR.iterdir() if (p / "harness.yaml").is_file())
            raise HarnessError(f"no seed harness for domain {domain!r}; available: {available}")
        path = Path(path)
        _require_empty(path, "pick a new directory, or HarnessRepo.open() an existing harness")
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
        _require_empty(dest, "pick a new directory for the new run line")
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

    def head(self, ref: str = "main") -> str:
        """The commit sha ``ref`` points to (branch, tag, sha or ``main~1``-style expression)."""
        status, out, _ = _git_try(self.path, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        if status != 0:
            raise HarnessError(f"{ref!r} does not name a commit in {self.path}")
        return out.strip()

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

    def message(self, ref: str) -> str:
        """The full commit message of ``ref``."""
        return str(self._repo.commit(self.head(ref)).message)

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
        _require_empty(dest, "export needs a fresh directory")
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

    def start_intervention(
        self, round: int, slug: str, base: str = "main", worktree_root: Path | None = None
    ) -> Worktree:
        """Create branch ``iv/r<round>-<slug>`` at ``base`` and check it out in a new worktree.

        The worktree goes to ``worktree_root/<branch with / -> _>``, by default under
        a ``<repo>.worktrees`` directory next to the repo.
        """
        if round < 0:
            raise HarnessError(f"round must be >= 0, got {round}")
        branch = f"iv/r{round}-{sanitise_slug(slug)}"
        if self._branch_exists(branch):
            raise HarnessError(f"branch {branch} already exists; choose another slug")
        base_commit = self.head(base)
        root = Path(worktree_root) if worktree_root else self.path.parent / f"{self.path.name}.worktrees"
        path = root / branch.replace("/", "_")
        _require_empty(path, "remove the stale worktree directory or choose another slug")
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
        outside = [p for p in files if not _is_editable(p)]
        if outside:
            editable = ", ".join(EDITABLE_GLOBS)
            raise HarnessError(f"{outside} are outside the harness contract ({editable})")
        if not message.strip():
            raise HarnessError("commit message is empty; say what the change does")
        self._require_clean_main()
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
            elif not _is_editable(path):
                violations.append(
                    f"{path}: outside the harness contract (editable: {', '.join(EDITABLE_GLOBS)})"
                )
        return violations

    def merge(self, branch: str, evidence: dict[str, TrailerValues], summary: str) -> str:
        """Merge ``branch`` into main with ``--no-ff``; the message is ``summary`` + evidence trailers.

        On a conflict the merge is aborted and main is left as it was.  Returns the merge commit.
        """
        self.head(f"refs/heads/{branch}")
        self._require_clean_main()
        if self._is_ancestor(f"refs/heads/{branch}", "main"):
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

    def tree(self, ref: str) -> str:
        """The tree sha of ``ref``: equal trees hold equal harnesses."""
        return _git(self.path, "rev-parse", f"{self.head(ref)}^{{tree}}").strip()

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
        commit = self._repo.commit(sha)
        branch = (parse_trailers(str(commit.message)).get(INTERVENTION) or [None])[0]
        if len(commit.parents) != 2 or branch is None:
            raise HarnessError(
                f"{merge_commit} is not an intervention merge (no {INTERVENTION} trailer)"
            )
        if not self._is_ancestor(sha, "main"):
            raise HarnessError(f"{merge_commit} is not on main; only merges into main can be reverted")
        if branch in main_history(self).reverted:
            raise HarnessError(f"{branch} has already been reverted")
        self._require_clean_main()
        status, out, err = _git_try(self.path, "revert", "--no-commit", "-m", "1", sha)
        if status != 0 or _git_try(self.path, "diff", "--cached", "--quiet")[0] == 0:
            _git_try(self.path, "revert", "--abort")
            why = err.strip() or out.strip() or "the revert changes nothing"
            raise HarnessError(f"cannot revert {branch} ({why}); main is unchanged, use restore()")
        extra = {REVERTS_INTERVENTION: branch, "Reverts-Merge": sha, **(trailers or {})}
        message = f"Revert intervention {branch}\n\n{reason.strip()}\n\n{format_trailers(extra)}"
        _git(self.path, "commit", "-q", "--no-verify", "-m", message)
        return self.head("main")

    def restore(
        self, good_commit: str, reason: str, trailers: dict[str, TrailerValues] | None = None
    ) -> str:
        """Add a commit on main whose tree equals ``good_commit``'s (an earlier main state); its sha.

        Interventions merged after ``good_commit`` get ``Reverts-Intervention`` trailers.
        The commit is made even when the files already match, so the reason is recorded.
        """
        good, old = self.head(good_commit), self.head("main")
        if not self._is_ancestor(good, old):
            raise HarnessError(
                f"{good_commit} is not in main's history; restore only to an earlier main"
            )
        self._require_clean_main()
        history = main_history(self)
        undone = [
            b for b, m in history.merged.items()
            if b not in history.reverted and not self._is_ancestor(m, good)
        ]
        extra = dict(trailers or {})
        given = extra.pop(REVERTS_INTERVENTION, None)
        given_list = [given] if isinstance(given, str) else list(given or [])
        block = format_trailers({RESTORES: good, REVERTS_INTERVENTION: undone + given_list, **extra})
        message = f"Restore harness to {good[:10]}\n\n{reason.strip()}\n\n{block}"
        new = _git(self.path, "commit-tree", f"{good}^{{tree}}", "-p", old, "-m", message).strip()
        _git(self.path, "merge", "--ff-only", "-q", new)
        return new

    def interventions(self) -> list[Intervention]:
        """All ``iv/r<round>-<slug>`` branches, sorted by round then name."""
        history = main_history(self)
        names = _git(self.path, "for-each-ref", "--format=%(refname:strip=2)", "refs/heads/iv/")
        found = [read_intervention(self, n, history) for n in names.splitlines() if _BRANCH_RE.fullmatch(n)]
        return sorted(found, key=lambda iv: (iv.round, iv.branch))

    def intervention(self, branch: str) -> Intervention:
        """One intervention by branch name; HarnessError if there is no such branch."""
        if not _BRANCH_RE.fullmatch(branch) or not self._branch_exists(branch):
            raise HarnessError(f"no intervention branch {branch!r} in {self.path}")
        return read_intervention(self, branch, main_history(self))

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
        for marker, command in (("MERGE_HEAD", "merge"), ("REVERT_HEAD", "revert"), ("CHERRY_PICK_HEAD", "cherry-pick")):
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
            if self._is_ancestor(head, "main") and not self._tag_exists(f"verdict/{branch}") \
                    and branch not in main_history(self).merged:
                _git(self.path, "branch", "-D", branch)
                found.append(f"git: deleted {branch}, created without a commit before the stop; "
                             "its agent may propose it again")
        return found

    # -- internals -------------------------------------------------------------------

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

    def _require_clean_main(self) -> None:
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

    def _is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return _git_try(self.path, "merge-base", "--is-ancestor", ancestor, descendant)[0] == 0

    def _branch_exists(self, branch: str) -> bool:
        return _git_try(self.path, "rev-parse", "--verify", "-q", f"refs/heads/{branch}")[0] == 0

    def _tag_exists(self, tag: str) -> bool:
        return _git_try(self.path, "rev-parse", "--verify", "-q", f"refs/tags/{tag}")[0] == 0
