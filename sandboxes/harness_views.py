"""What harness code sees of a trajectory: the same view in training, backtests and verl's reward entry.

A view is a trajectory row less everything that judges it (``HIDDEN_FROM_HARNESS``: the verifier's
outcome), with ``group_id`` made unique across runs and rounds.  That is the host's view: on the wire
to harness code, ``traj_id`` and ``group_id`` (here and in ``extra_info``) become opaque ids drawn per
request (``sandboxes.harness_wire_ids``), so no run, round, step or group index reaches it.
``sandboxes.harness_client`` re-exports these names.
"""

from __future__ import annotations

import json
from typing import Any

VIEW_KEYS = ("traj_id", "group_id", "sample_idx", "task_id", "data_source", "prompt", "response", "ground_truth",
             "response_tokens", "truncated", "finish_reason", "extra_info")
HIDDEN_FROM_HARNESS = ("verified", "verifier_info")


def trajectory_view(row: dict) -> dict:
    """What harness code sees of one trajectory row, the same in training, backtests and verl.

    Never the verifier's outcome.  ``group_id`` is made unique across runs and rounds;
    ``extra_info`` is what ``compute_score`` receives.
    """
    ground_truth = row.get("ground_truth")
    if isinstance(ground_truth, str):
        ground_truth = json.loads(ground_truth)
    group = f"{row['run_id']}/{row['round']}/{row['group_id']}"
    view = {
        "traj_id": row["traj_id"], "group_id": group, "sample_idx": row["sample_idx"], "task_id": row["task_id"],
        "data_source": row["data_source"], "prompt": row["prompt"], "response": row["response"],
        "ground_truth": ground_truth, "response_tokens": row.get("response_tokens"),
        "truncated": row.get("truncated"), "finish_reason": row.get("finish_reason"),
        "extra_info": {"traj_id": row["traj_id"], "task_id": row["task_id"], "group_id": group,
                       "sample_idx": row["sample_idx"], "split": row["split"]},
    }
    execution = harness_visible(row.get("verifier_info"))
    if execution is not None:
        view["extra_info"]["execution"] = execution
    assert not set(HIDDEN_FROM_HARNESS) & set(view)
    return view


def harness_visible(verifier_info: Any) -> dict | None:
    """What a verifier declares harness-visible, ``verifier_info["execution"]`` (SWE: test results and exit
    status; code: each test's outcome), never its verdict; None when it declares nothing.  The backtest's
    views and verl's reward entry both take it from here, so harness code sees the same record in both."""
    info = json.loads(verifier_info) if isinstance(verifier_info, str) and verifier_info.startswith("{") \
        else verifier_info
    if isinstance(info, dict) and isinstance(info.get("execution"), dict):
        return info["execution"]
    return None


def batches(views: list[dict], steps: list[tuple]) -> list[list[dict]]:
    """Split views into the generation batches training scored them in (one per (run, round, step))."""
    out: dict[tuple, list[dict]] = {}
    for view, step in zip(views, steps):
        out.setdefault(step, []).append(view)
    return [out[k] for k in sorted(out)]
