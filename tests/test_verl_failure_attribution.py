"""Whose failure a dead verl job is, through the real CLI: a job stand-in (``--job-python``) dies as a GPU job does.

- a CUDA-like death is the infrastructure's: ``main`` and the merge on it stay, the state stays in the round's
  train phase, and ``--resume`` launches again under the same harness commit;
- a death whose log holds the sampler's proof that the harness left nothing to train is the harness's: ``main``
  is restored to the last good commit and the failed attempt's round folder is moved aside.

Everything else is real: the run folder and harness repo, prompts rendered by the harness runtime in Docker,
verl 0.9.1's own validation of the overrides, the launch, watch and log tail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from harness_repo.repo import HarnessRepo  # noqa: E402
from meta_agent.config import BacktestSettings, EvaluationSettings  # noqa: E402
from meta_agent.run_dir import RunDir, write_json_atomic  # noqa: E402
from rl_backend.model import ensure_base_model  # noqa: E402
from rl_backend.verl.config import HARNESS_COMMIT_FILE, HARNESS_FAILURE_MARK  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[1]

STAND_IN = """#!{python}
import pathlib, sys
# called as `<this> -m verl.trainer.main_ppo <overrides...>`, as the backend launches verl
assert sys.argv[1:3] == ["-m", "verl.trainer.main_ppo"], sys.argv[:3]
flag = pathlib.Path({harness_flag!r})
if flag.exists():  # once: the retry on the restored harness then dies of the GPU again
    flag.unlink()
    print("ray.exceptions.RayTaskError(RuntimeError): {mark} it kept none of the 8 trajectories", flush=True)
else:
    print("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", flush=True)
sys.exit(1)
"""


def run_cli(rd: RunDir) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(rd.path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=os.environ | {"COLUMNS": "200"})


def test_a_gpu_fault_keeps_the_harness_and_a_harness_fault_restores_main(tmp_path, docker_sandbox):
    harness_flag = tmp_path / "harness-fails"
    stand_in = tmp_path / "job-python"
    stand_in.write_text(STAND_IN.format(python=sys.executable, harness_flag=str(harness_flag),
                                        mark=HARNESS_FAILURE_MARK))
    stand_in.chmod(0o755)
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    repo = HarnessRepo.create(rd.harness, "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(group_size=4, prompts_per_step=2, steps_per_round=2, max_completion_length=16)
    good = repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Tiny knobs")
    merged = repo.commit_files({"prompts/system.j2": repo.read_file("main", "prompts/system.j2") + "\nBe brief.\n"},
                               "A merged intervention")
    write_json_atomic(rd.run_json, {"run_id": "attr", "domain": "math", "backend": "verl", "agent": "recipe",
                                    "rounds": 1, "candidates": 0, "model_path": str(ensure_base_model()),
                                    "backend_options": {"job_python": str(stand_in)},
                                    "backtest": BacktestSettings(sample_groups=8).model_dump(),
                                    "evaluation": EvaluationSettings(heldout_size=4).model_dump()})
    rd.save_state({"round": 0, "phase": "train", "last_good_commit": good, "policy_ref": None, "rounds": {}})
    train = rd.round_dir(0) / "train"

    done = run_cli(rd)
    out = " ".join((done.stdout + done.stderr).split())  # the console wraps long lines
    assert done.returncode == 1, out[-3000:]
    assert "stopped by a failure outside the harness; the harness is kept" in out and "CUDA error" in out
    assert repo.head("main") == merged  # the merge survives a GPU fault
    state = rd.state()
    assert (state["round"], state["phase"], state["status"]) == (0, "train", "stopped")
    failure = state["rounds"]["0"]["failures"][0]
    assert failure["party"] == "infrastructure" and failure["commit"] == merged and "CUDA error" in failure["log_tail"]
    assert (train / HARNESS_COMMIT_FILE).read_text().strip() == merged
    assert json.loads((train / "job.json").read_text())["harness_commit"] == merged

    done = run_cli(rd)  # --resume retries the same commit: a second launch, same harness
    assert done.returncode == 1 and repo.head("main") == merged, done.stdout[-3000:]
    job = json.loads((train / "job.json").read_text())
    assert (job["launch"], job["harness_commit"]) == (2, merged)
    assert [f["commit"] for f in rd.state()["rounds"]["0"]["failures"]] == [merged, merged]

    harness_flag.touch()  # now the job dies of the harness, as the sampler proves in its log
    done = run_cli(rd)
    out = done.stdout + done.stderr
    restored = repo.head("main")
    assert restored != merged and repo.read_file("main", "prompts/system.j2") == repo.read_file(
        good, "prompts/system.j2"), out[-3000:]
    failures = rd.state()["rounds"]["0"]["failures"]
    assert failures[2]["party"] == "harness" and HARNESS_FAILURE_MARK in failures[2]["log_tail"]
    # the failed attempt's round folder was kept aside; the retry on the restored harness started a fresh one
    # (launch 1), whose GPU death then stopped the round with the restored harness kept
    assert (rd.round_dir(0) / f"train.failed-3-{merged[:10]}" / HARNESS_COMMIT_FILE).read_text().strip() == merged
    retried = json.loads((train / "job.json").read_text())
    assert retried["launch"] == 1 and retried["harness_commit"] == restored
    assert failures[3]["party"] == "infrastructure" and failures[3]["commit"] == restored and len(failures) == 4
    assert done.returncode == 1 and rd.state()["status"] == "stopped"


def test_a_round_folder_of_another_commit_is_not_resumed(tmp_path):
    from rl_backend.base import INFRASTRUCTURE, RoundSpec, TrainingFailed
    from rl_backend.verl.backend import VerlBackend

    out = tmp_path / "rounds" / "0" / "train"
    (out / "ckpt").mkdir(parents=True)
    (out / "ckpt" / "latest_checkpointed_iteration.txt").write_text("1")
    spec = RoundSpec(run_id="r", round=0, harness_dir=ROOT / "harness_repo" / "seeds" / "math", harness_commit="b" * 40,
                     policy_in=None, out_dir=out, domain="domains.math:MathDomain")
    backend = VerlBackend(base_model=str(ensure_base_model()))
    with pytest.raises(TrainingFailed, match="no harness_commit.txt") as info:  # made before commits were recorded
        backend.train_round(spec)
    assert info.value.party == INFRASTRUCTURE
    (out / HARNESS_COMMIT_FILE).write_text("a" * 40 + "\n")
    with pytest.raises(TrainingFailed, match=f"made under harness {'a' * 12}, not {'b' * 12}"):
        backend.train_round(spec)
    assert not (out / "launches").exists()  # nothing launched
