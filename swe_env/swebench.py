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

This module reads instances and turns them into specs; ``swe_env.build.import_instances`` saves and checks
them, and ``swe_env.sdist.git_trees`` lays out their trees, as for any spec.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from swe_env.sdist import cache_root
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
