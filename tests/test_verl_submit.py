"""`--ray-job-address`: each round ``ray job submit``-ted to a real Ray job server on this host (``ray.init`` with
its dashboard, which serves jobs), re-attached after a controller crash through ``ray job status`` and reported
with ``ray job logs``.  The verl job itself needs GPUs: a stand-in entrypoint writes verl's metrics line and fails
as a CUDA job would.  Needs ``pip install .[verl]`` (``.venv-verl``: ray and verl)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 and ray come with `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from rl_backend.base import RoundSpec, TrainingFailed  # noqa: E402
from rl_backend.verl.backend import VerlBackend  # noqa: E402
from rl_backend.verl.config import RoundPlan  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def spec(tmp_path: Path) -> RoundSpec:
    harness = tmp_path / "harness"
    shutil.copytree(REPO / "harness_repo" / "seeds" / "math", harness)
    return RoundSpec(run_id="g1", round=3, harness_dir=harness, harness_commit="c0ffee", policy_in=None,
                     out_dir=tmp_path / "rounds" / "3" / "train", domain="domains.math:MathDomain",
                     heldout_size=2)


STAND_IN = textwrap.dedent("""
    import json, pathlib, sys, time
    metrics, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    metrics.write_text(json.dumps({"step": 1, "data": {"critic/score/mean": 0.5}}) + "\\n")
    while not go.exists():          # the controller has re-attached and read step 1
        time.sleep(0.05)
    print("CUDA error: out of memory", flush=True)
    sys.exit(3)
""")


@pytest.fixture(scope="module")
def job_server():
    import ray

    from ray.job_submission import JobSubmissionClient

    context = ray.init(num_cpus=1, include_dashboard=True, dashboard_host="127.0.0.1", log_to_driver=False)
    address = f"http://{context.dashboard_url}"
    client = JobSubmissionClient(address)
    while True:  # the dashboard answers before its job agent has registered: ready once a probe job is taken
        try:
            client.submit_job(entrypoint="true", submission_id="probe")
            break
        except RuntimeError as exc:
            if "No available agent" not in str(exc):
                raise
    yield address
    ray.shutdown()


def ray_cli(argv: list[str]) -> list[str]:
    """The generated argv with this environment's ``ray`` (the cluster's nodes have theirs on PATH)."""
    assert argv[0] == "ray"
    return [str(Path(sys.executable).parent / "ray"), *argv[1:]]


def test_dry_run_prints_the_ray_job_submit_command(tmp_path: Path):
    s = spec(tmp_path)
    plan = VerlBackend(base_model="/models/base", ray_job_address="http://head:8265", exam_device="cpu").dry_run(s)
    assert plan.startswith("command: ray job submit --address http://head:8265 --submission-id meta_agent-g1-r3-l1 "
                           "--no-wait -- python -m verl.trainer.main_ppo \\\n")


@pytest.mark.slow  # a Ray job server takes ~20 s to start on 2 cores
def test_ray_accepts_the_generated_submit_command(tmp_path: Path, job_server: str):
    from rl_backend.verl.config import job_command, submit_command

    overrides = ["data.train_files='/shared/run/data/train.parquet'", "trainer.experiment_name='r1-r0'"]
    argv = submit_command(overrides, job_server, "meta_agent-r1-r0-l1")
    # python -m verl.trainer.main_ppo stays out of reach (no GPU here): the entrypoint only echoes its overrides
    argv[argv.index("--") + 1:] = ["python", "-c", "import sys; print(sys.argv[1:])", *overrides]
    assert subprocess.run(ray_cli(argv), capture_output=True).returncode == 0
    logs = ""
    while "trainer.experiment_name" not in logs:  # the job's driver log, once it has run
        logs = subprocess.run(ray_cli(job_command("logs", job_server, "meta_agent-r1-r0-l1")), capture_output=True,
                              text=True).stdout
    # each override reached the job as one argument, its Hydra quotes intact
    assert "[\"data.train_files='/shared/run/data/train.parquet'\", \"trainer.experiment_name='r1-r0'\"]" in logs


@pytest.mark.slow
def test_resume_reattaches_to_a_submitted_job_and_reports_its_log_when_it_fails(tmp_path: Path, job_server: str):
    from rl_backend.verl.config import submit_command

    s = spec(tmp_path)
    plan = RoundPlan.for_round(s.out_dir, 1)
    plan.launch_dir.mkdir(parents=True)
    go = tmp_path / "go"
    argv = submit_command([], job_server, "meta_agent-g1-r3-l1")
    argv[argv.index("--") + 1:] = [sys.executable, "-c", STAND_IN, str(plan.metrics), str(go)]
    # what a controller that died after submitting left behind: the submission id in job.json
    (plan.root / "job.json").write_text(json.dumps({"submission_id": "meta_agent-g1-r3-l1",
                                                    "job_address": job_server, "launch": 1, "resume": False}))
    assert subprocess.run(ray_cli(argv), capture_output=True).returncode == 0
    env_path = str(Path(sys.executable).parent)
    with pytest.MonkeyPatch.context() as mp:  # the controller's PATH has the cluster's `ray`, as on a login node
        mp.setenv("PATH", env_path, prepend=":")
        with pytest.raises(TrainingFailed, match="(?s)exited with 1.*CUDA error: out of memory"):
            VerlBackend(base_model="/models/base", ray_job_address=job_server, exam_device="cpu").train_round(
                s, lambda step, total, metrics: go.touch())
    assert not (s.out_dir / "launches" / "2").exists()  # re-attached: nothing submitted a second time
