"""Trajectory and group filters of the seed code harness: keep everything.

A known gap: an answer cut off by the generation budget (``truncated``) is trained on as a failure;
``grpo.mask_truncated`` or a filter here could mask it instead.
"""

from __future__ import annotations


def keep_trajectory(traj: dict) -> bool:
    """Keep every rollout."""
    return True


def keep_group(group: list[dict]) -> bool:
    """Keep every GRPO group."""
    return True
