"""The one constructor of a trajectory row as a dict (DESIGN §4); producers of single rows build them here.

The local backend (training rollouts and the held-out exam) and the synthetic rollouts
call ``trajectory_row`` rather than writing the dict by hand, so a row is checked where
it is made, by the archive's own rules (``archive_checks``), and a column added to
``schema.py`` is a missing keyword in every producer at once.  Bulk producers (the verl
importer) build Arrow columns instead, checked by the same rules column by column
(``archive_checks.check_table``).

    row = trajectory_row(traj_id="r1-r0-s0-g0-0", run_id="r1", round=0, step=0, group_id="s0-g0",
                         sample_idx=0, domain="math", task_id="chain_sum-7", data_source="reasoning_gym/chain_sum",
                         split="train", prompt="What is 2 + 5?", response="Answer: 7",
                         ground_truth={"answer": "7"}, verified=1.0)
    archive.append_round("r1", 0, [row])

JSON columns (``messages``, ``ground_truth``, ``reward_info``, ``verifier_info``,
``task``) take a dict or a list, serialised here, or a ``str`` that already holds a
JSON document (checked, kept as is).  A ``str`` is never wrapped: to store the JSON
string ``"10"`` pass ``json.dumps("10")``.
"""

from __future__ import annotations

from typing import Any

from trajectory.archive_checks import check_row

Json = dict | list | str | None
"""A JSON column's value: a dict or list to serialise, a JSON document as text, or None."""


def trajectory_row(*, traj_id: str, run_id: str, round: int, step: int, group_id: str, sample_idx: int,
                   domain: str, task_id: str, data_source: str, split: str, prompt: str, response: str,
                   messages: Json = None, ground_truth: Json = None, reward: float | None = None,
                   reward_info: Json = None, verified: float | None = None, verifier_info: Json = None,
                   response_tokens: int | None = None, truncated: bool | None = None,
                   finish_reason: str | None = None, harness_commit: str | None = None,
                   policy_ref: str | None = None, kept: bool | None = None, task: Json = None) -> dict[str, Any]:
    """One archive row: every column of ``TRAJECTORY_SCHEMA``, JSON columns as text, ``schema_version`` set.

    Raises ``ArchiveError`` naming the row's ``traj_id`` and each bad field, e.g.
    ``trajectory_row(traj_id='r1-0'): 1 problem(s) ...: field 'verified': is 1.5, outside [0, 1] ...``.
    """
    row = dict(locals())  # exactly the keyword arguments: the schema's columns but schema_version
    return check_row(row, f"trajectory_row(traj_id={traj_id!r})")
