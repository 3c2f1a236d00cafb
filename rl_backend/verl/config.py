"""One round's ``verl.trainer.main_ppo`` command: Hydra overrides from harness.yaml knobs and the launch options.

    plan = RoundPlan.for_round(spec.out_dir, launch=1)
    overrides = build_overrides(config.grpo, LaunchOptions(gpus=8), plan, model_path="/models/Qwen3-4B")
    command(overrides)   # [python, -m, verl.trainer.main_ppo, algorithm.adv_estimator=grpo, ...]

Everything a job writes stays inside the round folder (``RoundPlan``): data, rollout and
validation dumps, checkpoints, Hydra's folder, the reward entry's records and, per launch,
``launches/<k>/metrics.jsonl`` (verl's file logger truncates its file on every start).

Knob mapping (``harness_repo.contract.GRPOKnobs`` -> verl 0.9.1):
``group_size`` -> ``rollout.n``; ``prompts_per_step`` -> ``data.train_batch_size`` and
``actor.ppo_mini_batch_size`` (one optimizer step per training step, as the local backend);
``steps_per_round`` -> ``trainer.total_training_steps`` (``total_epochs`` large, so the last step
is verl's ``is_last_step`` and is checkpointed); ``learning_rate`` -> ``actor.optim.lr`` (constant
schedule); ``beta`` -> ``actor.use_kl_loss``/``kl_loss_coef``; ``epsilon`` -> ``actor.clip_ratio``;
``temperature``, ``max_completion_length``, ``max_prompt_length`` -> rollout and data keys;
``dynamic_sampling`` -> ``algorithm.filter_groups`` (handed to our sampler, which owns filtering once a
custom sampler is set); the harness's per-trajectory ``keep`` -> ``trainer.v1.sampler.custom_sampler``,
which also judges each complete group through the harness runtime (``keep_group``, ``mask_truncated``:
a response of ``data.max_response_length`` tokens is truncated, ``dynamic_sampling``) with the settings
in ``trainer.v1.sampler.sampler_kwargs``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from harness_repo.contract import GRPOKnobs
from rl_backend.base import BackendOptions

REWARD_ENTRY = Path(__file__).with_name("reward_entry.py")
SAMPLER = Path(__file__).with_name("sampler.py")
SAMPLER_CLASS = "KeepMaskReplayBuffer"
AGENT_LOOPS = Path(__file__).with_name("agent_loops.yaml")
AGENT_LOOP = "swe_agent"
OPTIM_CARRY = "rl_backend.verl.optim_carry"
"""Imported by verl's actor workers (``model.external_lib``) when a round carries the previous optimizer state."""
PROJECT = "meta_agent"
HARNESS_FAILURE_MARK = "meta-agent: the harness failed:"
"""Starts the error the sampler raises when the harness left nothing to train: a job log holding it died of the
harness (``rl_backend.base.HARNESS``); any other job death is the infrastructure's."""
HARNESS_COMMIT_FILE = "harness_commit.txt"
"""In a round's train folder: the harness commit its data and checkpoints were made under."""


class LaunchOptions(BackendOptions):
    """Where and how a round's job runs: the run's options (``--gpus 8 --nodes 2 ...``), not the harness's."""

    title: ClassVar[str] = ("GPU training (--backend verl; every node needs this project with `pip install .[verl]` "
                            "and a rollout engine, Docker with the sandbox image, and the run folder and --model-path "
                            "at the same paths)")

    gpus: int = Field(1, ge=1)
    """GPUs per node (``trainer.n_gpus_per_node``)."""
    nodes: int = Field(1, ge=1)
    """Nodes (``trainer.nnodes``); more than one needs --ray-address or --ray-job-address."""
    ray_address: str | None = None
    """Ray cluster to join (RAY_ADDRESS); default: start Ray inside each job on this node."""
    ray_job_address: str | None = None
    """Submit each round with `ray job submit --address URL` (a Ray job server, e.g. http://head:8265) instead of
    running it here; the submission id is kept in the round folder so --resume re-attaches. The run folder must be
    on a filesystem shared by this host and every node, and the cluster's `python` needs `pip install .[verl]`."""
    engine: Literal["vllm", "sglang"] = "vllm"
    """Rollout engine."""
    save_freq: int = Field(0, ge=0)
    """Checkpoint every N training steps; 0 saves only a round's last step."""
    exam_device: Literal["auto", "cpu"] = "auto"
    """Where the held-out exam runs on this host: auto (its GPU; refused without one when the job trains on a
    cluster), or cpu (examine on this CPU anyway: slow for a multi-billion-parameter model)."""
    job_python: str | None = None
    """The Python that runs each job on this node (`-m verl.trainer.main_ppo`), e.g. a GPU venv's; default: this one."""


@dataclass(frozen=True)
class RoundPlan:
    """The paths one launch of a round uses, all absolute and inside the round folder."""

    root: Path
    launch: int

    @classmethod
    def for_round(cls, out_dir: Path, launch: int) -> RoundPlan:
        return cls(Path(out_dir).resolve(), launch)

    train_file = property(lambda self: self.root / "data" / "train.parquet")
    val_file = property(lambda self: self.root / "data" / "val.parquet")
    rollouts = property(lambda self: self.root / "rollouts")
    validation = property(lambda self: self.root / "val")
    checkpoints = property(lambda self: self.root / "ckpt")
    records = property(lambda self: self.root / "reward_records")
    group_records = property(lambda self: self.root / "group_records")
    hydra = property(lambda self: self.root / "hydra")
    launch_dir = property(lambda self: self.root / "launches" / str(self.launch))
    metrics = property(lambda self: self.launch_dir / "metrics.jsonl")
    log = property(lambda self: self.launch_dir / "job.log")


def quote(value: object) -> str:
    """A Hydra override value that stays a string: commas, ``=``, numbers-as-names and quotes survive."""
    return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"


def build_overrides(knobs: GRPOKnobs, options: LaunchOptions, plan: RoundPlan, *, model_path: str,
                    harness_dir: Path, domain_ref: str, run_id: str, round: int, resume: bool = False,
                    carry_from: Path | None = None, agent_loop: bool = False) -> list[str]:
    """The override list of one launch; ``resume`` continues the round from its last checkpoint; else
    ``carry_from`` (``handoff.handoff_folder``) starts it from the previous round's weights *and optimizer
    state*; ``agent_loop`` rolls out multi-turn episodes in the domain's tool environment (``agent_loop.py``)."""
    n_steps = knobs.steps_per_round
    save_freq = options.save_freq if options.save_freq > 0 else n_steps
    ovr = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={quote(plan.train_file)}", f"data.val_files={quote(plan.val_file)}",
        f"data.train_batch_size={knobs.prompts_per_step}",
        f"data.max_prompt_length={knobs.max_prompt_length}",
        f"data.max_response_length={knobs.max_completion_length}",
        "data.filter_overlong_prompts=True", "data.truncation=error", "data.shuffle=False",
        f"actor_rollout_ref.model.path={quote(model_path)}",
        f"actor_rollout_ref.actor.optim.lr={knobs.learning_rate}",
        "actor_rollout_ref.actor.optim.lr_scheduler_type=constant",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={knobs.prompts_per_step}",
        "actor_rollout_ref.actor.ppo_epochs=1",
        f"actor_rollout_ref.actor.clip_ratio={knobs.epsilon}",
        f"actor_rollout_ref.actor.use_kl_loss={knobs.beta > 0}",
        f"actor_rollout_ref.actor.kl_loss_coef={knobs.beta}",
        "actor_rollout_ref.actor.entropy_coeff=0",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True",
        # the next round starts from this round's HF weights (model.path) and its optimizer state (handoff.py)
        "actor_rollout_ref.actor.checkpoint.save_contents=[model,optimizer,extra,hf_model]",
        # verl's default loads ${.save_contents}; the HF export is model.path, never loaded from the checkpoint
        "actor_rollout_ref.actor.checkpoint.load_contents=[model,optimizer,extra]",
        f"actor_rollout_ref.rollout.name={options.engine}",
        f"actor_rollout_ref.rollout.n={knobs.group_size}",
        f"actor_rollout_ref.rollout.temperature={knobs.temperature}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
        # mandatory (???) even with the reward model disabled
        f"reward.reward_model.rollout.name={options.engine}",
        f"reward.custom_reward_function.path={quote(REWARD_ENTRY)}",
        "reward.custom_reward_function.name=compute_score",
        f"+reward.custom_reward_function.reward_kwargs.harness_dir={quote(Path(harness_dir).resolve())}",
        f"+reward.custom_reward_function.reward_kwargs.domain_ref={quote(domain_ref)}",
        f"+reward.custom_reward_function.reward_kwargs.records_dir={quote(plan.records)}",
        f"trainer.v1.sampler.custom_sampler.path={quote(SAMPLER)}",
        f"trainer.v1.sampler.custom_sampler.name={SAMPLER_CLASS}",
        f"+trainer.v1.sampler.sampler_kwargs.train_batch_size={knobs.prompts_per_step}",
        # the sampler judges whole groups through the same harness runtime (keep_group, mask_truncated, ...)
        f"+trainer.v1.sampler.sampler_kwargs.harness_dir={quote(Path(harness_dir).resolve())}",
        f"+trainer.v1.sampler.sampler_kwargs.domain_ref={quote(domain_ref)}",
        f"+trainer.v1.sampler.sampler_kwargs.tokenizer_path={quote(model_path)}",
        f"+trainer.v1.sampler.sampler_kwargs.max_response_length={knobs.max_completion_length}",
        f"+trainer.v1.sampler.sampler_kwargs.dynamic_sampling={knobs.dynamic_sampling}",
        f"+trainer.v1.sampler.sampler_kwargs.mask_truncated={knobs.mask_truncated}",
        f"+trainer.v1.sampler.sampler_kwargs.group_records_dir={quote(plan.group_records)}",
        f"+trainer.v1.sampler.sampler_kwargs.launch={plan.launch}",
        f"trainer.n_gpus_per_node={options.gpus}", f"trainer.nnodes={options.nodes}",
        f"trainer.project_name={PROJECT}", f"trainer.experiment_name={quote(f'{run_id}-r{round}')}",
        "trainer.logger=[console,file]",
        f"trainer.default_local_dir={quote(plan.checkpoints)}",
        f"trainer.rollout_data_dir={quote(plan.rollouts)}",
        f"trainer.validation_data_dir={quote(plan.validation)}",
        f"trainer.total_training_steps={n_steps}", "trainer.total_epochs=100000",
        f"trainer.save_freq={save_freq}", "trainer.test_freq=-1", "trainer.val_before_train=False",
        *resume_overrides(resume, carry_from),
        f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={quote(plan.metrics)}",
        f"hydra.run.dir={quote(plan.hydra)}",
    ]
    if agent_loop:
        ovr += [f"actor_rollout_ref.rollout.agent.agent_loop_config_path={quote(AGENT_LOOPS)}",
                f"actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP}"]
    if knobs.dynamic_sampling:
        # the built-in sampler's group filter; with a custom sampler verl hands it the kwargs below instead
        ovr += ["algorithm.filter_groups.enable=True", "algorithm.filter_groups.metric=reward",
                "algorithm.filter_groups.max_inflight_gen_batches=1",
                "+trainer.v1.sampler.sampler_kwargs.filter_groups_metric=reward"]
    return ovr


def resume_overrides(resume: bool, carry_from: Path | None) -> list[str]:
    """Where a launch's trainer state comes from: the round's own last checkpoint (``resume``), the previous
    round's through the handoff folder (``carry_from``), or nowhere (the first round, a fresh policy)."""
    if resume:
        return ["trainer.resume_mode=auto"]
    if carry_from is not None:
        # verl's loader restores the saved lr, betas and weight decay over this round's; this module, imported by
        # every actor worker, puts this round's back (optim_carry.py): only the moments and step counts carry
        return ["trainer.resume_mode=resume_path", f"trainer.resume_from_path={quote(carry_from)}",
                f"actor_rollout_ref.model.external_lib={OPTIM_CARRY}"]
    return ["trainer.resume_mode=disable"]


def command(overrides: list[str], python: str = sys.executable) -> list[str]:
    """The argv of one launch (no shell: each override is one argument)."""
    return [python, "-m", "verl.trainer.main_ppo", *overrides]


def submission_id(run_id: str, round: int, launch: int) -> str:
    """The Ray job submission id of one launch: names the run, round and launch, so a restarted controller finds it."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", f"{PROJECT}-{run_id}-r{round}-l{launch}")


def submit_command(overrides: list[str], job_address: str, submission: str) -> list[str]:
    """``ray job submit`` of one launch.  No ``--working-dir``: every path in the overrides is absolute and must
    exist at that path on every node (a shared filesystem for the round folder); the entrypoint runs the
    cluster's own ``python``, which needs ``pip install .[verl]``.  Ray shell-quotes each override."""
    return ["ray", "job", "submit", "--address", job_address, "--submission-id", submission, "--no-wait",
            "--", *command(overrides, python="python")]


def job_command(verb: str, job_address: str, submission: str) -> list[str]:
    """``ray job status`` or ``ray job logs`` of a submitted launch."""
    return ["ray", "job", verb, submission, "--address", job_address]
