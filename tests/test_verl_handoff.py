"""Round n+1 of a verl run continues round n's optimizer, and whose fault an invalid verl configuration is.

- the composed config of round n+1 resumes round n's actor checkpoint with its optimizer state through the round's
  ``handoff/global_step_0``; verl 0.9.1's own ``_load_checkpoint`` reads it as step 0 with no data position, and
  loads the actor from round n's checkpoint; a round the loop rolled back carries the older round's checkpoint;
- a checkpoint that cannot be carried honestly (trained under another harness commit than the run recorded, no
  recorded commit, no optimizer state, shards for another GPU count, a round that carried another one before) is
  refused naming the fix;
- an invalid configuration is the harness's when the run's options validate with the GPU seed profile's knobs,
  else the user's (exit 2), and nothing is launched either way.

Needs verl 0.9.1 (``.venv-verl``); runs inside ``test_verl_suite`` in CI.  The FSDP shards are empty files named
as verl's ``FSDPCheckpointManager`` names them (no GPU here to write real ones); only their names are read.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from rl_backend.base import HARNESS, INFRASTRUCTURE, BackendOptionError, RoundSpec, TrainingFailed  # noqa: E402
from rl_backend.model import ensure_base_model  # noqa: E402
from rl_backend.verl.backend import VerlBackend  # noqa: E402
from rl_backend.verl.config import HARNESS_COMMIT_FILE, RoundPlan  # noqa: E402
from rl_backend.verl.handoff import CARRY_FILE, find_carry, prepare_handoff  # noqa: E402
from rl_backend.verl.validate import compose, validate_overrides  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TRAINED, OTHER = "a" * 40, "b" * 40


def previous_round(run: Path, commit: str | None = TRAINED, world_size: int = 1, step: int = 2,
                   round: int = 2) -> Path:
    """Round 2's train folder as a verl job leaves it: the FSDP actor checkpoint (model, optimizer and extra shards
    per rank, the HF export) and the harness commit it trained under; returns the HF export (the next policy_in)."""
    folder = run / "rounds" / str(round) / "train"
    actor = folder / "ckpt" / f"global_step_{step}" / "actor"
    actor.mkdir(parents=True)
    for rank in range(world_size):
        for kind in ("model", "optim", "extra_state"):
            (actor / f"{kind}_world_size_{world_size}_rank_{rank}.pt").write_bytes(b"")
    (actor / "huggingface").symlink_to(ensure_base_model(), target_is_directory=True)
    (folder / "ckpt" / "latest_checkpointed_iteration.txt").write_text(str(step))
    if commit is not None:
        (folder / HARNESS_COMMIT_FILE).write_text(commit + "\n")
    return actor / "huggingface"


def next_round(run: Path, policy_in: Path | None, policy_commit: str | None = TRAINED, knobs: str = "") -> RoundSpec:
    harness = run / "harness"
    if not harness.exists():
        shutil.copytree(REPO / "harness_repo" / "seeds" / "math", harness)
    text = (harness / "harness.yaml").read_text()
    for line in filter(None, knobs.split(";")):  # "group_size: 3;prompts_per_step: 3"
        key = line.split(":")[0].strip()
        text, found = re.subn(rf"(?m)^(\s+){key}: .*$", rf"\g<1>{line.strip()}", text)
        assert found == 1, key
    (harness / "harness.yaml").write_text(text)
    return RoundSpec(run_id="h1", round=3, harness_dir=harness, harness_commit="c" * 40,
                     policy_in=None if policy_in is None else str(policy_in), policy_commit=policy_commit,
                     out_dir=run / "rounds" / "3" / "train", domain="domains.math:MathDomain")


def test_round_n_plus_1_resumes_round_ns_checkpoint_with_its_optimizer_state(tmp_path):
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    hf = previous_round(tmp_path)
    spec = next_round(tmp_path, hf)
    backend = VerlBackend(base_model=str(ensure_base_model()))
    plan = RoundPlan.for_round(spec.out_dir, 1)
    carry = find_carry(spec, backend.world_size)
    resume_from = prepare_handoff(spec, carry, plan)
    ovr = backend.overrides(spec, plan, resume=False, carry_from=resume_from)
    plan.launch_dir.mkdir(parents=True)
    assert validate_overrides(ovr).ok
    cfg = compose(ovr)
    assert cfg.trainer.resume_mode == "resume_path" and cfg.trainer.resume_from_path == str(resume_from)
    assert list(cfg.actor_rollout_ref.actor.checkpoint.load_contents) == ["model", "optimizer", "extra"]
    assert cfg.actor_rollout_ref.model.path == str(hf)  # the same checkpoint's HF export
    assert (resume_from / "actor").resolve() == hf.parent.resolve()
    assert json.loads((spec.out_dir / CARRY_FILE).read_text()) == {"actor": str(hf.parent), "harness_commit": TRAINED}

    # verl's own resume code on this config: step 0 (the round counts its steps afresh), the actor loaded from
    # round 2's checkpoint through the link, no data position (round 3 trains on its own prompts from the start)
    loaded: list[str] = []
    trainer = SimpleNamespace(config=cfg, use_critic=False, trainer_mode="sync",
                              actor_rollout_wg=SimpleNamespace(load_checkpoint=lambda local_path, **_: loaded.append(
                                  local_path)),
                              train_dataloader=SimpleNamespace(load_state_dict=lambda state: loaded.append("data")))
    PPOTrainer._load_checkpoint(trainer)
    assert trainer.global_steps == 0 and loaded == [str(resume_from / "actor")]
    assert Path(loaded[0]).resolve() == hf.parent.resolve()


def test_a_rolled_back_round_carries_the_older_rounds_checkpoint(tmp_path):
    """Round 2's exam fell, so the loop hands round 3 round 1's policy and the commit that trained it
    (``meta_agent.run.lineage``): round 3 carries round 1's weights and optimizer state, and naming round 2's
    commit for round 1's folder is refused."""
    older = previous_round(tmp_path, TRAINED, round=1)
    previous_round(tmp_path, OTHER, round=2)  # the fallen round, trained under another commit
    carry = find_carry(next_round(tmp_path, older, TRAINED), 1)
    assert carry.actor == older.parent and carry.harness_commit == TRAINED
    with pytest.raises(TrainingFailed, match="trained under harness aaaaaaaa"):
        find_carry(next_round(tmp_path, older, OTHER), 1)


def test_the_dry_run_shows_the_carry_and_the_rounds_own_checkpoint_wins(tmp_path):
    spec = next_round(tmp_path, previous_round(tmp_path))
    backend = VerlBackend(base_model=str(ensure_base_model()))
    report = backend.dry_run(spec)
    assert "trainer.resume_mode=resume_path" in report.splitlines()
    assert f"trainer.resume_from_path='{spec.out_dir.resolve()}/handoff/global_step_0'" in report.splitlines()
    assert not (spec.out_dir / "handoff").exists()  # a dry run writes nothing
    (spec.out_dir / "ckpt").mkdir(parents=True)  # round 3 checkpointed itself, then died: it resumes its own
    (spec.out_dir / "ckpt" / "latest_checkpointed_iteration.txt").write_text("1")
    lines = backend.dry_run(spec).splitlines()
    assert "trainer.resume_mode=auto" in lines and not any(o.startswith("trainer.resume_from_path") for o in lines)


def test_a_policy_that_is_not_a_verl_checkpoint_starts_a_fresh_optimizer(tmp_path):
    # the first round, or a policy from the local backend: no actor checkpoint to carry
    assert find_carry(next_round(tmp_path, None), 1) is None
    assert find_carry(next_round(tmp_path, ensure_base_model()), 1) is None


@pytest.mark.parametrize("commit, policy_commit, world_size, shards, refusal", [
    (OTHER, TRAINED, 1, 1, f"trained under harness {OTHER[:12]}, "
                           f"but the run's policy came from harness {TRAINED[:12]}"),
    (None, TRAINED, 1, 1, "has no harness_commit.txt"),
    (TRAINED, TRAINED, 8, 1, "holds optimizer shards for 1 GPUs, and this job has 8"),
    (TRAINED, TRAINED, 1, 0, "holds no optimizer state"),
])
def test_a_checkpoint_that_cannot_be_carried_honestly_is_refused(tmp_path, commit, policy_commit, world_size,
                                                                 shards, refusal):
    hf = previous_round(tmp_path, commit)
    if not shards:
        for shard in hf.parent.glob("optim_*"):
            shard.unlink()
    with pytest.raises(TrainingFailed) as refused:
        find_carry(next_round(tmp_path, hf, policy_commit), world_size)
    assert refusal in str(refused.value) and refused.value.party == INFRASTRUCTURE  # main is kept


def test_a_round_that_carried_another_checkpoint_is_not_resumed_from_a_new_one(tmp_path):
    hf = previous_round(tmp_path)
    spec = next_round(tmp_path, hf)
    plan = RoundPlan.for_round(spec.out_dir, 1)
    prepare_handoff(spec, find_carry(spec, 1), plan)
    # round 2 was retrained meanwhile (its folder now another commit's, the run's record with it)
    (hf.parents[3] / HARNESS_COMMIT_FILE).write_text(OTHER + "\n")
    spec = next_round(tmp_path, hf, policy_commit=OTHER)
    with pytest.raises(TrainingFailed, match=f"started from .* \\(harness {TRAINED[:12]}\\).*harness {OTHER[:12]}"):
        prepare_handoff(spec, find_carry(spec, 1), plan)


def test_an_invalid_config_from_the_harness_knobs_is_the_harness_failure(tmp_path):
    # 3 prompts x 3 samples = 9 trajectories cannot be spread over 8 GPUs; the seed profile's 64 x 8 can
    spec = next_round(tmp_path, None, knobs="group_size: 3;prompts_per_step: 3")
    with pytest.raises(TrainingFailed, match="(?s)grpo knobs of harness.yaml.*3\\*3 trajectories") as failed:
        VerlBackend(base_model=str(ensure_base_model()), gpus=8).train_round(spec)
    assert failed.value.party == HARNESS
    assert not (spec.out_dir / "data").exists() and not (spec.out_dir / "launches").exists()  # nothing launched


def test_an_invalid_config_from_the_runs_options_is_the_users_error(tmp_path):
    # 3 GPUs divide neither the harness's 4 x 4 nor the seed profile's 64 x 8 trajectories: the option is wrong
    spec = next_round(tmp_path, None, knobs="group_size: 4;prompts_per_step: 4")
    with pytest.raises(BackendOptionError, match="(?s)the run's options make verl's configuration invalid.*--gpus"):
        VerlBackend(base_model=str(ensure_base_model()), gpus=3).train_round(spec)
    assert not (spec.out_dir / "data").exists() and not (spec.out_dir / "launches").exists()


STAND_IN = """#!{python}
import json, pathlib, sys
if sys.argv[1:3] != ["-m", "verl.trainer.main_ppo"]:  # the controller asking whether its torch sees a GPU: no
    print(False)
    sys.exit(0)
pathlib.Path({argv_file!r}).write_text(json.dumps(sys.argv[1:]))
print("torch.AcceleratorError: CUDA error: an illegal memory access was encountered", flush=True)
sys.exit(1)
"""


@pytest.mark.slow
@pytest.mark.docker
def test_the_cli_hands_round_ns_checkpoint_to_round_n_plus_1_and_refuses_one_of_another_commit(tmp_path,
                                                                                               docker_sandbox):
    import os
    import subprocess
    import sys

    import yaml

    from harness_repo.repo import HarnessRepo
    from meta_agent.config import BacktestSettings, EvaluationSettings
    from meta_agent.run_dir import RunDir, write_json_atomic

    argv_file, stand_in = tmp_path / "argv.json", tmp_path / "job-python"
    stand_in.write_text(STAND_IN.format(python=sys.executable, argv_file=str(argv_file)))
    stand_in.chmod(0o755)
    rd = RunDir(tmp_path / "run")
    rd.path.mkdir()
    repo = HarnessRepo.create(rd.harness, "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(group_size=4, prompts_per_step=2, steps_per_round=2, max_completion_length=16)
    good = repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Tiny knobs")
    write_json_atomic(rd.run_json, {"run_id": "carry", "domain": "math", "backend": "verl", "agent": "recipe",
                                    "rounds": 4, "candidates": 0, "model_path": str(ensure_base_model()),
                                    "backend_options": {"job_python": str(stand_in)},
                                    "backtest": BacktestSettings(sample_groups=8).model_dump(),
                                    "evaluation": EvaluationSettings(heldout_size=4).model_dump()})
    hf = previous_round(rd.path, commit=good)  # rounds/2/train: what round 2 left, trained under `good`
    rd.save_state({"round": 3, "phase": "train", "last_good_commit": good, "policy_ref": str(hf), "rounds": {}})

    def run_cli() -> str:
        done = subprocess.run([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(rd.path)], cwd=REPO,
                              capture_output=True, text=True, timeout=600, env=os.environ | {"COLUMNS": "200"})
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
        return " ".join((done.stdout + done.stderr).split())

    assert "CUDA error" in run_cli()  # the job ran (and died of the "GPU"): look at what it was asked to do
    argv = json.loads(argv_file.read_text())
    handoff = rd.round_dir(3).resolve() / "train" / "handoff" / "global_step_0"
    assert "trainer.resume_mode=resume_path" in argv and f"trainer.resume_from_path='{handoff}'" in argv
    assert "actor_rollout_ref.actor.checkpoint.load_contents=[model,optimizer,extra]" in argv
    assert (handoff / "actor").resolve() == hf.parent.resolve()

    argv_file.unlink()
    (hf.parents[3] / HARNESS_COMMIT_FILE).write_text(OTHER + "\n")  # round 2's folder now another commit's
    out = run_cli()
    assert f"was trained under harness {OTHER[:12]}, but the run's policy came from harness {good[:12]}" in out
    assert not argv_file.exists() and repo.head("main") == good  # nothing launched, the harness kept
