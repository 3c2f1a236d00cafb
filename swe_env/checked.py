"""The checked SWE tasks: those whose check (``swe_env.build``) passed on this machine.

    python -m meta_agent tasks build --domain swe      # once: download, build images, check
    from swe_env.checked import load_task, shipped_tasks
    for task in shipped_tasks("train"): print(task.id, task.image)
    task = load_task("sqlparse-0.5.5-begin-transaction")   # TaskNotReady saying what to run, if unchecked
"""

from __future__ import annotations

from swe_env.build import cached_record
from swe_env.cross_check import shipped_specs
from swe_env.tasks import BUILD_HINT, SweTask, TaskNotReady, find_spec, task_from


def shipped_tasks(split: str | None = None) -> list[SweTask]:
    """The shipped tasks that are checked on this machine, optionally of one split."""
    if split is not None and split not in ("train", "heldout"):
        raise ValueError(f"split must be 'train' or 'heldout', got {split!r}")
    tasks = []
    for spec in shipped_specs():
        record = cached_record(spec)
        if record is not None and record.checked and split in (None, spec.split):
            tasks.append(task_from(spec, tuple(record.pass_to_pass)))
    return tasks


def load_task(task_id: str) -> SweTask:
    """The checked task ``task_id``; a clear error if it is unknown or not checked yet."""
    spec = find_spec(task_id)
    record = cached_record(spec)
    if record is None:
        raise TaskNotReady(f"SWE task {task_id!r} is not checked on this machine; run `{BUILD_HINT}`")
    if not record.checked:
        raise TaskNotReady(f"SWE task {task_id!r} was refused by its check: {record.reason}")
    return task_from(spec, tuple(record.pass_to_pass))
