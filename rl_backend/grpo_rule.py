"""The one GRPO rule for trajectories the harness does not keep, on every backend.

A harness filter (``keep_trajectory``, ``keep_group``, dynamic sampling, truncation masking, an
error) says a trajectory is no evidence about its task.  The rule:

1. **A dropped trajectory leaves its group's baseline and the loss.**  Its reward does not move the
   mean or the standard deviation its group's kept members are compared with.
2. **The kept members of a group get** ``(r - mean) / (std + 1e-6)`` over the kept rewards, ``std`` the
   unbiased (n-1) standard deviation -- verl 0.9.1's ``compute_grpo_outcome_advantage`` with
   ``norm_adv_by_std_in_grpo=True``, run on the kept members only.
3. **A group left with one kept member trains nothing:** its advantage is 0 and it leaves the loss.
   (verl would hand a lone member mean 0 and std 1, i.e. its raw reward as advantage, which no
   comparison supports; TRL would hand it NaN, zeroed.)  It stays in the archive as the harness kept it.
4. **A group left empty trains nothing**; a batch in which nothing trains fails the step.

The verl sampler (``rl_backend.verl.sampler``) applies 1 and 3 by removing those trajectories from the
batch before verl computes advantages, so verl's own code computes 2.  The local backend
(``rl_backend.local_trainer``) recomputes TRL's advantages with :func:`group_advantages` and zeroes the
loss mask of every trajectory :func:`trains` rejects.  ``tests/test_verl_advantage_parity.py`` runs verl's
code and this one on the same rewards and masks.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence

EPSILON = 1e-6
"""verl's ``compute_grpo_outcome_advantage`` default."""


def trains(groups: Sequence[Hashable], keep: Sequence[bool]) -> list[bool]:
    """Per trajectory: does it enter the loss?  Kept, and its group has at least two kept members."""
    if len(groups) != len(keep):
        raise ValueError(f"{len(groups)} group ids for {len(keep)} keep decisions")
    kept = Counter(g for g, k in zip(groups, keep) if k)
    return [bool(k) and kept[g] >= 2 for g, k in zip(groups, keep)]


def group_advantages(rewards: Sequence[float], groups: Sequence[Hashable], keep: Sequence[bool],
                     scale_by_std: bool = True) -> list[float]:
    """Per trajectory: its GRPO advantage under the rule above (0.0 for every one that does not train).

    ``scale_by_std=False`` is Dr.GRPO (verl's ``norm_adv_by_std_in_grpo=False``): the centred reward.
    """
    if len(rewards) != len(groups):
        raise ValueError(f"{len(rewards)} rewards for {len(groups)} group ids")
    mask = trains(groups, keep)
    members: dict[Hashable, list[float]] = {}
    for r, g, m in zip(rewards, groups, mask):
        if m:
            members.setdefault(g, []).append(float(r))
    stats = {}
    for g, values in members.items():
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        stats[g] = (mean, std)
    out = []
    for r, g, m in zip(rewards, groups, mask):
        if not m:
            out.append(0.0)
            continue
        mean, std = stats[g]
        out.append((float(r) - mean) / (std + EPSILON) if scale_by_std else float(r) - mean)
    return out
