"""Round 0 refused by training (a planted budget flaw of this file's own: ``max_prompt_length`` 48 under the math
seed's prompts, about 90-130 tokens with the chat template) gets repaired by the agent before the round trains.

Real parts throughout: the round loop, the local TRL backend with SmolLM2-135M, the Docker sandbox, the recipe
agent, a git harness repo.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.config import EvaluationSettings
from meta_agent.loop import RoundFailed, RoundLoop
from meta_agent.phases.parts import Events
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from rl_backend.local import LocalBackend
from tests.test_train_refused import BUDGET, TINY, _seed_yaml, _Stop


def _loop(tmp: Path, sandbox, candidates: int) -> tuple[RoundLoop, RunDir, HarnessRepo]:
    run = RunDir(tmp / "run")
    run.path.mkdir(parents=True)
    repo = HarnessRepo.create(run.harness, "math")
    repo.commit_files({"harness.yaml": _seed_yaml(**TINY, max_prompt_length=BUDGET)}, "a budget below the prompts")
    write_json_atomic(run.run_json, {"run_id": "refused", "domain": "math"})

    def phase(n: int, name: str | None) -> None:
        if name == "diagnose":
            raise _Stop

    loop = RoundLoop(run=run, repo=repo, archive=Archive(run.archive), backend=LocalBackend(sandbox=sandbox),
                     domain=MathDomain(), agent=RecipeAgent(), sandbox=sandbox, run_id="refused",
                     evaluation=EvaluationSettings(heldout_size=2, heldout_max_tokens=8), candidates=candidates,
                     seed=0, events=Events(phase=phase))
    return loop, run, repo


@pytest.mark.docker
def test_round_0_refused_by_training_is_repaired_by_the_agent_and_then_trains(tmp_path: Path, docker_sandbox) -> None:
    loop, run, repo = _loop(tmp_path, docker_sandbox, candidates=2)
    with pytest.raises(_Stop):  # round 0 trained: the loop reached diagnose
        loop.run_rounds(1)
    state = run.state()
    record = state["rounds"]["0"]["pretrain_repair"]
    assert record["finding"]["name"] == "main:prompt_length" and record["finding"]["rate"] > 0.5
    longest = record["finding"]["evidence"]["longest"]
    assert longest > BUDGET
    assert record["merged"] == repo.head("main") and record["merged_branch"].startswith("iv/r0-")
    budget = yaml.safe_load(repo.read_file("main", "harness.yaml"))["grpo"]["max_prompt_length"]
    assert budget >= longest
    assert (run.round_dir(0) / "train" / "result.json").exists()
    digest = json.loads((run.round_dir(0) / "pretrain" / "digest.json").read_text())
    assert digest["failure_modes"][0]["examples"][0]["prompt"]
    message = subprocess.run(["git", "-C", str(run.harness), "log", "-1", "--format=%B", "main"],
                             capture_output=True, text=True, check=True).stdout
    assert "Pretrain-Repair: round 0: main:prompt_length" in message


@pytest.mark.docker
def test_the_fixed_arm_still_stops_and_says_what_training_refused(tmp_path: Path, docker_sandbox) -> None:
    loop, run, repo = _loop(tmp_path, docker_sandbox, candidates=0)
    with pytest.raises(RoundFailed, match="max_prompt_length=48"):
        loop.run_rounds(1)
    refused = run.state()["rounds"]["0"]["refused"]
    assert refused["name"] == "main:prompt_length" and refused["evidence"]["longest"] > BUDGET
