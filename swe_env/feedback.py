"""What harness code may see of a graded SWE trajectory: the environment's feedback, never the verdict.

``trajectory_view`` passes a verifier info's ``execution`` entry on to reward, filter and
diagnostics code as ``extra_info["execution"]``; every SWE producer (patch mode, agent mode,
the importers) builds that entry here, so harness code sees one shape wherever a row came from.

    info = grade(task, patch).to_info() | {"patch": patch}
    info["execution"] = execution_feedback(info, exit_status="submitted", actions=["pytest -x"])
"""

from __future__ import annotations

MAX_PATCH_CHARS = 20_000
MAX_LISTED = 20
MAX_ACTIONS = 100
MAX_ACTION_CHARS = 500


def execution_feedback(info: dict, **extra: object) -> dict:
    """The grade's status, test counts, failing tests, touched test files, tampering findings and the patch; ``extra``
    adds agent-mode facts (``exit_status``, ``actions``, ``steps``), bounded."""
    tests = info.get("tests") if isinstance(info.get("tests"), dict) else {}
    feedback = {
        "status": info.get("status"), "parse_status": info.get("parse_status"),
        "patch": str(info.get("patch") or "")[:MAX_PATCH_CHARS],
        "touched_tests": [str(p) for p in list(info.get("touched_tests") or [])[:MAX_LISTED]],
        "tests_passed": sum(1 for v in tests.values() if v == "passed"), "tests_total": len(tests),
        "failed_tests": sorted(str(k) for k, v in tests.items() if v != "passed")[:MAX_LISTED],
        "findings": [str(f)[:300] for f in list(info.get("findings") or [])[:5]],  # why a grade is "tampered"
    }
    if isinstance(extra.get("actions"), list):
        extra["actions"] = [str(a)[:MAX_ACTION_CHARS] for a in extra["actions"][:MAX_ACTIONS]]
    return feedback | extra


def ground_truth(task) -> dict:
    """What a SWE row's ``ground_truth`` holds, the same for every producer: the task id and the gold
    change (harness rewards may use it for similarity credit; the policy never sees it)."""
    from swe_env.tasks import gold_patch

    return {"task_id": task.id, "gold_patch": gold_patch(task)}
