"""Diagnostic: share of GRPO groups whose rewards are all equal.

Such a group has zero advantage for every sample, so it contributes no gradient:
all-0 groups are too hard (or mis-scored), all-1 groups too easy.
"""

from __future__ import annotations

WARN_ABOVE = 0.50


def diagnose(rollouts: list[dict]) -> list[dict]:
    """One finding ``zero_variance`` (warning above 50%); none without rewarded rollouts."""
    groups: dict[str, list[dict]] = {}
    for r in rollouts:
        if r.get("reward") is not None:
            groups.setdefault(str(r.get("group_id")), []).append(r)
    if not groups:
        return []
    flat = {gid: members for gid, members in groups.items() if len({m["reward"] for m in members}) == 1}
    rate = len(flat) / len(groups)
    by_value: dict[float, int] = {}
    for members in flat.values():
        by_value[members[0]["reward"]] = by_value.get(members[0]["reward"], 0) + 1
    detail = ", ".join(f"all {value:g}: {count}" for value, count in sorted(by_value.items()))
    return [{
        "name": "zero_variance",
        "severity": "warning" if rate > WARN_ABOVE else "info",
        "rate": rate,
        "example_ids": [members[0].get("traj_id") for members in list(flat.values())[:5]],
        "message": (
            f"{len(flat)}/{len(groups)} groups ({rate:.0%}) have identical rewards"
            + (f" ({detail}); they give GRPO no learning signal" if flat else "")
        ),
    }]
