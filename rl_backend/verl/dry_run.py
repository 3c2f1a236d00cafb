"""``--dry-run`` of a verl round: the exact command, one override per line, the plan's size and the verdict.

    report = dry_run_report(head, overrides, knobs, options, validation)
    print(report); sys.exit(0 if report.ok else 1)
"""

from __future__ import annotations

import shlex
from typing import Any

from rl_backend.verl.config import LaunchOptions


class DryRun(str):
    """``dry_run``'s report; ``ok`` is False when its validation says INVALID (``--dry-run`` then exits 1)."""

    ok: bool

    def __new__(cls, text: str, ok: bool) -> DryRun:
        report = super().__new__(cls, text)
        report.ok = ok
        return report


def dry_run_report(head: str, overrides: list[str], knobs: Any, options: LaunchOptions, validation: Any,
                   notes: tuple[str, ...] = ()) -> DryRun:
    """The report of a round that would run ``head`` with ``overrides``; ``validation`` is a ``Validation``;
    ``notes`` (such as a training mode that differs from the exam's) are printed after the plan."""
    lines = [f"command: {head} \\", *(f"    {shlex.quote(o)} \\" for o in overrides[:-1]),
             f"    {shlex.quote(overrides[-1])}", "", "overrides:", *overrides, "",
             f"plan: {plan_size(knobs, options)}", *notes, "", f"validation: {validation.describe()}"]
    return DryRun("\n".join(lines), ok=validation.ok)


def plan_size(knobs: Any, options: LaunchOptions) -> str:
    """What one round asks of the GPUs: trajectories per step and round, and the most tokens one step generates."""
    per_step = knobs.prompts_per_step * knobs.group_size
    tokens = per_step * knobs.max_completion_length
    gpus = options.gpus * options.nodes
    return (f"{knobs.steps_per_round} steps x {knobs.prompts_per_step} prompts x {knobs.group_size} = "
            f"{per_step} trajectories per step, {per_step * knobs.steps_per_round} per round; at most "
            f"{tokens:,} response tokens per step ({tokens // gpus:,} per GPU on {gpus}), prompts up to "
            f"{knobs.max_prompt_length} tokens each")
