"""Held-out attacks on the pre-train repair of a refused harness (written after the defence froze)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.config import EvaluationSettings
from meta_agent.loop import RoundLoop
from meta_agent.phases.parts import Events
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from rl_backend.local import LocalBackend

TINY = {"group_size": 2, "prompts_per_step": 1, "steps_per_round": 1, "max_completion_length": 8}


class _Stop(Exception):
    pass


class _Killed(BaseException):
    """Stands for a kill right after the agent committed its branch, before the admission check ran."""


class _KilledAfterPropose(RecipeAgent):
    def propose(self, ctx):
        super().propose(ctx)
        raise _Killed


def _seed_yaml(**knobs: object) -> str:
    path = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math" / "harness.yaml"
    config = yaml.safe_load(path.read_text())
    config["grpo"].update(knobs)
    return yaml.safe_dump(config, sort_keys=False)


def _loop(run: RunDir, repo: HarnessRepo, sandbox, agent) -> RoundLoop:
    def phase(n: int, name: str | None) -> None:
        if name == "diagnose":
            raise _Stop

    return RoundLoop(run=run, repo=repo, archive=Archive(run.archive), backend=LocalBackend(sandbox=sandbox),
                     domain=MathDomain(), agent=agent, sandbox=sandbox, run_id="refused",
                     evaluation=EvaluationSettings(heldout_size=2, heldout_max_tokens=8), candidates=2,
                     seed=0, events=Events(phase=phase))


@pytest.mark.docker
def test_a_run_killed_between_the_repair_proposal_and_its_admission_resumes_and_trains(
        tmp_path: Path, docker_sandbox) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir(parents=True)
    repo = HarnessRepo.create(run.harness, "math")
    repo.commit_files({"harness.yaml": _seed_yaml(**TINY, max_prompt_length=48)}, "a budget below the prompts")
    write_json_atomic(run.run_json, {"run_id": "refused", "domain": "math"})
    with pytest.raises(_Killed):
        _loop(run, repo, docker_sandbox, _KilledAfterPropose()).run_rounds(1)
    with pytest.raises(_Stop):  # resumed: round 0 trains on a repaired main
        _loop(run, repo, docker_sandbox, RecipeAgent()).run_rounds(1)
    assert yaml.safe_load(repo.read_file("main", "harness.yaml"))["grpo"]["max_prompt_length"] > 48
    assert (run.round_dir(0) / "train" / "result.json").exists()
    record = json.loads((run.round_dir(0) / "pretrain" / "repair.json").read_text())
    [resumed] = [b for b in record["branches"] if b.get("resumed")]  # the branch the kill left open, judged
    assert resumed["admitted"] and record["merged_branch"] == resumed["branch"] == "iv/r0-fit-limit", record
