"""``VerlBackend``: one GRPO round as one verl job, planned, validated, launched, watched and imported.

    backend = VerlBackend(base_model="/models/Qwen3-4B", gpus=8)
    print(backend.dry_run(spec))            # the command, one override per line, the validation result
    result = backend.train_round(spec, progress=lambda step, total, m: print(step, m["reward"]))

A round, in order (all files under ``spec.out_dir``, see ``config.RoundPlan``):

1. ``harness.yaml`` is read as data; the domain draws the training tasks with the harness's mix
   and the sandboxed harness runtime renders their prompts (``data/train.parquet``); the held-out
   tasks get the domain's own exam prompt (``data/val.parquet``, which verl requires but never
   validates: ``trainer.test_freq=-1``, see ``exam.py``);
2. the overrides are validated (``validate``); an invalid configuration launches nothing;
3. the job runs as ``python -m verl.trainer.main_ppo ...`` with its output in
   ``launches/<k>/job.log``; ``job.json`` records its pid and start time, so a controller restarted with
   ``--resume`` re-attaches to a live job instead of starting a second one, collects one that finished
   meanwhile (exited 0, checkpointed at the round's last step: steps 5-7 only), and relaunches any other
   dead one from its last checkpoint (``trainer.resume_mode=auto``).  With ``ray_job_address`` the job is
   ``ray job submit --no-wait``-ted to that cluster instead; ``job.json`` holds its submission id (written
   before submitting), ``ray job status`` says whether it lives and ``ray job logs`` fills ``job.log``
   when it fails (the round folder must be on a filesystem every node shares); an invalid configuration
   is the harness's failure when the run's options validate with the GPU seed profile's knobs, else the
   user's (``config_failure``: exit 2, nothing launched);
4. ``launches/<k>/metrics.jsonl`` (verl's file logger) drives the progress display; a job that
   exits non-zero fails the round with the tail of its log, blamed on the harness only when the log holds
   the sampler's proof (``HARNESS_FAILURE_MARK``), else on the infrastructure (``job_failure``); before
   launching, ``preflight`` checks the model folder, the cluster and where the exam runs, and the round
   folder records its harness commit (``harness_commit.txt``): another commit's is never resumed;
5. the rollout dump is imported up to the last checkpointed step (``ingest``), each line joined with
   the reward entry's record (the harness's reward or error, keep), and after it the trajectories the
   sampler dropped (``group_records/``, ``keep: false`` and why), so the archive holds every one judged;
6. the held-out exam runs on this host after the job (``exam.run_exam``): the exported HF weights
   answer the domain's prompts greedily within the domain's budget, scored by its verifier;
   the harness's ``max_completion_length`` never reaches it;
7. the policy for the next round is ``ckpt/global_step_<N>/actor/huggingface`` (HF weights, saved
   because ``save_contents`` includes ``hf_model``), and the next round continues this round's
   optimizer: its job resumes the whole actor checkpoint (weights, AdamW state, scheduler) through a
   ``handoff/global_step_0`` folder of its own, so verl's step counter and data position start afresh
   (``handoff.py``), as the local backend carries AdamW's state.

Modules: ``round_data`` (the datasets), ``jobs`` (a launched job's state, log and failure), ``handoff``
(the round folder's commit, the optimizer carried), ``dry_run`` (the report), ``exam`` (the held-out exam).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness_repo.contract import GRPOKnobs, HarnessConfig
from rl_backend.base import (BackendOptionError, Progress, RoundResult, RoundSpec, TrainingFailed,
                             infrastructure_failure,
                             parse_harness_yaml)
from rl_backend.gpu_profile import GPU_SEED_PROFILE
from rl_backend.verl.config import (LaunchOptions, RoundPlan, build_overrides, command, quote, submission_id,
                                    submit_command)
from rl_backend.verl.dry_run import DryRun, dry_run_report, plan_size  # noqa: F401 - imported from here too
from rl_backend.verl.exam import mode_note
from rl_backend.verl.round_data import agent_turn_tokens, round_pool_problem
from rl_backend.verl.handoff import claim_round_folder, find_carry, handoff_folder, prepare_handoff
from rl_backend.verl.jobs import (exit_code, fetch_job_log, job_failure, job_name, job_state,  # noqa: F401
                                  log_tail, read_metrics)
from rl_backend.verl.preflight import exam_problems, preflight
from rl_backend.verl.round_data import write_round_data
from sandboxes.base import Sandbox
from sandboxes.processes import identity, running

POLL_S = 2.0


class VerlBackend:
    """GRPO rounds through verl 0.9.1 on one node with ``gpus`` GPUs, or ``nodes`` nodes of a Ray cluster."""

    name = "verl"
    compute = "gpu"

    def __init__(self, base_model: str | None = None, sandbox: Sandbox | None = None, **options: Any) -> None:
        """``options`` are :class:`LaunchOptions` fields (``gpus=8, nodes=2, ray_address=...``)."""
        if base_model is None:
            raise BackendOptionError("--backend verl needs --model-path: a Hugging Face model folder that exists at "
                                     "the same path on every node")
        self.base_model = base_model
        self._sandbox = sandbox
        self.options = LaunchOptions.given("verl", options)
        if self.options.ray_address and self.options.ray_job_address:
            raise BackendOptionError("--ray-address and --ray-job-address both name a cluster: a submitted job joins "
                                     "the cluster it is submitted to, so give only --ray-job-address")
        if self.options.nodes > 1 and not self.cluster:
            raise BackendOptionError(f"--nodes {self.options.nodes} needs a Ray cluster holding them: give "
                                     "--ray-address (join it from here) or --ray-job-address (submit to it)")
        if problems := exam_problems(self.options):  # refused at the start of a run, not after its first job
            raise BackendOptionError(problems[0])

    @property
    def cluster(self) -> str | None:
        """The Ray cluster the job runs in, if not one started on this node."""
        return self.options.ray_address or self.options.ray_job_address

    @property
    def world_size(self) -> int:
        """GPUs the job trains on: FSDP's shard count, which a carried optimizer state must match."""
        return self.options.gpus * self.options.nodes

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            from sandboxes.docker import DockerSandbox

            self._sandbox = DockerSandbox()
        return self._sandbox

    # -- planning

    def harness_config(self, spec: RoundSpec) -> HarnessConfig:
        """``harness.yaml`` of the round's harness, validated as data (never executed)."""
        try:
            config = parse_harness_yaml(spec.harness_dir)
        except Exception as exc:  # noqa: BLE001 - any problem with the file is the harness's
            raise TrainingFailed(f"harness.yaml of {spec.harness_commit[:12]}: {type(exc).__name__}: {exc}") from exc
        return config

    def overrides(self, spec: RoundSpec, plan: RoundPlan, resume: bool, carry_from: Path | None = None,
                  knobs: GRPOKnobs | None = None) -> list[str]:
        """The override list of one launch of ``spec``'s round (``knobs``: the harness's unless given)."""
        knobs = knobs or self.harness_config(spec).grpo
        model = spec.policy_in or self.base_model
        # no validation in the job (test_freq=-1): the exam runs after it, with the domain's budget (exam.py)
        return build_overrides(knobs, self.options, plan, model_path=str(model), harness_dir=spec.harness_dir,
                               domain_ref=spec.domain, run_id=spec.run_id, round=spec.round, resume=resume,
                               carry_from=carry_from, agent_loop=hasattr(spec.load_domain(), "environment"))

    def dry_run(self, spec: RoundSpec) -> DryRun:
        """The exact command, one override per line, and the validation result; launches nothing."""
        from rl_backend.verl.validate import validate_overrides

        plan = RoundPlan.for_round(spec.out_dir, self._launches(spec.out_dir) + 1)
        resume = self._checkpointed_step(plan) is not None
        problems = []
        try:
            carry = None if resume else find_carry(spec, self.world_size)
        except TrainingFailed as exc:
            carry, problems = None, [str(exc)]
        ovr = self.overrides(spec, plan, resume=resume, carry_from=handoff_folder(plan) if carry else None)
        result = validate_overrides(ovr, self.cluster, creates=(plan.launch_dir,))
        result.problems += problems + preflight(spec.policy_in or self.base_model, self.options)
        if self.options.ray_job_address:
            head = shlex.join(submit_command([], self.options.ray_job_address,
                                             submission_id(spec.run_id, spec.round, plan.launch)))
        else:
            env = f"RAY_ADDRESS={quote(self.options.ray_address)} " if self.options.ray_address else ""
            head = f"{env}{' '.join(command([]))}"
        domain, config = spec.load_domain(), self.harness_config(spec)
        notes = [note] if (note := mode_note(domain)) else []
        if hasattr(domain, "environment"):  # agent episodes: one turn's cap, from the loop's registration
            notes.append(f"agent turns: at most {agent_turn_tokens()} tokens each, within the episode's "
                         f"{config.grpo.max_completion_length} (data.max_response_length)")
        if problem := round_pool_problem(spec, config):
            result.problems.append(problem)
        return dry_run_report(head, ovr, config.grpo, self.options, result, notes=tuple(notes))

    # -- one round

    def train_round(self, spec: RoundSpec, progress: Progress | None = None) -> RoundResult:
        """Train ``spec``'s round as the module docstring says; ``TrainingFailed`` names the log to read."""
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        config = self.harness_config(spec)
        total = config.grpo.steps_per_round
        # a live job is re-attached; one that finished while no controller watched is collected, not relaunched
        job = self._live_job(spec.out_dir) or self._finished_job(spec.out_dir, total)
        if job is not None and job.get("harness_commit", spec.harness_commit) != spec.harness_commit:
            raise infrastructure_failure(f"round {spec.round}: the recorded job ({job_name(job)}) trains harness "
                                         f"{job['harness_commit'][:12]}, not {spec.harness_commit[:12]}; stop it and "
                                         "move the round folder aside to train the round under the current harness")
        if job is None:
            plan = RoundPlan.for_round(spec.out_dir, self._launches(spec.out_dir) + 1)
            if problems := preflight(spec.policy_in or self.base_model, self.options):
                raise infrastructure_failure(f"round {spec.round}: nothing launched:\n" +
                                             "\n".join(f"  - {p}" for p in problems))
            claim_round_folder(spec)
            resume = self._checkpointed_step(plan) is not None
            # the round's own checkpoint, else the previous round's weights and optimizer state (handoff.py)
            carry = None if resume else find_carry(spec, self.world_size)
            carry_from = prepare_handoff(spec, carry, plan) if carry else None
            ovr = self._validated_overrides(spec, plan, resume, carry_from)  # before the prompts are rendered
            if not plan.train_file.exists():
                write_round_data(spec, config, plan, self.sandbox)
            job = self._launch(spec, plan, ovr, resume)
        plan = RoundPlan.for_round(spec.out_dir, job["launch"])
        metrics = self._watch(job, plan, total, spec, progress)
        return self._collect(spec, plan, metrics, total)

    def _validated_overrides(self, spec: RoundSpec, plan: RoundPlan, resume: bool,
                             carry_from: Path | None) -> list[str]:
        """The launch's overrides once verl's validators and ours accept them; else whose fault (``config_failure``)."""
        from rl_backend.verl.validate import validate_overrides

        ovr = self.overrides(spec, plan, resume, carry_from)
        result = validate_overrides(ovr, self.cluster, creates=(plan.launch_dir,))
        if not result.ok:
            raise self.config_failure(spec, plan, resume, carry_from, result)
        return ovr

    def _launch(self, spec: RoundSpec, plan: RoundPlan, ovr: list[str], resume: bool) -> dict:
        plan.launch_dir.mkdir(parents=True, exist_ok=True)
        if self.options.ray_job_address:
            return self._submit(spec, plan, ovr, resume)
        env = dict(os.environ, **({"RAY_ADDRESS": self.options.ray_address} if self.options.ray_address else {}))
        with plan.log.open("ab") as log:
            argv = command(ovr, python=self.options.job_python or sys.executable)
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=plan.root,
                                       start_new_session=True)
        job = {"pid": process.pid, "identity": identity(process.pid), "launch": plan.launch, "resume": resume,
               "started": time.time(), "command": argv, "harness_commit": spec.harness_commit}
        (plan.root / "job.json").write_text(json.dumps(job, indent=1))
        job["process"] = process
        return job

    def config_failure(self, spec: RoundSpec, plan: RoundPlan, resume: bool, carry_from: Path | None,
                       result: Any) -> Exception:
        """Whose invalid configuration it is: the same options with the GPU seed profile's knobs (a configuration
        known to be sound) validating proves the harness's knobs broke it (``TrainingFailed``, main restored);
        if they fail too, the run's options are wrong (``BackendOptionError``: exit 2, fix the option)."""
        from rl_backend.verl.validate import validate_overrides

        problems = "\n".join(f"  - {p}" for p in result.problems)
        reference = GRPOKnobs.model_validate(GPU_SEED_PROFILE)
        with_reference = validate_overrides(self.overrides(spec, plan, resume, carry_from, knobs=reference),
                                            self.cluster, creates=(plan.launch_dir,))
        if with_reference.ok:
            return TrainingFailed(f"round {spec.round}: the grpo knobs of harness.yaml ({spec.harness_commit[:12]}) "
                                  "make verl's configuration invalid, nothing launched (the run's options validate "
                                  f"with the GPU seed profile's knobs):\n{problems}")
        return BackendOptionError(f"round {spec.round}: the run's options make verl's configuration invalid (with "
                                  "the GPU seed profile's knobs too), nothing launched; fix the option named below "
                                  f"and --resume:\n{problems}")

    def _submit(self, spec: RoundSpec, plan: RoundPlan, ovr: list[str], resume: bool) -> dict:
        """``ray job submit --no-wait``; the submission id is in ``job.json`` before the job exists, so a controller
        that dies at any point finds it (``_live_job``) rather than submitting a second one."""
        submission = submission_id(spec.run_id, spec.round, plan.launch)
        argv = submit_command(ovr, self.options.ray_job_address, submission)
        job = {"submission_id": submission, "job_address": self.options.ray_job_address, "launch": plan.launch,
               "resume": resume, "started": time.time(), "command": argv, "harness_commit": spec.harness_commit}
        (plan.root / "job.json").write_text(json.dumps(job, indent=1))
        with plan.log.open("ab") as log:
            done = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, cwd=plan.root)
        if done.returncode != 0:
            tail = log_tail(plan.log)
            raise infrastructure_failure(f"round {spec.round}: `ray job submit` to {self.options.ray_job_address} "
                                         f"exited with {done.returncode}; last lines of {plan.log}:\n{tail}", tail)
        return job

    def _watch(self, job: dict, plan: RoundPlan, total: int, spec: RoundSpec, progress: Progress | None) -> list[dict]:
        """Report each metrics line as it appears; return them once the job exits, or fail with its log tail."""
        seen: list[dict] = []
        while True:
            exited = exit_code(job)
            for entry in read_metrics(plan.metrics, spec.round)[len(seen):]:
                seen.append(entry)
                if progress is not None and "reward" in entry:
                    progress(entry["step"], total, entry)
            if exited is not None:
                break
            time.sleep(POLL_S)
        if exited != 0:
            fetch_job_log(job, plan.log)
            raise job_failure(f"round {spec.round}: the verl job ({job_name(job)}) exited with {exited}", plan.log)
        return seen

    def _collect(self, spec: RoundSpec, plan: RoundPlan, metrics: list[dict], total: int) -> RoundResult:
        from rl_backend.archive import Archive
        from rl_backend.verl.dropped import iter_round_tables
        from rl_backend.verl.exam import run_exam
        from rl_backend.verl.metering import load_cost
        from rl_backend.verl.reward_entry import load_records, record_key
        from trajectory.archive_checks import check_table

        step = self._checkpointed_step(plan)
        if step != total:  # a re-attached job that died: its exit status is not ours to read
            raise job_failure(f"round {spec.round}: the job ended at checkpoint {step} of {total} steps; "
                              "--resume relaunches it from there", plan.log)
        policy = plan.checkpoints / f"global_step_{step}" / "actor" / "huggingface"
        domain = spec.load_domain()
        records = load_records(plan.records)
        lookup = lambda output, gts: records.get(record_key(output, gts))  # noqa: E731
        common = dict(domain=domain.name, harness_commit=spec.harness_commit, policy_ref=str(policy),
                      up_to_step=step)
        heldout = run_exam(spec, policy, step, self.options.exam_device)
        n = len(heldout)
        summary = {"heldout_accuracy": sum(r["verified"] for r in heldout) / n if n else 0.0, "n": n,
                   "checkpointed_step": step}
        if note := mode_note(domain):  # the round's record says it, as the dry run did
            summary["modes"] = note
        # what harness code cost in the reward workers and the sampler (the tripwire's training_cost_alarm)
        summary["harness_cost"] = load_cost(plan.records, plan.group_records)
        tables = iter_round_tables(plan.rollouts, plan.group_records, spec.run_id, spec.round, split="train",
                                   records=lookup, **common)  # the entry's verdicts: nothing graded twice
        if spec.archive is None:
            rollouts = [row for table, labels in tables
                        for row in check_table(table, f"import of {plan.rollouts}", labels).to_pylist()]
            return RoundResult(policy_ref=str(policy), metrics=metrics, rollouts=rollouts, heldout=heldout,
                               eval=summary)
        # the dump (then the dropped trajectories) streams into the archive chunk by chunk, with the exam, as one
        # part made visible at the end
        with Archive(spec.archive).round_writer(spec.run_id, spec.round) as writer:
            for table, labels in tables:
                writer.write(table, labels)
            writer.write(heldout)
        return RoundResult(policy_ref=str(policy), metrics=metrics, rollouts=[], heldout=[], eval=summary)

    # -- job bookkeeping

    @staticmethod
    def _launches(out_dir: Path) -> int:
        folder = Path(out_dir) / "launches"
        return max((int(p.name) for p in folder.iterdir() if p.name.isdigit()), default=0) if folder.is_dir() else 0

    @staticmethod
    def _checkpointed_step(plan: RoundPlan) -> int | None:
        marker = plan.checkpoints / "latest_checkpointed_iteration.txt"
        try:
            return int(marker.read_text().strip())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _recorded_job(out_dir: Path) -> dict | None:
        """The round's last launch as ``job.json`` records it, or None when there is none (or it is unreadable)."""
        try:
            job = json.loads((Path(out_dir) / "job.json").read_text())
        except (OSError, ValueError):
            return None
        return job if isinstance(job, dict) and type(job.get("launch")) is int else None

    @classmethod
    def _live_job(cls, out_dir: Path) -> dict | None:
        """The round's recorded job if its process is still alive (a controller restarted mid-round)."""
        job = cls._recorded_job(out_dir)
        if job is None:
            return None
        if "submission_id" in job:
            return job if exit_code(job) is None else None
        return job if running(job.get("pid"), job.get("identity")) else None

    @classmethod
    def _finished_job(cls, out_dir: Path, total: int) -> dict | None:
        """The round's recorded job if it finished while no controller watched: it exited 0 (a submitted job:
        ``ray job status`` says succeeded; a local one is not our child, so it is gone) and its last checkpoint
        is the round's last step.  Anything less is relaunched from its checkpoint."""
        job = cls._recorded_job(out_dir)
        if job is None or exit_code(job) != 0:
            return None
        return job if cls._checkpointed_step(RoundPlan.for_round(out_dir, job["launch"])) == total else None

