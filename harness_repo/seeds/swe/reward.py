"""Reward of the seed SWE harness (verl's ``compute_score`` signature).

1.0 when the trusted grader resolved the task (every FAIL_TO_PASS and PASS_TO_PASS test
passed), read from the execution feedback the runtime hands over in
``extra_info["execution"]``.  Two SWE-RL-style knobs, both off in the seed:

- ``SIMILARITY_WEIGHT``: an unresolved patch earns this times the difflib similarity of its
  changed lines to the gold change's.  It gives a policy that never resolves a task a signal,
  and by construction it pays unresolved patches: the gate judges it like any other reward.
- ``MALFORMED_REWARD``: what an answer that holds no parseable patch gets (SWE-RL: -1).

Pure standard library.
"""

from __future__ import annotations

import difflib

SIMILARITY_WEIGHT = 0.0
MALFORMED_REWARD = 0.0


def changed_lines(patch: str) -> str:
    """The added and removed lines of a diff, headers dropped: what similarity compares."""
    keep = [line for line in (patch or "").splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    return "\n".join(keep)


def similarity(patch: str, gold: str) -> float:
    """difflib ratio of the two diffs' changed lines, in [0, 1]."""
    a, b = changed_lines(patch), changed_lines(gold)
    if not a or not b:
        return 0.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """``{"score", "status", "similarity"}``; raises when the trajectory carries no execution feedback."""
    execution = (extra_info or {}).get("execution")
    if not isinstance(execution, dict):
        raise ValueError("no execution feedback in extra_info: this reward needs graded SWE trajectories")
    status = execution.get("status")
    if status == "resolved":
        return {"score": 1.0, "status": status, "similarity": 1.0}
    if execution.get("parse_status") == "malformed" or execution.get("exit_status") == "format_error":
        return {"score": MALFORMED_REWARD, "status": "malformed", "similarity": 0.0}
    gold = (ground_truth or {}).get("gold_patch", "") if isinstance(ground_truth, dict) else ""
    sim = similarity(execution.get("patch") or "", gold) if SIMILARITY_WEIGHT else 0.0
    return {"score": SIMILARITY_WEIGHT * sim, "status": status, "similarity": sim}
