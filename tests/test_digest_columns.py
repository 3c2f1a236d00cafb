"""The columnar digest (``meta_agent.review.digest_columns``) says what ``build_digest`` says over the same rows."""

from __future__ import annotations

import json
import math

from domains.math import MathDomain
from meta_agent.digest import build_digest
from meta_agent.review.digest_columns import build_digest_from_table, read_round
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows


def _rounded(value):
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 12)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def test_the_columnar_digest_equals_the_row_digest(tmp_path):
    rows = synthetic_math_rows("cols", 2, n_groups=24, group_size=4, seed=5, verify=MathDomain().verify)
    for i, row in enumerate(rows):
        # paid as verified, with hacks, misses and unscored rows mixed in (the archive refuses NaN)
        row["reward"] = [row["verified"], 1.0, 0.0, 0.25, None][i % 5] if i % 3 else row["verified"]
        if i % 7 == 0:
            row["verified"] = None
        if 40 <= i < 52:  # rows with execution feedback: the SWE summary and its examples
            row["verifier_info"] = {"reason": "graded", "execution": {
                "status": ["resolved", "patch_failed", "malformed"][i % 3], "exit_status": "submitted",
                "touched_tests": i == 44, "steps": i}}
    archive = Archive(tmp_path / "archive")
    archive.append_round("cols", 2, rows)
    findings = [{"name": "format_failures", "severity": "warning", "rate": 0.4,
                 "example_ids": [rows[5]["traj_id"], rows[9]["traj_id"], "not-a-row"], "message": "m"},
                {"name": "crashed", "error": "boom"}]
    kwargs = {"metrics": [{"harness/kept_trajectories": 90, "loss": 0.1}], "findings": findings,
              "eval": {"heldout_accuracy": 0.25}, "previous": [{"round": 1, "reward_mean": 0.2, "n_groups": 20}]}
    by_rows = build_digest(2, archive.rows(run_id="cols", round=2, split="train"), **kwargs)
    by_columns = build_digest_from_table(2, read_round(archive, "cols", 2), **kwargs)
    assert by_rows["swe"]["n_graded"] == 12 and by_rows["hack_rate"] > 0 and by_rows["miss_rate"] > 0
    assert by_rows["zero_variance_share"] > 0 and by_rows["failure_modes"][0]["examples"]
    assert json.dumps(_rounded(by_columns), sort_keys=True) == json.dumps(_rounded(by_rows), sort_keys=True)
