"""The task API: checked SWE tasks, their buggy sources, gold patches and images.

A task is a spec in ``swe_env/specs/<id>.yaml`` that ``swe_env.build`` has *checked* on this
machine (every FAIL_TO_PASS fails before and passes with the gold change; PASS_TO_PASS computed
from three runs each way).  Check results live in the host cache (``META_AGENT_SWE_CACHE``,
default ``~/.cache/meta_agent/swe``).

    python -m meta_agent tasks build --domain swe      # once: download, build images, check
    from swe_env.tasks import shipped_tasks
    for task in shipped_tasks("train"): print(task.id, task.image)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


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


def shipped_tasks(split: str | None = None) -> list[SweTask]:
    """The shipped tasks that are checked on this machine, optionally of one split."""
    raise NotImplementedError


def load_task(task_id: str) -> SweTask:
    """The checked task ``task_id``; a clear error if it is unknown or not checked yet."""
    raise NotImplementedError


def buggy_sources(task: SweTask) -> dict[str, str]:
    """Path -> text of ``task.source_files`` in the buggy repo (from the host cache)."""
    raise NotImplementedError


def gold_patch(task: SweTask) -> str:
    """The gold change as a unified diff (``a/`` ``b/`` prefixes), source files only."""
    raise NotImplementedError


def ensure_image(task: SweTask, *, log: Callable[[str], None] = print) -> str:
    """Build the task image offline if it is missing; return its tag."""
    raise NotImplementedError
