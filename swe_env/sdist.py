"""Release sdists in the host cache, and the buggy repo and gold patch laid out from two of them.

    old, new = fetch_release("sqlparse", "0.5.4"), fetch_release("sqlparse", "0.5.5")
    layout = lay_out(spec)         # cache/tasks/<id>/<key>/{agent_repo, repo, gold.patch}

The *agent repo* is the old release's tree as released, its old tests included: it is what the
policy sees (the task image's ``/repo``, the sources in patch-mode prompts).  The *graded repo* is
the same tree with the new release's ``test_files`` laid over it, as SWE-bench applies the test
patch only at grading: the policy never reads the tests it is graded by.  The gold patch is
``git diff`` of ``source_files`` only.  Everything lives under ``cache_root()``
(``META_AGENT_SWE_CACHE``, default ``~/.cache/meta_agent/swe``), never in an image.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sandboxes.image import cache_dir
from swe_env.spec import Spec

CACHE_ENV = "META_AGENT_SWE_CACHE"
Log = Callable[[str], None]


class BuildError(RuntimeError):
    """A task cannot be built or is refused; the message carries the evidence."""


def cache_root() -> Path:
    """The host cache for sdists, laid-out repos and check results."""
    return Path(os.environ.get(CACHE_ENV) or cache_dir() / "swe")


def fetch_release(package: str, version: str, *, log: Log = print) -> Path:
    """The sdist of ``package==version`` (downloaded with pip once, then from the cache)."""
    folder = cache_root() / "sdists" / package.lower() / version
    found = [p for p in folder.glob("*") if p.name.endswith((".tar.gz", ".zip"))] if folder.exists() else []
    if found:
        return found[0]
    log(f"pip download --no-binary :all: {package}=={version}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{version}-", dir=folder.parent))
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         "--no-cache-dir", "--dest", str(partial), f"{package}=={version}"],
        capture_output=True, text=True,
    )
    if proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise BuildError(f"pip could not download the sdist of {package}=={version}:\n{tail}")
    publish(partial, folder)
    found = [p for p in folder.glob("*") if p.name.endswith((".tar.gz", ".zip"))]
    if not found:
        raise BuildError(f"pip downloaded no sdist for {package}=={version} into {folder}")
    return found[0]


def publish(partial: Path, final: Path) -> None:
    """Rename a finished folder into place; if another process got there first, keep theirs."""
    try:
        partial.rename(final)
    except OSError:
        if not final.exists():
            raise
        shutil.rmtree(partial, ignore_errors=True)


def unpack(archive: Path, dest: Path) -> Path:
    """Extract an sdist (no links, nothing outside ``dest``) and return its single top folder."""
    dest.mkdir(parents=True, exist_ok=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.startswith("/") or ".." in Path(name).parts:
                    raise BuildError(f"{archive.name}: member {name!r} would land outside the tree")
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tf:
            members = [m for m in tf.getmembers() if m.isfile() or m.isdir()]  # links and devices dropped
            for member in members:
                if member.name.startswith("/") or ".." in Path(member.name).parts:
                    raise BuildError(f"{archive.name}: member {member.name!r} would land outside the tree")
                member.mode = 0o755 if member.isdir() else 0o644
            tf.extractall(dest, members=members)
    tops = [p for p in dest.iterdir()]
    if len(tops) != 1 or not tops[0].is_dir():
        raise BuildError(f"{archive.name}: expected one top-level folder, found {[p.name for p in tops]}")
    return tops[0]


@dataclass(frozen=True)
class Layout:
    """A task's files in the host cache."""

    root: Path
    repo: Path
    """The graded buggy repo: old source + the new release's test files (never shown to the policy)."""
    gold_patch: Path
    agent_repo: Path
    """The buggy repo as the policy sees it: the old release, its own old tests."""


def lay_out(spec: Spec, key: str, *, log: Log = print) -> Layout:
    """Build (once per ``key``) the buggy repo and the gold patch of ``spec`` in the cache."""
    sources = hashlib.sha256("\n".join(spec.source_files).encode()).hexdigest()[:8]
    root = cache_root() / "tasks" / spec.id / f"{key}-{sources}"  # the gold patch depends on source_files
    layout = Layout(root=root, repo=root / "repo", gold_patch=root / "gold.patch", agent_repo=root / "agent_repo")
    if layout.gold_patch.exists() and layout.repo.is_dir() and layout.agent_repo.is_dir():
        return layout
    root.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=root.parent))
    try:
        old, new = _release_trees(spec, work, log)
        _require_files(spec, old, new)
        repo = work / "repo"
        shutil.copytree(old, repo, symlinks=False)
        shutil.copytree(old, work / "agent_repo", symlinks=False)
        for rel in spec.test_files:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(new / rel, repo / rel)
        patch = diff_files(old, new, spec.source_files)
        if not patch.strip():
            raise BuildError(f"{spec.id}: source_files {list(spec.source_files)} are identical in "
                             f"{spec.old_version} and {spec.new_version}: there is no gold change")
        (work / "gold.patch").write_text(patch)
        shutil.rmtree(work / "old")
        shutil.rmtree(work / "new")
        if root.exists() and not (root / "gold.patch").exists():
            shutil.rmtree(root)  # a damaged layout (a complete one is only ever renamed into place)
        publish(work, root)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return layout


def _release_trees(spec: Spec, work: Path, log: Log) -> tuple[Path, Path]:
    """The buggy and the fixed tree of ``spec``, unpacked under ``work``."""
    if spec.origin == "git":
        return git_trees(spec, work)
    old_sdist = fetch_release(spec.package, spec.old_version, log=log)
    new_sdist = fetch_release(spec.package, spec.new_version, log=log)
    return unpack(old_sdist, work / "old"), unpack(new_sdist, work / "new")


def git_trees(spec: Spec, work: Path) -> tuple[Path, Path]:
    """The buggy tree (``git archive`` of the base commit) and the fixed one (+ test_patch + patch)."""
    repo = Path(spec.repo_path)
    if not (repo / ".git").exists():
        raise BuildError(f"{spec.id}: --repo-path {repo} is not a git clone")
    old, new = work / "old", work / "new"
    old.mkdir(parents=True)
    archive = work / "base.tar"
    with archive.open("wb") as out:
        proc = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", spec.base_commit],
                              stdout=out, stderr=subprocess.PIPE, text=False)
    if proc.returncode != 0:
        raise BuildError(f"{spec.id}: git archive {spec.base_commit} failed in {repo}: "
                         f"{proc.stderr.decode(errors='replace').strip()} (fetch the commit into the clone)")
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
        for member in members:
            member.mode = 0o755 if member.isdir() else 0o644
        tar.extractall(old, members=members)
    archive.unlink()
    shutil.copytree(old, new)
    for name, patch in (("test_patch", spec.test_patch), ("patch", spec.gold_patch)):
        (work / f"{name}.diff").write_text(patch if patch.endswith("\n") else patch + "\n")
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(work)}
        proc = subprocess.run(["git", "apply", "--whitespace=nowarn", str(work / f"{name}.diff")],
                              cwd=new, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise BuildError(f"{spec.id}: the instance's {name} does not apply to {spec.base_commit}: "
                             f"{proc.stderr.strip()[-500:]}")
    return old, new


def _require_files(spec: Spec, old: Path, new: Path) -> None:
    missing_tests = [rel for rel in spec.test_files if not (new / rel).is_file()]
    if missing_tests:
        raise BuildError(
            f"{spec.id}: the {'test_patch' if spec.origin == 'git' else 'sdist'} of {spec.package}=={spec.new_version} "
            f"lacks the test files {missing_tests}; pick a release whose sdist carries its tests, or fix test_files"
        )
    missing_sources = [rel for rel in spec.source_files if not (new / rel).is_file()]
    if missing_sources:
        raise BuildError(f"{spec.id}: {spec.package}=={spec.new_version} has no source file(s) {missing_sources}")


def diff_files(old: Path, new: Path, files: tuple[str, ...]) -> str:
    """``git diff`` of ``files`` between two trees, with ``a/`` ``b/`` prefixes (a file may be new)."""
    with tempfile.TemporaryDirectory(prefix="gold-") as tmp:
        for side, tree in (("a", old), ("b", new)):
            (Path(tmp) / side).mkdir()
            for rel in files:
                if (tree / rel).is_file():
                    (Path(tmp) / side / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(tree / rel, Path(tmp) / side / rel)
        proc = subprocess.run(["git", "diff", "--no-index", "--no-prefix", "--no-color", "--no-ext-diff", "a", "b"],
                              cwd=tmp, capture_output=True, text=True)
    if proc.returncode not in (0, 1):
        raise BuildError(f"git diff failed: {proc.stderr.strip()}")
    return proc.stdout
