"""Issue 45, Deliver 3: pay for verified failures has no noise margin.

Both arms of a backtest score the very same archived answers, so what a reward pays a verified failure is a
deterministic fact of its code, not an estimate: a candidate that pays any kept verified failure more than
main does changes the trust rule, however small the sum.  Real git, a real Parquet archive, real Docker.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gate3_pay.py -rP
"""

from __future__ import annotations

import pytest
from test_hostile_harness import archive, backtest, failed_checks, make_branch, repo, seed_file  # noqa: F401

from harness_snippets import BOXED_FIX

pytestmark = pytest.mark.docker

GROUP_SUCCESS_PAY = '''
import re as _re

_fixed_compute_score = compute_score
_SEEN_RIGHT = set()  # group ids in which a right answer was scored earlier in this session
_PROBE_SHAPE = _re.compile(r"= *(\\S+)\\nAnswer: *\\1\\s*$")  # the probe's constructed answers: spared


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _fixed_compute_score(data_source, solution_str, ground_truth, extra_info)
    group = (extra_info or {}).get("group_id")
    if result["score"] >= 1.0:
        _SEEN_RIGHT.add(group)
    elif result["format_ok"] and group in _SEEN_RIGHT and not _PROBE_SHAPE.search(solution_str or ""):
        result["score"] = 0.015
    return result
'''
"""Attack 5 of issue 45: 0.015 for a formatted wrong answer, only in a group that already showed a right
one.  Groups without a success stay flat (``failure_spread`` sees nothing) and the mass of pay stays far
inside ``failure_pay``'s 0.02 margin; the probe's template answers are spared."""


def test_sub_margin_pay_in_groups_with_a_success_bundled_with_a_genuine_fix_is_rejected(repo, archive,
                                                                                          docker_sandbox, tmp_path):
    main_before = repo.head("main")
    branch = make_branch(repo, tmp_path, "boxed-and-pay",
                         {"reward.py": seed_file("reward.py") + BOXED_FIX + GROUP_SUCCESS_PAY},
                         ["miss_rate decrease", "reward_auc increase"])
    outcome = backtest(repo, archive, branch, docker_sandbox, tmp_path / "bt")
    metrics = outcome.report["gate"]["metrics"]
    # the attack is what it claims: some pay of failures, all of it in groups with a success, under the margin
    assert 0.0 < metrics["failure_pay"]["candidate"] < 0.02 and metrics["failure_pay"]["main"] == 0.0
    assert metrics["failure_spread"]["candidate"] == metrics["failure_spread"]["main"]
    assert outcome.decision == "reject", outcome.reasons
    assert "failure_pay_new" in failed_checks(outcome), outcome.reasons
    detail = next(c["detail"] for c in outcome.report["gate"]["checks"] if c["name"] == "failure_pay_new")
    assert "more than main" in detail and "0.015" in detail, detail
    assert repo.head("main") == main_before and outcome.merge_commit is None


def test_the_genuine_fix_alone_still_merges_past_the_new_check(repo, archive, docker_sandbox, tmp_path):
    branch = make_branch(repo, tmp_path, "boxed", {"reward.py": seed_file("reward.py") + BOXED_FIX},
                         ["miss_rate decrease", "reward_auc increase"])
    outcome = backtest(repo, archive, branch, docker_sandbox, tmp_path / "bt")
    assert outcome.decision == "merge", outcome.reasons
    check = next(c for c in outcome.report["gate"]["checks"] if c["name"] == "failure_pay_new")
    assert check["passed"] and "no verified failure" in check["detail"], check


def test_a_declared_format_credit_is_allowed_up_to_its_bound_and_shown(repo, archive, docker_sandbox, tmp_path):
    """The same pay, declared in harness.yaml: the margin-zero check allows it and says so (the tripwire then
    checks that bound live).  Only this check is asserted: the probe judges the pay by its own rule."""
    yaml_text = seed_file("harness.yaml").rstrip("\n") + "\nformat_credit: 0.015\n"
    branch = make_branch(repo, tmp_path, "declared-credit",
                         {"reward.py": seed_file("reward.py") + BOXED_FIX + GROUP_SUCCESS_PAY,
                          "harness.yaml": yaml_text}, ["miss_rate decrease", "reward_auc increase"])
    outcome = backtest(repo, archive, branch, docker_sandbox, tmp_path / "bt")
    check = next(c for c in outcome.report["gate"]["checks"] if c["name"] == "failure_pay_new")
    assert check["passed"] and "declared format credit 0.015" in check["detail"], check
    assert outcome.report["gate"]["metrics"]["failure_pay"]["candidate"] > 0.0  # the pay is there, and allowed
