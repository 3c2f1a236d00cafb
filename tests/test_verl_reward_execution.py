"""verl's reward entry hands harness code the verifier's harness-visible record, as the backtest does.

The code and SWE seed rewards read ``extra_info["execution"]`` (test outcomes, never the verdict); a
reward entry that dropped it would fail every code and SWE trajectory under verl.  Here the same
trajectories are scored through the reward entry (one at a time, and in flight together) and
through the backtest's path (``trajectory_view`` of an archive row, ``HarnessSession.score``), with
the real code verifier running real programs and the real seed harnesses.

    .venv/bin/python -m pytest -q tests/test_verl_reward_execution.py
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from domains.code import CodeDomain
from domains.code_tasks import load_tasks
from rl_backend.verl import reward_entry
from sandboxes.harness_client import HarnessSession, trajectory_view

pytestmark = pytest.mark.docker

SEEDS = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds"
CODE = "domains.code:CodeDomain"
SWE = "domains.swe:SweDomain"


def _row(i: int, data_source: str, response: str, truth: dict, verified: float, verifier_info: dict) -> dict:
    return {"traj_id": f"t{i}", "run_id": "r", "round": 0, "group_id": "g0", "sample_idx": i,
            "task_id": truth.get("task_id", "swe-task"), "data_source": data_source, "prompt": "p",
            "response": response, "ground_truth": json.dumps(truth), "split": "train", "verified": verified,
            "verifier_info": json.dumps(verifier_info), "response_tokens": 10, "truncated": False,
            "finish_reason": "stop"}


def _backtest_rewards(docker_sandbox, seed: str, rows: list[dict], reward_range) -> list[tuple]:
    with HarnessSession(docker_sandbox, SEEDS / seed) as session:
        scored = session.score([trajectory_view(r) for r in rows], reward_range=reward_range)
    return [(s.reward, s.reward_info, s.error) for s in scored]


def _entry_rewards(calls: list[tuple], seed: str, domain_ref: str) -> tuple[list[tuple], list[tuple]]:
    """(one at a time, in flight together) records as ``(reward, reward_info, error)``."""
    harness_dir = str(SEEDS / seed)
    try:
        alone = [reward_entry.score_one(*c, harness_dir=harness_dir, domain_ref=domain_ref) for c in calls]

        async def in_flight() -> list[dict]:
            return await asyncio.gather(*[reward_entry.score_one_batched(*c, harness_dir=harness_dir,
                                                                         domain_ref=domain_ref) for c in calls])

        together = asyncio.run(in_flight())
    finally:
        reward_entry.close_sessions()
    as_tuples = [[(r["reward"], r["reward_info"], r["error"]) for r in records] for records in (alone, together)]
    return as_tuples[0], as_tuples[1]


def test_code_rewards_under_verl_equal_the_backtests(docker_sandbox) -> None:
    task = next(t for t in load_tasks() if t["source"] == "codeio" and t["split"] == "train")
    truth = {"task_id": task["id"]}
    example = task["tests"][0]["output"]
    answers = [f"```python\n{task['reference']}\n```",  # passes every hidden test
               f"```python\ndef main_solution(**kwargs):\n    return {example!r}\n```",  # passes the shown one
               "I do not know."]
    domain = CodeDomain(sandbox=docker_sandbox)
    verdicts = domain.verify_batch([("code/codeio", a, truth) for a in answers])
    rows = [_row(i, "code/codeio", a, truth, *v) for i, (a, v) in enumerate(zip(answers, verdicts))]
    backtest = _backtest_rewards(docker_sandbox, "code", rows, CodeDomain.reward_range)
    calls = [("code/codeio", a, json.dumps(truth), {"task_id": task["id"], "split": "train"}) for a in answers]
    alone, together = _entry_rewards(calls, "code", CODE)
    assert [r for r, _, _ in backtest] == [1.0, 0.0, 0.0]  # the seed pays only the program that passes all
    assert [info["status"] for _, info, _ in backtest] == ["passed", "failed", "no_code"]
    assert alone == backtest and together == backtest


def test_swe_agent_records_under_verl_equal_the_backtests(docker_sandbox) -> None:
    from domains.swe import SweDomain

    truth = {"task_id": "swe-task", "gold_patch": "--- a/x.py\n+++ b/x.py\n-old\n+new\n"}
    executions = [{"status": "resolved", "tests": {"test_a": "passed"}, "exit_status": "submitted",
                   "patch": truth["gold_patch"]},
                  {"status": "unresolved", "tests": {"test_a": "failed"}, "exit_status": "submitted",
                   "patch": "--- a/x.py\n+++ b/x.py\n-old\n+other\n"},
                  {"status": "unresolved", "parse_status": "malformed", "exit_status": "format_error"}]
    infos = [{"execution": e, "resolved": e["status"] == "resolved"} for e in executions]
    responses = ["episode 0", "episode 1", "episode 2"]
    rows = [_row(i, "swe/agent", text, truth, float(info["resolved"]), info)
            for i, (text, info) in enumerate(zip(responses, infos))]
    backtest = _backtest_rewards(docker_sandbox, "swe", rows, SweDomain.reward_range)
    # an agent-loop episode: graded in the loop, its verdict and record travel in extra_info
    calls = [("swe/agent", text, json.dumps(truth), {"task_id": "swe-task", "split": "train",
                                                     "swe_verified": float(info["resolved"]),
                                                     "swe_verifier_info": json.dumps(info)})
             for text, info in zip(responses, infos)]
    alone, together = _entry_rewards(calls, "swe", SWE)
    assert [(r, info["status"]) for r, info, _ in backtest] == [(1.0, "resolved"), (0.0, "unresolved"),
                                                                 (0.0, "malformed")]
    assert alone == backtest and together == backtest


def test_the_sampler_view_carries_the_same_record_as_the_entry() -> None:
    info = {"execution": {"status": "passed", "tests": ["passed"]}, "expected": "hidden"}
    entry = reward_entry.view("code/codeio", "r", {"task_id": "t"}, {"task_id": "t"}, "k", verifier_info=info)
    row = _row(0, "code/codeio", "r", {"task_id": "t"}, 1.0, info)
    assert entry["extra_info"]["execution"] == trajectory_view(row)["extra_info"]["execution"] == info["execution"]
    assert "expected" not in json.dumps(entry) and "verified" not in entry  # never the verdict or the outputs
    bare = reward_entry.view("code/codeio", "r", {"task_id": "t"}, {"task_id": "t"}, "k", verifier_info={"x": 1})
    assert "execution" not in bare["extra_info"]
