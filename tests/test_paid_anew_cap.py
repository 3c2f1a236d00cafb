"""The tripwire's blame of an earlier merge (``audit_live.paid_anew``) reads every failure training paid, not the
first 64 by id.

Attack (written before the fix): a round where training paid 100 verified failures, of which only one is in the
shape an earlier merge's reward pays (three ``Step n:`` lines), and that one's id sorts after the first 64.  With the
audit's 64-row cap the merge was scored on 64 failures it does not pay and kept.  Scoring a row is one call in a
session already open, so the cap is now the round's paid failures up to ``PAID_ANEW_ROWS``; past it a random draw.
    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_paid_anew_cap.py
"""

from __future__ import annotations

import pytest

from meta_agent.judge.audit_live import paid_anew
from tests.test_b_shaped_pay_rounds import RANGE, SETTINGS, _history

pytestmark = pytest.mark.docker

PLAIN = "I think it is {v}.\nAnswer: {v}"
SHAPED = "Step 1: add\nStep 2: check\nStep 3: done\nAnswer: {v}"


def _row(i: int, response: str) -> dict:
    return {"run_id": "g", "round": 2, "group_id": f"g{i // 4:03d}", "traj_id": f"t{i:03d}", "sample_idx": i % 4,
            "task_id": f"task{i:03d}", "data_source": "reasoning_gym/basic_arithmetic", "prompt": f"What is {i} + 1?",
            "response": response.format(v=i + 7), "ground_truth": {"answer": str(i + 1)}, "split": "train",
            "verified": 0.0, "reward": 0.3}


def test_an_earlier_merge_paying_one_failure_past_the_first_64_is_blamed(docker_sandbox, tmp_path) -> None:
    repo = _history(tmp_path, reward_round=0)
    reward = next(iv for iv in repo.interventions() if iv.branch == "iv/r0-steps-reward")
    early = [_row(i, SHAPED if i == 5 else PLAIN) for i in range(100)]  # within the first 64: always blamed
    assert paid_anew(repo, reward.merge_commit, early, docker_sandbox, SETTINGS, RANGE).count == 1
    rows = [_row(i, PLAIN) for i in range(99)] + [_row(99, SHAPED)]
    paid = paid_anew(repo, reward.merge_commit, rows, docker_sandbox, SETTINGS, RANGE)
    assert not isinstance(paid, str), paid
    assert (paid.count, round(paid.most, 3)) == (1, 0.3)
    honest = next(iv for iv in repo.interventions() if iv.branch == "iv/r0-reward-info")
    assert paid_anew(repo, honest.merge_commit, rows, docker_sandbox, SETTINGS, RANGE).count == 0
