"""VerlBackend around the GPU step: re-attaching to a live job, progress from verl's metrics file, the round's
dumps, records and checkpoint collected, and a job that died part-way reported with its log tail.

The training step itself needs GPUs; here a real child process stands in for the job and writes what
verl 0.9.1 writes (file-logger lines, ``<step>.jsonl`` dumps, ``latest_checkpointed_iteration.txt``,
the reward entry's records) in verl's formats, one event at a time, waiting for the test's go file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rl_backend.archive import Archive
from rl_backend.base import RoundSpec, TrainingFailed
from rl_backend.verl.backend import VerlBackend
from rl_backend.model import ensure_base_model
from rl_backend.verl.config import RoundPlan
from rl_backend.verl.exam import exam_plan
from rl_backend.verl.reward_entry import record_key
from sandboxes.processes import identity

REPO = Path(__file__).resolve().parents[1]
GOLD = json.dumps({"answer": "7"})

JOB = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    root, last, go, weights = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    while not go.exists():          # the test has re-attached: start "training"
        time.sleep(0.05)
    metrics = root / "launches" / "1" / "metrics.jsonl"
    for step in range(1, last + 1):
        with metrics.open("a") as f:
            f.write(json.dumps({"step": step, "data": {"critic/score/mean": step / 10,
                                "response_length/mean": 20.0, "perf/throughput": 900.0}}) + "\\n")
    print("Traceback: CUDA error: an illegal memory access was encountered", flush=True)
    ckpt = root / "ckpt"
    (ckpt / f"global_step_{last}" / "actor").mkdir(parents=True)
    (ckpt / f"global_step_{last}" / "actor" / "huggingface").symlink_to(weights)  # the exported HF weights
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(last))
""")


def spec(tmp_path: Path) -> RoundSpec:
    harness = tmp_path / "harness"
    shutil.copytree(REPO / "harness_repo" / "seeds" / "math", harness)
    text, found = re.subn(r"steps_per_round: \d+", "steps_per_round: 2", (harness / "harness.yaml").read_text())
    assert found == 1  # whatever the seed trains, these tests' stand-in job runs 2 steps
    (harness / "harness.yaml").write_text(text)
    return RoundSpec(run_id="g1", round=3, harness_dir=harness, harness_commit="c0ffee", policy_in=None,
                     out_dir=tmp_path / "rounds" / "3" / "train", domain="domains.math:MathDomain",
                     heldout_size=2)


def start_job(spec: RoundSpec, last_step: int, go: Path) -> subprocess.Popen:
    """The stand-in job, recorded in job.json as a launch of the backend would record it."""
    plan = RoundPlan.for_round(spec.out_dir, 1)
    plan.launch_dir.mkdir(parents=True)
    log = plan.log.open("w")
    process = subprocess.Popen([sys.executable, "-c", JOB, str(plan.root), str(last_step), str(go),
                                str(ensure_base_model())], stdout=log, stderr=subprocess.STDOUT)
    (plan.root / "job.json").write_text(json.dumps({"pid": process.pid, "identity": identity(process.pid),
                                                    "launch": 1, "resume": False}))
    rollouts = [{"input": "user\nWhat is 3 + 4?\nassistant\n", "output": out, "gts": GOLD, "score": score,
                 "step": 1, "uid": f"9c1d_{i}_0"} for i, (out, score) in enumerate(
                     [("Answer: 7", 1.0), ("Answer: 8", 0.0), ("crash", 0.0)])]
    rollouts.append({"input": "", "output": "", "gts": GOLD, "score": 0.0, "step": 1, "uid": "pad" + "a" * 32 + "_0_0"})
    plan.rollouts.mkdir()
    (plan.rollouts / "1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rollouts))
    plan.records.mkdir()
    # the reward entry's records: the harness's reward and the one verdict of each trajectory (its info as text)
    records = [{"key": record_key("Answer: 7", GOLD), "reward": 1.0, "reward_info": {"pred": "7"}, "keep": True,
                "error": None, "verified": 1.0, "verifier_info": json.dumps({"parsed": "7"})},
               {"key": record_key("Answer: 8", GOLD), "reward": 0.0, "reward_info": {"pred": "8"}, "keep": True,
                "error": None, "verified": 0.0, "verifier_info": json.dumps({"parsed": "8"})},
               {"key": record_key("crash", GOLD), "reward": None, "reward_info": {}, "keep": False,
                "error": "reward: ValueError: cannot parse", "verified": 0.0, "verifier_info": "{}"}]
    (plan.records / "worker-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return process


@pytest.mark.slow  # the exam generates with a real 135M model on CPU
def test_resume_reattaches_to_the_live_job_and_collects_the_round(tmp_path: Path):
    s = dataclasses.replace(spec(tmp_path), archive=tmp_path / "archive")  # rows stream into the archive
    go = tmp_path / "go"
    process = start_job(s, last_step=2, go=go)
    seen = []

    def progress(step, total, metrics):
        seen.append((step, total, metrics["reward"]))
        go.touch()

    go.touch()
    result = VerlBackend(base_model="/models/base").train_round(s, progress)
    assert process.wait() == 0
    assert seen == [(1, 2, 0.1), (2, 2, 0.2)]
    assert not (s.out_dir / "launches" / "2").exists()  # re-attached: no second job on the round
    assert result.policy_ref == str(s.out_dir.resolve() / "ckpt" / "global_step_2" / "actor" / "huggingface")
    assert result.rollouts == [] and result.heldout == []  # the rows are in the archive, as one part
    archive = Archive(tmp_path / "archive")
    assert len(list((tmp_path / "archive").rglob("part-*.parquet"))) == 1
    rows = sorted(archive.rows(run_id="g1", round=3, split="train"), key=lambda r: r["sample_idx"])
    # padding skipped; the harness's reward from its record, None where it failed; the verdict from the record
    assert [(r["response"], r["reward"], r["verified"]) for r in rows] == [
        ("Answer: 7", 1.0, 1.0), ("Answer: 8", 0.0, 0.0), ("crash", None, 0.0)]
    assert rows[2]["reward_info"] == {"keep": False, "error": "reward: ValueError: cannot parse"}
    assert rows[0]["verifier_info"] == {"parsed": "7"}  # carried from the reward entry, never graded again
    # the exam ran after the job on its HF weights: the domain's 2 held-out prompts, within the domain's 96 tokens
    exam, heldout = exam_plan(s), archive.rows(run_id="g1", round=3, split="heldout")
    assert result.eval["n"] == 2 and len(heldout) == 2
    assert [r["messages"][:-1] for r in heldout] == exam.messages
    assert all(r["response_tokens"] <= 96 and r["policy_ref"] == result.policy_ref for r in heldout)
    assert result.eval["heldout_accuracy"] == sum(r["verified"] for r in heldout) / 2
    assert [m["step"] for m in result.metrics] == [1, 2] and result.metrics[0]["throughput"] == 900.0


@pytest.mark.slow  # the exam generates with a real 135M model on CPU
def test_resume_collects_a_job_that_finished_while_no_controller_watched(tmp_path: Path):
    s = dataclasses.replace(spec(tmp_path), archive=tmp_path / "archive")
    go = tmp_path / "go"
    go.touch()
    process = start_job(s, last_step=2, go=go)  # the controller died; the job ran on and finished both steps
    assert process.wait() == 0
    # and the kernel handed its pid to another process, which must not pass for the job (or the controller
    # would wait on it as on a live job)
    job_file = s.out_dir / "job.json"
    other = subprocess.Popen(["sleep", "300"])
    job_file.write_text(json.dumps(dict(json.loads(job_file.read_text()), pid=other.pid)))
    log_before = (s.out_dir / "launches" / "1" / "job.log").read_text()
    dropped = {"uid": "9c1d", "session": 3, "key": "k", "keep": False, "error": None, "step": 1, "launch": 1,
               "dropped": {"output": 0, "prompt": "user\nWhat is 3 + 4?\nassistant\n", "response": "Answer: 9",
                           "gts": GOLD, "data_source": "verl/math", "task_id": "t", "response_tokens": 3,
                           "truncated": False, "reward": 0.0, "reward_info": {}, "reason": "keep_trajectory",
                           "verified": 0.0, "verifier_info": json.dumps({"parsed": "9"})}}
    (s.out_dir / "group_records").mkdir()  # what the sampler recorded of a trajectory it dropped
    (s.out_dir / "group_records" / "node-1-s1.jsonl").write_text(json.dumps(dropped) + "\n")
    try:
        result = VerlBackend(base_model="/models/base").train_round(s)  # --resume
        assert other.poll() is None  # collected without waiting for the pid's new owner to exit
    finally:
        other.kill()
        other.wait()
    assert not (s.out_dir / "launches" / "2").exists()  # collected: no second launch, no relaunch
    assert (s.out_dir / "launches" / "1" / "job.log").read_text() == log_before
    assert result.policy_ref == str(s.out_dir.resolve() / "ckpt" / "global_step_2" / "actor" / "huggingface")
    assert [m["step"] for m in result.metrics] == [1, 2]  # the finished launch's metrics file
    rows = Archive(tmp_path / "archive").rows(run_id="g1", round=3, split="train")
    # the dump (padding skipped) and the dropped trajectory, each with the verdict the reward entry gave it
    assert sorted((r["response"], r["verified"]) for r in rows) == [
        ("Answer: 7", 1.0), ("Answer: 8", 0.0), ("Answer: 9", 0.0), ("crash", 0.0)]
    nine = next(r for r in rows if r["response"] == "Answer: 9")
    assert nine["reward_info"]["keep"] is False and nine["verifier_info"] == {"parsed": "9"}
    assert result.eval["n"] == 2  # and the exam ran on the final weights


def test_a_harness_raising_its_budget_moves_training_not_the_exam(tmp_path: Path):
    s = spec(tmp_path)
    backend, plan = VerlBackend(base_model="/models/base"), RoundPlan.for_round(s.out_dir, 1)
    before, exam_before = backend.overrides(s, plan, resume=False), exam_plan(s)
    harness_yaml = s.harness_dir / "harness.yaml"
    text, found = re.subn(r"max_completion_length: \d+", "max_completion_length: 4096", harness_yaml.read_text())
    assert found == 1
    harness_yaml.write_text(text)  # the adversary: a longer budget, hoping the exam grows with it
    after, exam_after = backend.overrides(s, plan, resume=False), exam_plan(s)
    assert "data.max_response_length=4096" in after and "data.max_response_length=4096" not in before
    # verl never validates (its validation would generate with data.max_response_length) ...
    assert "trainer.test_freq=-1" in after and "trainer.val_before_train=False" in after
    assert not [o for o in after if "val_kwargs" in o]
    # ... and the exam keeps the math domain's budget (96 tokens) and its own prompts
    assert exam_after == exam_before and exam_after.max_tokens == 96 and len(exam_after.messages) == 2
    assert exam_after.messages[0][0]["role"] == "system" and "Answer:" in exam_after.messages[0][0]["content"]


def test_a_job_that_died_part_way_is_reported_with_its_log(tmp_path: Path):
    s = spec(tmp_path)  # two steps planned; the job dies after checkpointing step 1
    go = tmp_path / "go"
    go.touch()
    process = start_job(s, last_step=1, go=go)
    with pytest.raises(TrainingFailed) as failed:
        VerlBackend(base_model="/models/base").train_round(s)
    assert process.wait() == 0
    message = str(failed.value)
    assert failed.value.party == "infrastructure"  # a GPU fault: the round stops, the harness is kept
    assert "ended at checkpoint 1 of 2 steps; --resume relaunches it from there" in message
    assert "CUDA error: an illegal memory access" in message
    # --resume then plans a second launch of the round from its checkpoint, with its own metrics file
    plan = VerlBackend(base_model="/models/base").dry_run(s)
    assert "trainer.resume_mode=auto" in plan and "trainer.resume_mode=disable" not in plan
    assert f"VERL_FILE_LOGGER_PATH='{s.out_dir.resolve()}/launches/2/metrics.jsonl'" in plan

