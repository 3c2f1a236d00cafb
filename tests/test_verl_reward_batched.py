"""verl's reward entry, batched: the calls in flight travel in one request and score as one call at a time does.

verl 0.9.1's reward loop awaits the entry's async ``compute_score`` for every trajectory of a batch at
once (tests/test_verl_reward.py drives it through verl's own loader and manager); here the records of
many calls in flight are compared with the records of the same calls made one at a time.

    .venv/bin/python -m pytest -q tests/test_verl_reward_batched.py
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from rl_backend.verl import reward_entry

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
DOMAIN = "domains.math:MathDomain"
REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    if "crash" in solution_str:
        raise ValueError("cannot parse")
    if "greedy" in solution_str:
        return 5.0  # outside the math domain's range
    return {"score": 1.0 if ground_truth["answer"] in solution_str else 0.0, "task": extra_info["task_id"]}
'''
FILTERS = '''
def keep_trajectory(traj):
    return len(traj["response"]) < 30


def keep_group(group):
    return len(group) == 1  # the entry scores every trajectory alone: a group of one
'''


@pytest.fixture(scope="module")
def harness_dir(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("entry") / "harness"
    shutil.copytree(SEED, folder)
    (folder / "reward.py").write_text(REWARD)
    (folder / "filters.py").write_text(FILTERS)
    return str(folder)


def calls() -> list[tuple]:
    out = []
    for i in range(40):
        answer = str(i % 7)
        response = [f"Answer: {answer}", "Answer: 99", "crash", "greedy", f"Answer: {answer} " + "x" * 40][i % 5]
        out.append(("reasoning_gym/chain_sum", response, json.dumps({"answer": answer}),
                    {"task_id": f"t{i % 7}", "split": "train", "prompt": f"q{i % 7}"}))
    return out


def test_calls_in_flight_score_as_one_call_at_a_time(harness_dir):
    one_by_one = [reward_entry.score_one(*c, harness_dir=harness_dir, domain_ref=DOMAIN) for c in calls()]
    reward_entry.close_sessions()

    async def in_flight() -> list[dict]:
        return await asyncio.gather(*[reward_entry.score_one_batched(*c, harness_dir=harness_dir, domain_ref=DOMAIN)
                                      for c in calls()])

    try:
        batched = asyncio.run(in_flight())
    finally:
        reward_entry.close_sessions()
    assert batched == one_by_one
    # every case happened: paid, unpaid, a harness error, a refused reward, a trajectory its filter drops
    assert {r["reward"] for r in batched} == {0.0, 1.0, None}
    assert any(r["error"] and "cannot parse" in r["error"] for r in batched)
    assert any(r["error"] and "outside the domain's range" in r["error"] for r in batched)
    assert any(r["reward"] == 1.0 and not r["keep"] for r in batched)
    assert all(r["verified"] in (0.0, 1.0) and r["verifier_info"] is not None for r in batched)


def test_a_runtime_that_fails_fails_every_call_in_its_request(tmp_path):
    broken = tmp_path / "harness"
    shutil.copytree(SEED, broken)
    (broken / "reward.py").write_text("def compute_score(:\n")

    async def in_flight() -> list[dict]:
        return await asyncio.gather(*[reward_entry.score_one_batched(*c, harness_dir=str(broken), domain_ref=DOMAIN)
                                      for c in calls()[:5]])

    try:
        records = asyncio.run(in_flight())
    finally:
        reward_entry.close_sessions()
    assert [r["reward"] for r in records] == [None] * 5
    assert all(r["error"].startswith("harness runtime: ImportError") for r in records), records[0]["error"]
    assert all(r["verified"] in (0.0, 1.0) for r in records)  # the verifier's outcome is still recorded


def test_each_call_records_one_line_and_a_records_file_deleted_mid_job_is_started_again(harness_dir, tmp_path):
    records = tmp_path / "records"

    async def in_flight(batch: list[tuple]) -> list[dict]:
        return await asyncio.gather(*[reward_entry.compute_score(*c, harness_dir=harness_dir, domain_ref=DOMAIN,
                                                                 records_dir=str(records)) for c in batch])

    try:
        first = asyncio.run(in_flight(calls()[:10]))
        (path,) = records.glob("*.jsonl")
        assert len(path.read_text().splitlines()) == 10
        path.unlink()  # the worker keeps its file open; a deleted one must not swallow the next lines
        second = asyncio.run(in_flight(calls()[10:20]))
    finally:
        reward_entry.close_sessions()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == 10
    assert {r["key"] for r in lines} == {reward_entry.record_key(c[1], c[2]) for c in calls()[10:20]}
    by_key = {r["key"]: r for r in lines}
    for c, returned in zip(calls()[10:20], second):
        record = by_key[reward_entry.record_key(c[1], c[2])]
        assert returned["harness_error"] == float(record["reward"] is None)
        assert returned["score"] == (record["reward"] if record["reward"] is not None else 0.0)
    assert [r["harness_error"] for r in first].count(1.0) == 4  # "crash" and "greedy" twice each in the first ten


def test_calls_past_one_request_leave_in_several_that_score_and_record_as_one_call_at_a_time(harness_dir, tmp_path,
                                                                                             monkeypatch):
    """Full requests leave while later calls are still being verified; each call's record is written by its
    request, once, before its score is returned."""
    monkeypatch.setattr(reward_entry, "CHUNK", 7)  # 40 calls: five full requests and a tail of five
    one_by_one = [reward_entry.score_one(*c, harness_dir=harness_dir, domain_ref=DOMAIN) for c in calls()]
    reward_entry.close_sessions()
    records = tmp_path / "records"

    async def in_flight() -> list[dict]:
        return await asyncio.gather(*[reward_entry.compute_score(*c, harness_dir=harness_dir, domain_ref=DOMAIN,
                                                                 records_dir=str(records)) for c in calls()])

    try:
        returned = asyncio.run(in_flight())
    finally:
        reward_entry.close_sessions()
    (path,) = records.glob("*.jsonl")
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert sorted(written, key=lambda r: r["key"]) == sorted(one_by_one, key=lambda r: r["key"])
    assert [r["score"] for r in returned] == [r["reward"] if r["reward"] is not None else 0.0 for r in one_by_one]
    assert [r["keep"] for r in returned] == [float(bool(r["keep"]) and r["reward"] is not None) for r in one_by_one]
