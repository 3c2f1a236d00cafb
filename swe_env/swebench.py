"""SWE-bench-format instances over a local clone become checked tasks.

    python -m meta_agent tasks import-swebench instances.jsonl --repo-path ~/src/astropy

Each instance (``instance_id, repo, base_commit, patch, test_patch, problem_statement,
FAIL_TO_PASS, PASS_TO_PASS``; a JSON list or JSON lines; the two test lists as lists or as
JSON-encoded strings, as the SWE-bench dataset stores them) becomes a git-origin spec saved under
``cache_root()/imported/``: the buggy tree is ``git archive`` of ``base_commit``, the graded test
files are those ``test_patch`` touches (taken from base + test_patch), the gold change is the
files ``patch`` touches.  It is then checked exactly like a shipped spec (three runs each way,
PASS_TO_PASS computed; the instance's own PASS_TO_PASS is only reported).  The task image has
pytest and nothing else: a repository that needs its own dependencies is refused with the
evidence.  ``load_task`` finds imported tasks by id; ``shipped_tasks`` does not list them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import yaml

from swe_env.build import CheckRecord, check_spec
from swe_env.sdist import BuildError, Log, cache_root
from swe_env.spec import Spec, SpecError, load_spec, parse_spec

FIELDS = ("instance_id", "repo", "base_commit", "patch", "test_patch", "problem_statement",
          "FAIL_TO_PASS", "PASS_TO_PASS")


def imported_dir() -> Path:
    return cache_root() / "imported"


def imported_specs() -> list[Spec]:
    """Specs imported on this machine (git origin)."""
    folder = imported_dir()
    return [load_spec(path) for path in sorted(folder.glob("*.yaml"))] if folder.is_dir() else []


def read_instances(path: Path) -> list[tuple[str, dict]]:
    """(where, instance) pairs from a JSON list or JSON-lines file; errors name the file and line."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from exc
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as exc:
            raise SpecError(f"{path}: not valid JSON: {exc}") from exc
        return [(f"{path} item {i}", item) for i, item in enumerate(items)]
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            out.append((f"{path}:{number}", json.loads(line)))
        except ValueError as exc:
            raise SpecError(f"{path}:{number}: not valid JSON: {exc}") from exc
    if not out:
        raise SpecError(f"{path}: no instances in the file")
    return out


def _test_list(value: object, where: str, field: str) -> list[str]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise SpecError(f"{where}: {field} is a string but not a JSON list: {exc}") from exc
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SpecError(f"{where}: {field} must be a list of pytest node ids")
    return value


def patch_files(patch: str) -> list[str]:
    """Files a unified diff leaves in place (created or modified, not deleted)."""
    files, current = [], None
    for line in patch.splitlines():
        if line.startswith("diff --git "):
            current = line.split(" b/", 1)[-1] if " b/" in line else None
            if current:
                files.append(current)
        elif line.startswith("+++ /dev/null") and current in files:
            files.remove(current)
    return files


def spec_from_instance(instance: object, where: str, repo_path: Path, split: str) -> Spec:
    """A git-origin spec for one SWE-bench instance (validated like a hand-written spec)."""
    if not isinstance(instance, dict):
        raise SpecError(f"{where}: an instance is a JSON object, got {type(instance).__name__}")
    missing = [f for f in FIELDS if f not in instance]
    if missing:
        raise SpecError(f"{where}: missing field(s) {missing}")
    task_id = re.sub(r"[^a-z0-9._-]", "-", str(instance["instance_id"]).lower())[:80]
    data = {
        "id": task_id, "package": str(instance["repo"]), "old_version": str(instance["base_commit"]),
        "new_version": "gold", "split": split, "problem_statement": str(instance["problem_statement"]),
        "source_files": patch_files(str(instance["patch"])), "test_files": patch_files(str(instance["test_patch"])),
        "fail_to_pass": _test_list(instance["FAIL_TO_PASS"], where, "FAIL_TO_PASS"),
        "origin": "git", "repo_path": str(repo_path.resolve()), "base_commit": str(instance["base_commit"]),
        "gold_patch": str(instance["patch"]), "test_patch": str(instance["test_patch"]),
    }
    _test_list(instance["PASS_TO_PASS"], where, "PASS_TO_PASS")
    return parse_spec(data, where)


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


def import_instances(path: Path, repo_path: Path, *, split: str = "train",
                     log: Log = print) -> list[tuple[Spec, CheckRecord]]:
    """Save each instance as a spec under ``imported_dir()`` and check it; return (spec, record) pairs."""
    if not (repo_path / ".git").exists():
        raise SpecError(f"--repo-path {repo_path} is not a git clone (no .git); clone the instances' repository")
    specs = [spec_from_instance(item, where, repo_path, split) for where, item in read_instances(path)]
    imported_dir().mkdir(parents=True, exist_ok=True)
    results = []
    for spec in specs:
        data = {k: v for k, v in spec.__dict__.items() if k != "test_requires"}
        data.update({k: list(data[k]) for k in ("source_files", "test_files", "fail_to_pass")})
        (imported_dir() / f"{spec.id}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        results.append((spec, check_spec(spec, log=log)))
    return results
