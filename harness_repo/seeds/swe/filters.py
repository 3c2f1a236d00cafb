"""Trajectory and group filters of the seed SWE harness.

An agent-mode trajectory that stopped on a step, time or context limit, rather than by
submitting, is masked out of the loss instead of being trained on as a failure (DeepSWE's
"compact filtering"): the policy was not wrong, it ran out of room.  Patch-mode answers carry
no exit status and are all kept (``grpo.mask_truncated`` masks cut-off answers if wanted).
"""

from __future__ import annotations

LIMIT_EXITS = ("step_limit", "time_limit", "context_limit")


def keep_trajectory(traj: dict) -> bool:
    """False for an agent trajectory that ended on a limit."""
    execution = (traj.get("extra_info") or {}).get("execution") or {}
    return execution.get("exit_status") not in LIMIT_EXITS


def keep_group(group: list[dict]) -> bool:
    """Keep every GRPO group."""
    return True
