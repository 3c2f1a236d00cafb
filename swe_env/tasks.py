"""One SWE task: its spec found by id, its buggy sources, gold patch, repos and image.

A task is a spec in ``swe_env/specs/<id>.yaml`` that ``swe_env.build`` has *checked* on this
machine (every FAIL_TO_PASS fails before and passes with the gold change; PASS_TO_PASS computed
from three runs each way).  Check results live in the host cache (``META_AGENT_SWE_CACHE``,
default ``~/.cache/meta_agent/swe``); ``swe_env.checked`` lists the checked tasks and loads one by id.
The grader builds on this module and the check on the grader, so nothing here reads a check record.

    python -m meta_agent tasks build --domain swe      # once: download, build images, check
    from swe_env.checked import shipped_tasks
    for task in shipped_tasks("train"): print(task.id, task.image, len(buggy_sources(task)))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from swe_env.cross_check import shipped_specs
from swe_env.spec import Spec, SpecError


@dataclass(frozen=True)
class SweTask:
    """One checked task."""

    id: str
    package: str
    old_version: str
    new_version: str
    split: str
    """"train" | "heldout"."""
    problem_statement: str
    """Written by us from the changelog and tests, never the gold diff."""
    source_files: tuple[str, ...]
    """Repo-relative files that the gold change edits."""
    test_files: tuple[str, ...]
    """Repo-relative test files of the new release used for grading."""
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    """Computed by the check, never hand-listed."""
    image: str
    """Docker tag of the task image (content-addressed)."""


class TaskNotReady(LookupError):
    """A task is unknown or not checked on this machine; the message says what to run."""


BUILD_HINT = "python -m meta_agent tasks build --domain swe"


def task_from(spec: Spec, pass_to_pass: tuple[str, ...]) -> SweTask:
    """The task a spec describes, with the PASS_TO_PASS its check computed."""
    from swe_env.task_image import image_tag

    return SweTask(
        id=spec.id, package=spec.package, old_version=spec.old_version, new_version=spec.new_version,
        split=spec.split, problem_statement=spec.problem_statement, source_files=spec.source_files,
        test_files=spec.test_files, fail_to_pass=spec.fail_to_pass, pass_to_pass=pass_to_pass,
        image=image_tag(spec),
    )


def registered_dir() -> Path:
    """Where ``tasks check`` keeps a copy of each spec it checked from outside ``swe_env/specs/``."""
    from swe_env.sdist import cache_root

    return cache_root() / "checked-specs"


def registered_specs() -> list[Spec]:
    """Specs checked on this machine from anywhere (``tasks check PATH``), so they can be graded."""
    from swe_env.spec import load_spec

    folder = registered_dir()
    return [load_spec(path) for path in sorted(folder.glob("*.yaml"))] if folder.is_dir() else []


def find_spec(task_id: str) -> Spec:
    """The spec of ``task_id``: shipped, imported from a SWE-bench file, or checked from a path on this machine."""
    from swe_env.swebench import imported_specs

    specs = {spec.id: spec for spec in shipped_specs()}
    if task_id not in specs:
        specs.update({spec.id: spec for spec in [*registered_specs(), *imported_specs()]})
    if task_id not in specs:
        raise TaskNotReady(f"unknown SWE task {task_id!r}; shipped tasks: {sorted(s.id for s in shipped_specs())}")
    return specs[task_id]


def _spec_of(task: SweTask) -> Spec:
    spec = find_spec(task.id)
    from swe_env.task_image import image_tag

    if image_tag(spec) != task.image:
        raise TaskNotReady(f"task {task.id!r} names image {task.image}, but its spec now builds {image_tag(spec)}")
    return spec


def task_repo(task: SweTask) -> Path:
    """The clean *graded* buggy repo of ``task`` (old source, new tests) in the host cache; never shown to a policy."""
    from swe_env.sdist import lay_out
    from swe_env.task_image import image_key

    spec = _spec_of(task)
    return lay_out(spec, image_key(spec)).repo


def agent_repo(task: SweTask) -> Path:
    """The buggy repo of ``task`` as the policy sees it: the old release with its own old tests."""
    from swe_env.sdist import lay_out
    from swe_env.task_image import image_key

    spec = _spec_of(task)
    return lay_out(spec, image_key(spec)).agent_repo


def buggy_sources(task: SweTask) -> dict[str, str]:
    """Path -> text of ``task.source_files`` in the buggy repo (from the host cache)."""
    repo = task_repo(task)
    return {rel: (repo / rel).read_text() if (repo / rel).is_file() else "" for rel in task.source_files}


def gold_patch(task: SweTask) -> str:
    """The gold change as a unified diff (``a/`` ``b/`` prefixes), source files only."""
    return (task_repo(task).parent / "gold.patch").read_text()


def ensure_image(task: SweTask, *, log: Callable[[str], None] = print) -> str:
    """Build the task image offline if it is missing; return its tag."""
    from swe_env.task_image import ensure_built

    return ensure_built(_spec_of(task), log=log)


__all__ = ["SweTask", "SpecError", "TaskNotReady", "agent_repo", "buggy_sources", "ensure_image", "find_spec",
           "gold_patch", "task_from", "task_repo"]
