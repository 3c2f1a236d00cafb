"""Task specs: the small YAML files in ``swe_env/specs/`` that name a real release pair.

    id: sqlparse-0.5.5-begin-transaction
    package: sqlparse
    old_version: 0.5.4          # the buggy release: its source is the repo the policy sees
    new_version: 0.5.5          # the fixed release: its test files grade, its source is the gold change
    split: train                # train | heldout
    source_files: [sqlparse/engine/statement_splitter.py]
    test_files: [tests/test_split.py]
    fail_to_pass: [tests/test_split.py::test_split_begin_transaction]
    test_requires: []           # optional: pinned pip requirements the tests need besides pytest
    problem_statement: |
      Written by us from the changelog and the tests, never from the diff.

A spec is input a user may get wrong: every problem is a ``SpecError`` naming the file and field.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

SPECS_DIR = Path(__file__).parent / "specs"
SPLITS = ("train", "heldout")
_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,80}$")
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9._+-]+$")


class SpecError(ValueError):
    """A spec file is unusable; the message names the file, the field and the fix."""


@dataclass(frozen=True)
class Spec:
    """One task spec as written (PASS_TO_PASS is not in it: the check computes it)."""

    id: str
    package: str
    old_version: str
    new_version: str
    split: str
    problem_statement: str
    source_files: tuple[str, ...]
    test_files: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    test_requires: tuple[str, ...] = ()
    origin: str = "pypi"
    """"pypi": two released sdists; "git": a SWE-bench instance over a local clone (``swe_env.swebench``)."""
    repo_path: str = ""
    """git origin: the local clone."""
    base_commit: str = ""
    """git origin: the buggy commit."""
    gold_patch: str = ""
    """git origin: the instance's ``patch`` (the gold change)."""
    test_patch: str = ""
    """git origin: the instance's ``test_patch`` (its test files form the graded tests)."""

    def content_hash(self) -> str:
        """A hash of everything the spec says (part of the check's cache key)."""
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]


def _rel_path(value: object, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(f"{where}: expected a repo-relative path, got {value!r}")
    parts = Path(value).parts
    if value.startswith("/") or ".." in parts or "\\" in value:
        raise SpecError(f"{where}: {value!r} must be a relative path inside the repo (no '/', '..' or '\\')")
    return value


def _str_list(data: dict, key: str, where: str, *, required: bool = True) -> tuple[str, ...]:
    value = data.get(key, None if required else [])
    if not isinstance(value, list) or (required and not value):
        raise SpecError(f"{where}: field {key!r} must be a non-empty list" if required
                        else f"{where}: field {key!r} must be a list")
    if not all(isinstance(item, str) and item for item in value):
        raise SpecError(f"{where}: every item of {key!r} must be a non-empty string")
    return tuple(value)


def parse_spec(data: object, where: str) -> Spec:
    """Validate a spec's parsed YAML; ``where`` names it in errors."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: a spec is a mapping of fields, got {type(data).__name__}")
    fields = ("id", "package", "old_version", "new_version", "split", "problem_statement")
    for key in fields:
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise SpecError(f"{where}: field {key!r} is missing or not a non-empty string")
    git_fields = ("repo_path", "base_commit", "gold_patch", "test_patch")
    lists = ("source_files", "test_files", "fail_to_pass", "test_requires")
    unknown = set(data) - {*fields, *git_fields, *lists, "origin"}
    if unknown:
        raise SpecError(f"{where}: unknown field(s) {sorted(unknown)} (PASS_TO_PASS is computed, never listed)")
    if not _ID.match(data["id"]):
        raise SpecError(f"{where}: id {data['id']!r} must be lowercase letters, digits, '.', '_' or '-'")
    if data["split"] not in SPLITS:
        raise SpecError(f"{where}: split {data['split']!r} must be one of {SPLITS}")
    if data["old_version"] == data["new_version"]:
        raise SpecError(f"{where}: old_version and new_version are both {data['old_version']!r}")
    sources = tuple(_rel_path(p, f"{where}: source_files") for p in _str_list(data, "source_files", where))
    tests = tuple(_rel_path(p, f"{where}: test_files") for p in _str_list(data, "test_files", where))
    overlap = set(sources) & set(tests)
    if overlap:
        raise SpecError(f"{where}: {sorted(overlap)} listed both as source and as test files")
    f2p = _str_list(data, "fail_to_pass", where)
    for node in f2p:
        if node.split("::")[0] not in tests:
            raise SpecError(f"{where}: fail_to_pass {node!r} is not in one of the test_files {list(tests)}")
    requires = _str_list(data, "test_requires", where, required=False)
    for req in requires:
        if not _REQUIREMENT.match(req):
            raise SpecError(f"{where}: test_requires {req!r} must be pinned as NAME==VERSION")
    origin = data.get("origin", "pypi")
    if origin not in ("pypi", "git"):
        raise SpecError(f"{where}: origin {origin!r} must be 'pypi' or 'git'")
    if origin == "git":
        for key in git_fields:
            if not isinstance(data.get(key), str) or not data[key].strip():
                raise SpecError(f"{where}: a git-origin spec needs a non-empty string field {key!r}")
        if not re.fullmatch(r"[0-9a-f]{7,40}", data["base_commit"]):
            raise SpecError(f"{where}: base_commit {data['base_commit']!r} is not a hex commit id")
    elif set(data) & set(git_fields):
        raise SpecError(f"{where}: fields {sorted(set(data) & set(git_fields))} belong to origin: git only")
    return Spec(
        origin=origin, **{key: data.get(key, "") for key in git_fields},
        id=data["id"], package=data["package"], old_version=data["old_version"], new_version=data["new_version"],
        split=data["split"], problem_statement=data["problem_statement"].strip() + "\n",
        source_files=sources, test_files=tests, fail_to_pass=f2p, test_requires=requires,
    )


def load_spec(path: Path) -> Spec:
    """Read and validate one spec file."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise SpecError(f"{path}: not valid YAML: {exc}") from exc
    return parse_spec(data, str(path))
