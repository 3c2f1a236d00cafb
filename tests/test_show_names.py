"""``show N`` for a round the run does not have names every round it has (issue 48: ``show 7`` listed rounds 0
and 1 but not 2, behind five intervention names)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.review.records import NameNotFound, resolve
from meta_agent.run_config import RunConfig, save_run_config
from meta_agent.run_dir import RunDir


def test_an_unknown_round_names_every_round_of_the_run(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "m1")
    rd.path.mkdir()
    repo = HarnessRepo.create(rd.harness, "math")
    save_run_config(rd.run_json, RunConfig.model_validate({"run_id": "m1", "domain": "math", "backend": "local",
                                                           "agent": "recipe", "rounds": 3, "created": time.time()}))
    for k in range(6):  # more interventions than the nearest-names list holds
        wt = repo.start_intervention(k % 3, f"change-{k}", worktree_root=tmp_path / "wt")
        (wt.path / "JOURNAL.md").write_text(f"change {k}\n")
        repo.commit(wt, f"Change {k}", {"Hypothesis": "h", "Predicted-Effect": ["miss_rate decrease"]})
        repo.remove_worktree(wt)
    for n in range(3):
        rd.round_dir(n).mkdir(parents=True)
    assert resolve(rd, repo, "2") == ("round", 2)
    with pytest.raises(NameNotFound) as refused:
        resolve(rd, repo, "7")
    assert f"'7' is no round of {rd.path}; its rounds are 0, 1, 2; interventions: iv/r0-change-0" in str(refused.value)
