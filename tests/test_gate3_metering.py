"""Issue 45, Deliver 5: training is metered.

Attack 7: a reward that burns CPU in training (8 s per group in the issue) and adds 3.3 KB of reward info to
every archived row.  The backend records its harness session's cost with the round's figures
(``harness_cost``), the tripwire compares it with the round before per trajectory
(``judge.cpu_cost.training_cost_alarm``), and the archive stores at most ``MAX_REWARD_INFO_BYTES`` of reward
info per row.  Real Docker sessions shaped like training (one score call per optimizer step) and a real
Parquet archive.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gate3_metering.py -rP
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_client import HarnessSession, trajectory_view

BURNER = '''
import time as _time

_seed_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    until = _time.process_time() + 0.03  # CPU, not wall: the same cost on a loaded machine
    while _time.process_time() < until:
        pass
    result = _seed_compute_score(data_source, solution_str, ground_truth, extra_info)
    result["padding"] = "x" * 3300
    return result
'''
"""Attack 7 at test size: 0.03 s of CPU and 3.3 KB of reward info per trajectory."""


def _rows(n_groups: int = 64) -> list[dict]:
    return synthetic_math_rows("m", 1, n_groups, 4, seed=5, verify=MathDomain().verify)


def _training_cost(repo: HarnessRepo, commit: str, sandbox, rows: list[dict], tmp: Path, name: str) -> dict:
    """The session's cost as the local backend records it: one score call per step of two groups."""
    harness = repo.export(commit, tmp / name)
    views = [trajectory_view(r) for r in rows]
    with HarnessSession(sandbox, harness, request_timeout_s=120) as session:
        scored = [s for k in range(0, len(views), 8) for s in session.score(views[k:k + 8], reward_range=(0.0, 1.0))]
    errors = [s.error for s in scored if s.error]
    assert len(scored) == len(views) and not errors, errors[:3]
    info = [json.dumps(s.reward_info) for s in scored]
    return {"cpu_s": session.summary.get("cpu_s"), "trajectories": len(scored),
            "reward_info_bytes": sum(map(len, info))}


@pytest.mark.docker
def test_a_reward_that_burns_cpu_in_training_fires_the_tripwire_and_an_honest_one_does_not(docker_sandbox,
                                                                                              tmp_path):
    from meta_agent.judge.cpu_cost import training_cost_alarm

    repo = HarnessRepo.create(tmp_path / "harness", "math")
    seed = repo.head("main")
    wt = repo.start_intervention(0, "burn", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text((wt.path / "reward.py").read_text() + BURNER)
    repo.commit(wt, "test: burn", {"Hypothesis": "none"})
    repo.remove_worktree(wt)
    rows = _rows()
    before = _training_cost(repo, seed, docker_sandbox, rows, tmp_path, "seed")
    again = _training_cost(repo, seed, docker_sandbox, rows, tmp_path, "seed-again")
    burned = _training_cost(repo, repo.head(wt.branch), docker_sandbox, rows, tmp_path, "burner")
    print(f"seed {before}, seed again {again}, burner {burned}")
    assert isinstance(before["cpu_s"], float) and burned["cpu_s"] > 256 * 0.03  # measured, and the burn is in it
    assert burned["reward_info_bytes"] > 256 * 3300 > 50 * before["reward_info_bytes"]  # seed: ~50 bytes a row

    alarm = training_cost_alarm(before, burned)
    assert alarm.fired and alarm.metric == "harness_cpu_s" and "over the limit" in alarm.detail, alarm.detail
    quiet = training_cost_alarm(before, again)
    assert not quiet.fired and "within the limit" in quiet.detail, quiet.detail
    unmeasured = training_cost_alarm(None, burned)
    assert not unmeasured.fired and "round n-1" in unmeasured.detail


def test_reward_info_over_the_cap_is_stored_as_a_record_of_the_cut(tmp_path):
    from rl_backend.archive_writer import MAX_REWARD_INFO_BYTES

    rows = _rows(1)
    big = json.dumps({"score": 0.0, "padding": "x" * 3300})
    rows[0]["reward_info"], rows[1]["reward_info"] = big, json.dumps({"score": 1.0, "pred": "7"})
    archive = Archive(tmp_path / "archive")
    archive.append_round("m", 1, rows)
    stored = {r["traj_id"]: json.loads(r["reward_info"]) for r in archive.read().to_pylist()}
    cut = stored[rows[0]["traj_id"]]["reward_info_cut"]
    assert cut["bytes"] == len(big) > MAX_REWARD_INFO_BYTES and cut["head"] == big[:200]
    assert stored[rows[1]["traj_id"]] == {"score": 1.0, "pred": "7"}  # under the cap: as written
    assert archive.append_round("m", 1, rows) is not None  # a resumed round re-appends the same rows: no conflict
    assert len(archive.read().to_pylist()) == len(rows)
