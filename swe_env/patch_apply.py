"""Applying a policy's patch to a copy of a task's repo, and putting the graded tests back (``swe_env.grade``'s
first step): the patch's text checked, ``git apply``, every test and test-config file restored, new shadowing
modules removed, reflective reach refused (``swe_env.patch_reach``), then the graded release's tests laid in.

    touched = patched_copy(task_repo(task), task.test_files, patch, dest, base=agent_repo(task), refuse_reach=True)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from swe_env.patch_reach import reach_problems

CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "setup.cfg", "pyproject.toml", "tox.ini"})
MAX_PATCH_BYTES = 1 << 20
_SHADOWED = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py"}


class PatchRejected(ValueError):
    """The patch cannot be applied safely; the message says why."""


class ReachRefused(PatchRejected):
    """The patch's own code reaches into the interpreter or the grader (``swe_env.patch_reach``)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"the patch reaches into the interpreter: {problems[:3]}")
        self.problems = problems


_PATH_LINE = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.+?)\s*$")


def _check_patch_text(patch: str) -> None:
    if len(patch.encode()) > MAX_PATCH_BYTES:
        raise PatchRejected(f"patch is larger than {MAX_PATCH_BYTES} bytes")
    for line in patch.splitlines():
        if line.startswith(("GIT binary patch", "Binary files ")):
            raise PatchRejected("binary patches are not accepted")
        if line.startswith(("new file mode 120000", "old mode 120000", "new mode 120000", "deleted file mode 120000")):
            raise PatchRejected("patches that create or change symlinks are not accepted")
        paths = []
        if line.startswith("diff --git "):
            paths = line[len("diff --git "):].split()
        elif match := _PATH_LINE.match(line):
            paths = [match.group(1).split("\t")[0]]
        for path in paths:
            if path == "/dev/null":
                continue
            stripped = path[2:] if path[:2] in ("a/", "b/") else path
            parts = Path(stripped).parts
            if path.startswith("/") or stripped.startswith("/") or ".." in parts or ".git" in parts:
                raise PatchRejected(f"patch path {path!r} points outside the repo or into .git")


def apply_patch(repo: Path, patch: str) -> None:
    """``git apply`` ``patch`` inside ``repo`` (a plain folder); raise PatchRejected when it cannot."""
    _check_patch_text(patch)
    patch_file = repo.parent / "submitted.patch"
    patch_file.write_text(patch if patch.endswith("\n") else patch + "\n")
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent)}  # never a repo above the copy
    proc = subprocess.run(["git", "apply", "--whitespace=nowarn", "-p1", str(patch_file)],
                          cwd=repo, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise PatchRejected(f"git apply failed: {proc.stderr.strip()[-800:]}")
    for path in repo.rglob("*"):
        if path.is_symlink():
            raise PatchRejected(f"patch created a symlink {path.relative_to(repo)}")


def _protected(rel: str, test_files: tuple[str, ...], test_dirs: set[str]) -> bool:
    parts = rel.split("/")
    if rel in test_files or parts[-1] in CONFIG_NAMES:
        return True
    return any("/".join(parts[:i]) in test_dirs for i in range(1, len(parts)))


def restore_tests(original: Path, repo: Path, test_files: tuple[str, ...]) -> list[str]:
    """Put back every test and test-config file, delete new ones; return the files the patch touched."""
    # A folder of tests (tests/, pkg/testing/) is protected whole, fixtures included; a package that
    # merely holds a test module next to its source is not, or the fix itself would be reverted.
    test_dirs = {str(Path(rel).parent) for rel in test_files
                 if any(part.startswith("test") for part in Path(rel).parent.parts)}
    touched = []
    before = {str(p.relative_to(original)) for p in original.rglob("*") if p.is_file()}
    after = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
    for rel in sorted(before | after):
        if _protected(rel, test_files, test_dirs):
            if rel not in after or rel not in before or (original / rel).read_bytes() != (repo / rel).read_bytes():
                touched.append(rel)
                if rel in before:
                    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(original / rel, repo / rel)
                else:
                    (repo / rel).unlink()
        elif rel not in before and "/" not in rel and Path(rel).stem in _SHADOWED:
            touched.append(rel)  # a new top-level json.py/pytest.py would shadow what the runner imports
            (repo / rel).unlink()
    for rel in after - before:
        top = rel.split("/")[0]
        if "/" in rel and top in _SHADOWED and (repo / top).exists() and not (original / top).exists():
            touched.append(top + "/")
            shutil.rmtree(repo / top)
    return touched


def patched_copy(original: Path, test_files: tuple[str, ...], patch: str, dest: Path, *,
                 base: Path | None = None, refuse_reach: bool = False) -> list[str]:
    """The graded repo ``original`` at ``dest`` with ``patch`` applied; return the test files the patch touched.

    The patch was written against ``base`` (the repo the policy saw, with the old release's tests;
    ``original`` itself when not given): it is applied there, every test file it touched is put
    back (and named), and then ``original``'s test files — the graded ones — are laid in.  With
    ``refuse_reach``, source the patch adds or changes that reaches into the interpreter raises ReachRefused.
    """
    base = base or original
    shutil.copytree(base, dest, symlinks=True)
    apply_patch(dest, patch)
    touched = restore_tests(base, dest, test_files)
    if refuse_reach and (problems := reach_problems(base, dest)):  # only what survives the restore is the patch's
        raise ReachRefused(problems)
    if base != original:
        lay_graded_tests(original, base, dest, test_files)
    return touched


def lay_graded_tests(original: Path, base: Path, repo: Path, test_files: tuple[str, ...]) -> None:
    """Make every protected (test or test-config) file of ``repo`` what it is in the graded ``original``."""
    test_dirs = {str(Path(rel).parent) for rel in test_files
                 if any(part.startswith("test") for part in Path(rel).parent.parts)}
    graded = {str(p.relative_to(original)) for p in original.rglob("*") if p.is_file()}
    seen = {str(p.relative_to(base)) for p in base.rglob("*") if p.is_file()}
    for rel in sorted(graded | seen):
        if not _protected(rel, test_files, test_dirs):
            continue
        if rel in graded:
            (repo / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(original / rel, repo / rel)
        elif (repo / rel).exists():
            (repo / rel).unlink()
