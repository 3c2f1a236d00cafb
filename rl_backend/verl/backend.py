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
   when it fails (the round folder must be on a filesystem every node shares);
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
   because ``save_contents`` includes ``hf_model``); the next round starts a fresh optimizer and
   step counter from it with the same constant learning rate.  (The local backend carries AdamW's
   state across rounds; verl's own resume would also restore its step counter and data position,
   so it is not used here.)
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness_repo.contract import HarnessConfig
from rl_backend.base import (BackendOptionError, Progress, RoundResult, RoundSpec, TrainingFailed, infrastructure_failure,
                             parse_harness_yaml)
from rl_backend.verl.config import (HARNESS_COMMIT_FILE, HARNESS_FAILURE_MARK, LaunchOptions, RoundPlan, build_overrides,
                                    command, job_command, quote, submission_id, submit_command)
from rl_backend.verl.preflight import preflight
from sandboxes.base import Limits, Sandbox
from sandboxes.processes import identity, running

RENDER_LIMITS = Limits(timeout_s=600, memory_mb=1024, cpus=1.0, pids=64)
POLL_S = 2.0
LOG_TAIL_LINES = 40


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

    @property
    def cluster(self) -> str | None:
        """The Ray cluster the job runs in, if not one started on this node."""
        return self.options.ray_address or self.options.ray_job_address

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

    def overrides(self, spec: RoundSpec, plan: RoundPlan, resume: bool) -> list[str]:
        """The override list of one launch of ``spec``'s round."""
        knobs = self.harness_config(spec).grpo
        model = spec.policy_in or self.base_model
        # no validation in the job (test_freq=-1): the exam runs after it, with the domain's budget (exam.py)
        return build_overrides(knobs, self.options, plan, model_path=str(model), harness_dir=spec.harness_dir,
                               domain_ref=spec.domain, run_id=spec.run_id, round=spec.round, resume=resume,
                               agent_loop=hasattr(spec.load_domain(), "environment"))

    def dry_run(self, spec: RoundSpec) -> str:
        """The exact command, one override per line, and the validation result; launches nothing."""
        from rl_backend.verl.validate import validate_overrides

        plan = RoundPlan.for_round(spec.out_dir, self._launches(spec.out_dir) + 1)
        ovr = self.overrides(spec, plan, resume=self._checkpointed_step(plan) is not None)
        result = validate_overrides(ovr, self.cluster, creates=(plan.launch_dir,))
        result.problems += preflight(spec.policy_in or self.base_model, self.options)
        if self.options.ray_job_address:
            head = shlex.join(submit_command([], self.options.ray_job_address,
                                             submission_id(spec.run_id, spec.round, plan.launch)))
        else:
            env = f"RAY_ADDRESS={quote(self.options.ray_address)} " if self.options.ray_address else ""
            head = f"{env}{' '.join(command([]))}"
        lines = [f"command: {head} \\", *(f"    {shlex.quote(o)} \\" for o in ovr[:-1]), f"    {shlex.quote(ovr[-1])}",
                 "", "overrides:", *ovr, "", f"plan: {plan_size(self.harness_config(spec).grpo, self.options)}", "",
                 f"validation: {result.describe()}"]
        return DryRun("\n".join(lines), ok=result.ok)

    # -- one round

    def train_round(self, spec: RoundSpec, progress: Progress | None = None) -> RoundResult:
        """Train ``spec``'s round as the module docstring says; ``TrainingFailed`` names the log to read."""
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        config = self.harness_config(spec)
        total = config.grpo.steps_per_round
        # a live job is re-attached; one that finished while no controller watched is collected, not relaunched
        job = self._live_job(spec.out_dir) or self._finished_job(spec.out_dir, total)
        if job is not None and job.get("harness_commit", spec.harness_commit) != spec.harness_commit:
            raise infrastructure_failure(f"round {spec.round}: the recorded job ({_job_name(job)}) trains harness "
                                         f"{job['harness_commit'][:12]}, not {spec.harness_commit[:12]}; stop it and "
                                         "move the round folder aside to train the round under the current harness")
        if job is None:
            plan = RoundPlan.for_round(spec.out_dir, self._launches(spec.out_dir) + 1)
            if problems := preflight(spec.policy_in or self.base_model, self.options):
                raise infrastructure_failure(f"round {spec.round}: nothing launched:\n" +
                                             "\n".join(f"  - {p}" for p in problems))
            self._claim_round_folder(spec)
            resume = self._checkpointed_step(plan) is not None
            if not plan.train_file.exists():
                self._write_data(spec, config, plan)
            job = self._launch(spec, plan, resume)
        plan = RoundPlan.for_round(spec.out_dir, job["launch"])
        metrics = self._watch(job, plan, total, spec, progress)
        return self._collect(spec, plan, metrics, total)

    def _write_data(self, spec: RoundSpec, config: HarnessConfig, plan: RoundPlan) -> None:
        from sandboxes.harness_client import HarnessSession

        domain = spec.load_domain()
        n = config.grpo.steps_per_round * config.grpo.prompts_per_step
        try:
            tasks = domain.tasks("train", config.tasks, n, spec.seed)
        except ValueError as exc:
            raise TrainingFailed(f"harness.yaml tasks: {exc}") from exc
        with HarnessSession(self.sandbox, spec.harness_dir, limits=RENDER_LIMITS) as harness:
            rendered = harness.render([{"question": t.question, "task": t.template_vars()} for t in tasks])
        if errors := [r for r in rendered if isinstance(r, str)]:
            raise TrainingFailed(f"prompts: {len(errors)} of {len(tasks)} failed to render: {errors[0]}")
        heldout = domain.tasks("heldout", spec.heldout_specs or domain.eval_specs, spec.heldout_size,
                               spec.heldout_seed)
        plan.train_file.parent.mkdir(parents=True, exist_ok=True)
        _write_parquet(plan.train_file, [_data_row(spec, t, m, i, "train")
                                         for i, (t, m) in enumerate(zip(tasks, rendered))])
        _write_parquet(plan.val_file, [_data_row(spec, t, domain.exam_messages(t), i, "heldout")
                                       for i, t in enumerate(heldout)])

    def _launch(self, spec: RoundSpec, plan: RoundPlan, resume: bool) -> dict:
        from rl_backend.verl.validate import validate_overrides

        plan.launch_dir.mkdir(parents=True, exist_ok=True)
        ovr = self.overrides(spec, plan, resume)
        result = validate_overrides(ovr, self.cluster)
        if not result.ok:  # the run's options or the harness's knobs: nothing ran, so nothing proves the harness
            raise infrastructure_failure(f"round {spec.round}: the verl configuration is invalid, nothing launched "
                                         f"(check the run's options and the harness's grpo knobs):\n{result.describe()}")
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
            exited = _exit_code(job)
            for entry in read_metrics(plan.metrics, spec.round)[len(seen):]:
                seen.append(entry)
                if progress is not None and "reward" in entry:
                    progress(entry["step"], total, entry)
            if exited is not None:
                break
            time.sleep(POLL_S)
        if exited != 0:
            _fetch_job_log(job, plan.log)
            raise job_failure(f"round {spec.round}: the verl job ({_job_name(job)}) exited with {exited}", plan.log)
        return seen

    def _collect(self, spec: RoundSpec, plan: RoundPlan, metrics: list[dict], total: int) -> RoundResult:
        from rl_backend.verl.exam import run_exam
        from rl_backend.archive import Archive
        from rl_backend.archive_checks import check_table
        from rl_backend.verl.dropped import iter_round_tables
        from rl_backend.verl.reward_entry import load_records, record_key

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
        verifier = lambda s, r, g: domain.verify(s, r, json.loads(g))  # noqa: E731
        heldout = run_exam(spec, policy, step, self.options.exam_device)
        n = len(heldout)
        summary = {"heldout_accuracy": sum(r["verified"] for r in heldout) / n if n else 0.0, "n": n,
                   "checkpointed_step": step}
        tables = iter_round_tables(plan.rollouts, plan.group_records, spec.run_id, spec.round, split="train",
                                   records=lookup, verifier=verifier, **common)
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
    def _claim_round_folder(spec: RoundSpec) -> None:
        """Record the harness commit this round folder's data and checkpoints are made under; refuse a folder that
        holds another commit's (resuming it would train one round under two harnesses)."""
        marker = Path(spec.out_dir) / HARNESS_COMMIT_FILE
        recorded = marker.read_text().strip() if marker.exists() else None
        if recorded is None:
            if any((Path(spec.out_dir) / name).exists() for name in ("ckpt", "data")):
                raise infrastructure_failure(
                    f"round {spec.round}: {spec.out_dir} holds data or checkpoints but no {HARNESS_COMMIT_FILE}, so "
                    "which harness they were made under is unknown; move the folder aside to train the round afresh")
            marker.write_text(spec.harness_commit + "\n")
        elif recorded != spec.harness_commit:
            raise infrastructure_failure(
                f"round {spec.round}: {spec.out_dir} holds data and checkpoints made under harness {recorded[:12]}, not "
                f"{spec.harness_commit[:12]}; resuming them would mix two harnesses in one round. Move the folder "
                "aside to train the round afresh under the current harness")

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
            return job if _exit_code(job) is None else None
        return job if running(job.get("pid"), job.get("identity")) else None

    @classmethod
    def _finished_job(cls, out_dir: Path, total: int) -> dict | None:
        """The round's recorded job if it finished while no controller watched: it exited 0 (a submitted job:
        ``ray job status`` says succeeded; a local one is not our child, so it is gone) and its last checkpoint
        is the round's last step.  Anything less is relaunched from its checkpoint."""
        job = cls._recorded_job(out_dir)
        if job is None or _exit_code(job) != 0:
            return None
        return job if cls._checkpointed_step(RoundPlan.for_round(out_dir, job["launch"])) == total else None


def _exit_code(job: dict) -> int | None:
    """The job's exit status, None while it runs; a re-attached local job (not our child) reports 0 when gone,
    a submitted one what ``ray job status`` says (a job Ray does not know is a failure, never a success)."""
    if "submission_id" in job:
        done = subprocess.run(job_command("status", job["job_address"], job["submission_id"]), capture_output=True,
                              text=True)
        return job_state(done.stdout + done.stderr, done.returncode)
    process = job.get("process")
    if process is not None:
        return process.poll()
    return None if running(job.get("pid"), job.get("identity")) else 0


class DryRun(str):
    """``dry_run``'s report; ``ok`` is False when its validation says INVALID (``--dry-run`` then exits 1)."""

    ok: bool

    def __new__(cls, text: str, ok: bool) -> DryRun:
        report = super().__new__(cls, text)
        report.ok = ok
        return report


def plan_size(knobs: Any, options: LaunchOptions) -> str:
    """What one round asks of the GPUs: trajectories per step and round, and the most tokens one step generates."""
    per_step = knobs.prompts_per_step * knobs.group_size
    tokens = per_step * knobs.max_completion_length
    gpus = options.gpus * options.nodes
    return (f"{knobs.steps_per_round} steps x {knobs.prompts_per_step} prompts x {knobs.group_size} = "
            f"{per_step} trajectories per step, {per_step * knobs.steps_per_round} per round; at most "
            f"{tokens:,} response tokens per step ({tokens // gpus:,} per GPU on {gpus}), prompts up to "
            f"{knobs.max_prompt_length} tokens each")


def job_failure(message: str, log: Path) -> TrainingFailed:
    """A dead job's failure, blamed on the harness only when its log holds the sampler's proof
    (``HARNESS_FAILURE_MARK``: the harness left nothing to train); every other death is the infrastructure's."""
    tail = log_tail(log)
    try:
        proved = HARNESS_FAILURE_MARK in log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        proved = False
    text = f"{message}; last lines of {log}:\n{tail}"
    return TrainingFailed(text, log_tail=tail) if proved else infrastructure_failure(text, tail)


def _job_name(job: dict) -> str:
    return f"Ray job {job['submission_id']}" if "submission_id" in job else f"pid {job['pid']}"


def job_state(output: str, returncode: int) -> int | None:
    """``ray job status``'s answer as an exit status: None while pending or running, 0 succeeded, 1 otherwise."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", output)  # the CLI colours its words
    if returncode == 0 and re.search(r"Job '[^']*' succeeded", text):
        return 0
    if returncode == 0 and re.search(r"Status for job '[^']*': (PENDING|RUNNING)", text):
        return None
    return 1


def _fetch_job_log(job: dict, log: Path) -> None:
    """A submitted job's driver log, from the cluster into ``job.log`` (a local job already writes there)."""
    if "submission_id" in job:
        with log.open("ab") as f:
            subprocess.run(job_command("logs", job["job_address"], job["submission_id"]), stdout=f,
                           stderr=subprocess.STDOUT)


def read_metrics(path: Path, round: int) -> list[dict]:
    """verl's file-logger lines as progress entries, with the ``STEP_METRICS`` under our names (``loss``,
    ``reward``, ``kl``; the sampler already logs the harness counts under ours) beside verl's own."""
    entries = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return entries
    for line in lines:
        try:
            record = json.loads(line)
            data = dict(record["data"])
            step = int(record["step"])
        except (ValueError, KeyError, TypeError):
            continue  # a line being written
        entry = {"round": round, "step": step, **data}
        for ours, theirs in (("loss", "actor/pg_loss"), ("reward", "critic/score/mean"), ("kl", "actor/kl_loss"),
                             ("response_length", "response_length/mean"),
                             ("throughput", "perf/throughput"), ("time_per_step", "perf/time_per_step")):
            if theirs in data:
                entry[ours] = data[theirs]
        entries.append(entry)
    return entries


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except FileNotFoundError:
        return "(no log)"


def _data_row(spec: RoundSpec, task: Any, messages: list[dict], index: int, split: str) -> dict:
    """One verl dataset row; nested values as JSON text so every row has the same Arrow schema."""
    return {"data_source": task.data_source, "prompt": messages, "ability": spec.load_domain().name,
            "reward_model": {"style": "rule", "ground_truth": json.dumps(task.ground_truth)},
            "extra_info": {"index": index, "task_id": task.task_id, "split": split, "run_id": spec.run_id,
                           "round": spec.round, "prompt": messages[-1]["content"]}}


def _write_parquet(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)


