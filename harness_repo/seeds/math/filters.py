"""Trajectory and group filters of the seed math harness: keep everything.

A filtered-out trajectory (or group) is excluded from the GRPO loss.  Pure
standard library; loaded by the training backends and the backtest runner.
"""

from __future__ import annotations


def keep_trajectory(traj: dict) -> bool:
    """Keep every rollout (the seed has no trajectory filter)."""
    return True


def keep_group(group: list[dict]) -> bool:
    """Keep every GRPO group (the seed has no group filter)."""
    return True
