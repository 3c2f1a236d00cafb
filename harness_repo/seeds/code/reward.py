"""Reward of the seed code harness (verl's ``compute_score`` signature).

1.0 when the trusted grader ran the answer's program and every hidden test passed, read from the
execution feedback the runtime hands over in ``extra_info["execution"]``: per-test outcomes
(``passed``, ``failed``, ``error``, ``timeout``), the program's status and its exceptions, never the
expected outputs.  Two knobs, both off in the seed:

- ``SHARE_WEIGHT``: an answer that passes some tests but not all earns this times the share passed.
  It gives a signal before any answer is fully right, and by construction it pays wrong programs
  (one that hard-codes the example shown in the prompt passes one test): the gate judges it.
- ``NO_CODE_REWARD``: what an answer without a code block gets.

Pure standard library.
"""

from __future__ import annotations

SHARE_WEIGHT = 0.0
NO_CODE_REWARD = 0.0


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """``{"score", "status", "share"}``; raises when the trajectory carries no execution feedback."""
    execution = (extra_info or {}).get("execution")
    if not isinstance(execution, dict):
        raise ValueError("no execution feedback in extra_info: this reward needs graded code trajectories")
    status = execution.get("status")
    tests = execution.get("tests") or []
    share = sum(1 for t in tests if t == "passed") / len(tests) if tests else 0.0
    if status == "passed" and tests and all(t == "passed" for t in tests):
        return {"score": 1.0, "status": status, "share": 1.0}
    if status == "no_code":
        return {"score": NO_CODE_REWARD, "status": status, "share": 0.0}
    return {"score": SHARE_WEIGHT * share, "status": status, "share": share}
