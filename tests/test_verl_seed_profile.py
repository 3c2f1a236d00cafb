"""The GPU seed profile: a new `--backend verl` run records it in run.json and commits it on the seed harness; the
exam budget comes from the run configuration; `--dry-run` plans with the profile's knobs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from harness_repo.contract import GRPOKnobs
from harness_repo.repo import HarnessRepo
from meta_agent.run_config import (GPU_EXAM_MAX_TOKENS, GPU_SEED_PROFILE, RunConfig, apply_seed_profile,
                                   with_seed_profile)

ROOT = Path(__file__).resolve().parents[1]


def test_the_profile_is_valid_knobs_and_divides_over_common_gpu_counts():
    from rl_backend.gpu_profile import SWE_GPU_PROFILE, SWE_TURN_TOKENS, seed_profile_for

    knobs = GRPOKnobs(**GPU_SEED_PROFILE)
    swe = GRPOKnobs(**SWE_GPU_PROFILE)
    for gpus in (1, 2, 4, 8, 16):
        assert knobs.prompts_per_step * knobs.group_size % gpus == 0
        assert swe.prompts_per_step * swe.group_size % gpus == 0
    assert seed_profile_for("swe") == SWE_GPU_PROFILE and seed_profile_for("code") == GPU_SEED_PROFILE
    registered = yaml.safe_load((ROOT / "rl_backend" / "verl" / "agent_loops.yaml").read_text())
    assert [e["max_turn_tokens"] for e in registered] == [SWE_TURN_TOKENS]
    assert SWE_TURN_TOKENS < swe.max_completion_length
    assert knobs.max_completion_length >= 1024 and GPU_EXAM_MAX_TOKENS >= knobs.max_completion_length


def test_a_gpu_run_records_the_profile_and_commits_it_on_its_seed(tmp_path):
    config = with_seed_profile(RunConfig(run_id="g", backend="verl", model_path="/m"))
    assert config.seed_profile == GPU_SEED_PROFILE and config.evaluation.heldout_max_tokens == GPU_EXAM_MAX_TOKENS
    assert with_seed_profile(RunConfig(run_id="c")).seed_profile is None  # the CPU backend keeps the seed's knobs
    given = RunConfig(run_id="g", backend="verl", model_path="/m", evaluation={"heldout_max_tokens": 777})
    assert with_seed_profile(given).evaluation.heldout_max_tokens == 777  # a budget the user gave is kept
    line = RunConfig(run_id="g", backend="verl", model_path="/m", **{"from": {"run": "/r", "branch": "iv/x"}})
    assert with_seed_profile(line).seed_profile is None  # a run line continues another run's harness as it is

    repo = HarnessRepo.create(tmp_path / "harness", "math")
    seed = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    apply_seed_profile(repo, config)
    profiled = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    assert {k: profiled["grpo"][k] for k in GPU_SEED_PROFILE} == GPU_SEED_PROFILE
    assert profiled["tasks"] == seed["tasks"] and "GPU seed profile" in repo.message("main")
    assert GRPOKnobs(**profiled["grpo"])  # still a valid harness


def test_dry_run_plans_a_new_gpu_run_with_the_profile(tmp_path):
    # the local venv has no verl: the validation says INVALID (exit 1), yet the plan is printed with the profile
    done = subprocess.run([sys.executable, "-m", "meta_agent", "--backend", "verl", "--model-path", str(tmp_path),
                           "--dry-run", "--run-dir", str(tmp_path / "run")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    out = done.stdout
    assert "data.train_batch_size=64" in out and "actor_rollout_ref.rollout.n=8" in out, out[-3000:] + done.stderr
    assert "data.max_response_length=2048" in out and "trainer.total_training_steps=20" in out
    assert "512 trajectories per step, 10240 per round" in out
    assert done.returncode == 1 and "validation: INVALID" in out  # (no config.json in tmp_path, at least)
    assert not (tmp_path / "run").exists()


def test_a_new_swe_gpu_run_plans_with_an_swe_profile(tmp_path):
    from swe_env.checked import shipped_tasks

    done = subprocess.run([sys.executable, "-m", "meta_agent", "--backend", "verl", "--domain", "swe", "--model-path",
                           str(tmp_path), "--dry-run", "--run-dir", str(tmp_path / "run")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    out = done.stdout
    overrides = dict(line.split("=", 1) for line in out.splitlines() if "=" in line and " " not in line)
    response = int(overrides["data.max_response_length"])
    rows = int(overrides["data.train_batch_size"]) * int(overrides["trainer.total_training_steps"])
    assert response >= 8 * 1024, out[-3000:]  # the episode's turns and the observations shown between them
    assert re.search(r"agent turns: at most (\d+) tokens each", out), out[-3000:]
    turn = int(re.search(r"agent turns: at most (\d+) tokens each", out).group(1))
    assert 0 < turn < response
    assert rows <= 2 * len(shipped_tasks("train"))  # a round draws each training task at most twice
