"""How verl's replay buffer packs whole groups into score requests (no verl import: the probe uses it too).

``sampler.KeepMaskReplayBuffer`` scores a step's groups through the sandboxed runtime with this packing,
and the gate's verl-shaped probe (``meta_agent.judge.probe_verl``) replays it, so harness code meets the
same requests in both.
"""

from __future__ import annotations


def score_requests(groups: dict[str, list[dict]]) -> list[list[dict]]:
    """Groups (views keyed by group, in order) packed into score requests so that no request holds two groups
    of one task (the view's ``group_id`` is the task, as the reward entry names it); the runtime judges a
    request's groups independently."""
    requests: list[tuple[set[str], list[dict]]] = []
    for members in groups.values():
        group = members[0]["group_id"]
        slot = next((r for r in requests if group not in r[0]), None)
        if slot is None:
            slot = (set(), [])
            requests.append(slot)
        slot[0].add(group)
        slot[1].extend(members)
    return [r[1] for r in requests]
