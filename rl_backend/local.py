"""The local backend: one GRPO round with TRL's GRPOTrainer on CPU, then a held-out eval.

Runbook (one CPU machine; SmolLM2-135M, ~5-10 s per step at group 4 x 2 prompts x 48 tokens)::

    from rl_backend.local import LocalBackend
    spec = RoundSpec(run_id="demo", round=0, harness_dir=Path("harness_repo/seeds/math"), harness_commit="seed",
                     policy_in=None, out_dir=Path("/tmp/demo/rounds/0/train"),
                     domain="domains.math:MathDomain")
    result = LocalBackend().train_round(spec)

What a round does, in order:

1. read ``harness.yaml`` (validated on the host: it is data) and start the harness
   runtime in a sandbox (``sandboxes.harness_client.HarnessSession``): every line of
   harness code (templates, ``reward.py``, ``filters.py``) runs there, never here;
2. draw ``steps_per_round * prompts_per_step`` training tasks from the domain with the
   harness's task mix, have the runtime render their prompts and keep those within
   ``max_prompt_length``;
3. train ``steps_per_round`` optimizer steps, each on ``prompts_per_step`` groups of
   ``group_size`` completions, the runtime scoring and filtering each batch and the
   domain's verifier scoring it on the host (``local_trainer``);
4. save the policy to ``out_dir/policy`` (model + tokenizer, written then renamed);
5. the trusted exam: generate greedily on the domain's held-out tasks with the domain's
   own prompt and budget (``domain.exam_messages``, ``exam_max_tokens``), scored by the
   domain's verifier only; no harness file touches it.

``out_dir/train.log`` gets everything libraries say; ``out_dir/metrics.jsonl`` one line
per optimizer step.  A round continues the previous round's optimizer: AdamW's state is
saved in the policy folder (``optimizer_state.pt``, twice the weights' size), loaded by
the next round that starts from that policy and deleted once that round is done; a
policy without it starts a fresh one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

# OpenMP threads that spin while they wait make torch ~9x slower per decoding step when other
# processes share the cores (measured with bench/bench_generation.py on 2 busy cores).  A short spin
# (GOMP_SPINCOUNT=10000, about 0.1 ms) made a batch-64 step 0.44-0.47 s against 0.71-0.81 s on idle
# cores, but the test suite's two torch workers on 2 cores then ran tests/test_local_backend.py and its
# neighbours in 6 min 48 s against 2 min 36 s; so threads sleep at once unless GOMP_SPINCOUNT is set.
# libgomp reads this once, when torch is first imported.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch
from transformers import AutoTokenizer, PrinterCallback, TrainerCallback
from transformers.utils import logging as hf_logging


from harness_repo.contract import HarnessConfig
from rl_backend.base import (BackendOptionError, DomainLike, HarnessCodeError, Progress, RoundResult, RoundSpec,
                             TaskLike, TrainingFailed, deliver_rows, out_of_space, parse_harness_yaml)
from rl_backend.exam_loop import sit_exam
from rl_backend.local_trainer import OPTIMIZER_STATE, HarnessGRPOTrainer, RolloutRecorder, RoundContext, verify_all
from rl_backend.model import resolve_model
from sandboxes.base import Limits, Sandbox
from sandboxes.harness_client import HarnessFailed, HarnessSession
from trajectory.rows import trajectory_row

log = logging.getLogger("rl_backend.local")

EVAL_BATCH_SIZE = 64
"""Held-out prompts per greedy ``generate``: decoding steps cost about the same for 8 rows or 64 on a CPU."""
RUNTIME_LIMITS = Limits(timeout_s=24 * 3600, memory_mb=1024, cpus=1.0, pids=64)
"""The training-time harness runtime: the backtest's limits, but alive for the whole round."""
BATCH_TIMEOUT_S = 300.0


class LocalBackend:
    """TRL GRPO on CPU; ``base_model`` is any local Hugging Face folder (default: cached SmolLM2-135M)."""

    name = "local"
    compute = "cpu"

    def __init__(self, base_model: str | Path | None = None, sandbox: Sandbox | None = None) -> None:
        if base_model is not None and not (Path(base_model).expanduser() / "config.json").is_file():
            # refused as the run is set up (nothing written yet), not a round later, after Docker and the trainer
            raise BackendOptionError(f"--model-path {base_model} is not a Hugging Face model folder (no config.json); "
                                     "give a folder written by save_pretrained, or leave it out for SmolLM2-135M")
        self.base_model = base_model
        self._sandbox = sandbox

    @property
    def sandbox(self) -> Sandbox:
        """The sandbox the harness runtime trains in (Docker unless one was given)."""
        if self._sandbox is None:
            from sandboxes.docker import DockerSandbox

            self._sandbox = DockerSandbox()
        return self._sandbox

    def train_round(self, spec: RoundSpec, progress: Progress | None = None) -> RoundResult:
        """Train one round as described in the module docstring; ``TrainingFailed`` if harness code fails."""
        spec.out_dir.mkdir(parents=True, exist_ok=True)
        log_path = spec.out_dir / "train.log"
        with quiet_training_logs(log_path):
            try:
                return self._train(spec, progress)
            except (HarnessCodeError, HarnessFailed) as exc:
                log.error("harness code failed: %s", exc)
                raise TrainingFailed(
                    f"Round {spec.round} of run {spec.run_id!r} failed in harness commit {spec.harness_commit[:12]}: "
                    f"{exc}. Traceback in {log_path}", measured=getattr(exc, "measured", None)
                ) from exc
            except Exception as exc:
                log.exception("training crashed outside harness code")
                if full := out_of_space(exc, spec.out_dir):
                    raise full from exc
                raise

    def _train(self, spec: RoundSpec, progress: Progress | None) -> RoundResult:
        config = read_harness_config(spec)
        knobs = config.grpo
        model_path = resolve_model(spec.policy_in or self.base_model)
        log.info("round %d of %s: harness %s, policy %s, knobs %s", spec.round, spec.run_id, spec.harness_commit,
                 model_path, knobs.model_dump())
        tokenizer = AutoTokenizer.from_pretrained(model_path, padding_side="left")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token

        with HarnessSession(self.sandbox, spec.harness_dir, limits=RUNTIME_LIMITS,
                            request_timeout_s=BATCH_TIMEOUT_S) as harness:
            n_prompts = knobs.steps_per_round * knobs.prompts_per_step
            tasks, messages, prompt_text = _fitting_tasks(spec, config, harness, tokenizer, n_prompts)
            from datasets import Dataset

            dataset = Dataset.from_list([
                {"prompt": messages[t.task_id], "task_id": t.task_id, "data_source": t.data_source,
                 "ground_truth": json.dumps(t.ground_truth)} for t in tasks])
            ctx = RoundContext(run_id=spec.run_id, round=spec.round, domain=spec.load_domain().name,
                               harness_commit=spec.harness_commit, policy_ref=str(model_path))
            task_json = {t.task_id: json.dumps(_render_input(t)) for t in tasks}
            recorder = RolloutRecorder(harness, spec.load_domain(), ctx, knobs.group_size, [], prompt_text, task_json,
                                       knobs.dynamic_sampling, knobs.mask_truncated)
            metrics: list[dict] = []
            trainer = HarnessGRPOTrainer(
                model=str(model_path), reward_funcs=[recorder], args=_grpo_config(spec, config),
                train_dataset=dataset, processing_class=tokenizer, recorder=recorder,
                optimizer_state=model_path / OPTIMIZER_STATE,
                callbacks=[_MetricsCallback(spec, metrics, knobs.steps_per_round, progress)],
            )
            trainer.remove_callback(PrinterCallback)  # it prints every log dict to stdout when tqdm is off
            recorder.eos_token_ids = set(trainer.eos_token_ids)
            base = _base_exam(spec, trainer.model, tokenizer, str(model_path))
            (spec.out_dir / "metrics.jsonl").write_text("")
            started = time.monotonic()
            trainer.train()
            train_seconds = time.monotonic() - started
            update = trainer.policy_shift()  # how far the round moved the policy (meta_agent.update_checks)
            log.info("trained %d steps, %d rollouts (optimizer state %s)", knobs.steps_per_round, len(recorder.rows),
                     "carried over" if trainer.carried_optimizer_state else "fresh")

        model = trainer.accelerator.unwrap_model(trainer.model)
        policy_dir = _save_policy(model, tokenizer, spec.out_dir / "policy", trainer.optimizer.state_dict())
        shutil.rmtree(spec.out_dir / "trainer", ignore_errors=True)
        started = time.monotonic()
        heldout = heldout_eval(spec, model, tokenizer, str(policy_dir), knobs.steps_per_round)
        seconds = {**base.pop("seconds", {}), "grpo": round(train_seconds, 1),
                   "exam": round(time.monotonic() - started, 1)}
        eval_summary = _summarise_eval(heldout) | base | {"seconds": seconds, "update": update}
        eval_summary["harness_cost"] = {"cpu_s": harness.summary.get("cpu_s"), "trajectories": len(recorder.rows),
                                        "reward_info_bytes": sum(len(r["reward_info"] or "") for r in recorder.rows)}
        log.info("held-out eval: %s", eval_summary)
        rollouts, heldout = deliver_rows(spec, recorder.rows, heldout)
        _drop_previous_optimizer_state(spec)
        return RoundResult(policy_ref=str(policy_dir), metrics=metrics, rollouts=rollouts, heldout=heldout,
                           eval=eval_summary)


def read_harness_config(spec: RoundSpec) -> HarnessConfig:
    """``harness.yaml`` of the exported commit, validated on the host (data, bounded, never executed)."""
    try:
        config = parse_harness_yaml(spec.harness_dir)
    except Exception as exc:  # noqa: BLE001 - any problem with the file is the harness's
        raise HarnessCodeError("harness.yaml", f"{type(exc).__name__}: {exc}") from exc
    if config.domain != spec.load_domain().name:
        raise HarnessCodeError("harness.yaml",
                               f"domain is {config.domain!r} but this run trains {spec.load_domain().name!r}")
    return config


def _render_input(task: TaskLike) -> dict:
    """What the harness's templates render a task from (archived, so a backtest can render it again)."""
    return {"question": task.question, "vars": task.template_vars()}


@contextmanager
def quiet_training_logs(log_path: Path) -> Iterator[None]:
    """Send this module's and the ML libraries' logs and warnings to ``log_path`` instead of the terminal."""
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    names = {"rl_backend.local": logging.INFO, "transformers": logging.WARNING, "trl": logging.WARNING,
             "accelerate": logging.WARNING, "datasets": logging.WARNING, "py.warnings": logging.WARNING}
    saved = {n: (logging.getLogger(n).level, logging.getLogger(n).propagate) for n in names}
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_default_handler()
    hf_logging.disable_progress_bar()
    for name, level in names.items():
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate = False
    logging.captureWarnings(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")  # once per location, into the log
            yield
    finally:
        logging.captureWarnings(False)
        for name, (level, propagate) in saved.items():
            logger = logging.getLogger(name)
            logger.removeHandler(handler)
            logger.setLevel(level)
            logger.propagate = propagate
        hf_logging.enable_default_handler()
        if bars:
            hf_logging.enable_progress_bar()
        handler.close()


def _seed(*parts: object) -> int:
    return int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:8], 16)


def _fitting_tasks(spec: RoundSpec, config: HarnessConfig, harness: HarnessSession, tokenizer: Any,
                   n: int) -> tuple[list[TaskLike], dict[str, list[dict]], dict[str, str]]:
    """``n`` training tasks whose prompt (rendered by the sandboxed harness) fits ``max_prompt_length``.

    Returns the tasks, their chat messages and their chat-templated prompt texts by task id.
    """
    limit = config.grpo.max_prompt_length
    try:
        # Twice as many as needed, so a few long questions do not fail the round.
        candidates = spec.load_domain().tasks("train", config.tasks, 2 * n, _seed(spec.seed, spec.round))
    except ValueError as exc:  # the harness's task mix names a generator or knob the domain refuses
        raise HarnessCodeError("harness.yaml tasks", str(exc)) from exc
    rendered = harness.render([{"question": t.question, "task": t.template_vars()} for t in candidates])
    errors = [r for r in rendered if isinstance(r, str)]
    if errors:
        raise HarnessCodeError("prompts", f"{len(errors)} of {len(candidates)} prompts failed to render: {errors[0]}")
    tasks, messages, texts, longest, lengths = [], {}, {}, 0, []
    for task, chat in zip(candidates, rendered):
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        length = len(tokenizer(text, add_special_tokens=False)["input_ids"])
        longest = max(longest, length)
        lengths.append(length)
        if length <= limit and task.task_id not in messages:
            tasks.append(task)
            messages[task.task_id], texts[task.task_id] = chat, text
        if len(tasks) == n:
            return tasks, messages, texts
    over = [(n_tokens, text) for n_tokens, chat in zip(lengths, rendered) if n_tokens > limit
            for text in ["\n".join(m["content"] for m in chat)]]
    raise HarnessCodeError("prompts", (
        f"only {len(tasks)} of {len(candidates)} rendered prompts fit max_prompt_length={limit} tokens "
        f"(longest {longest}); shorten prompts/*.j2 or raise grpo.max_prompt_length"),
        measured={"check": "prompt_length", "knob": "max_prompt_length", "limit": limit, "lengths": lengths,
                  "needed": n, "examples": [{"tokens": k, "prompt": t[:400]} for k, t in over[:3]]})


def _grpo_config(spec: RoundSpec, config: HarnessConfig) -> Any:
    from trl import GRPOConfig

    k = config.grpo
    return GRPOConfig(
        output_dir=str(spec.out_dir / "trainer"), use_cpu=True, seed=spec.seed, data_seed=spec.seed,
        # One optimizer step = prompts_per_step groups, generated together, trained in one micro-batch per group.
        per_device_train_batch_size=k.group_size, gradient_accumulation_steps=k.prompts_per_step,
        num_generations=k.group_size, max_steps=k.steps_per_round, shuffle_dataset=False,
        learning_rate=k.learning_rate, lr_scheduler_type="constant", warmup_steps=0, beta=k.beta,
        epsilon=k.epsilon, temperature=k.temperature, max_completion_length=k.max_completion_length,
        mask_truncated_completions=k.mask_truncated, gradient_checkpointing=False, bf16=False,
        model_init_kwargs={"dtype": torch.float32}, logging_steps=1, save_strategy="no", report_to=[],
        disable_tqdm=True, dataloader_num_workers=0, log_level="error",
    )


class _MetricsCallback(TrainerCallback):
    """Writes each optimizer step's metrics to ``metrics.jsonl`` and reports progress."""

    def __init__(self, spec: RoundSpec, sink: list[dict], total: int, progress: Progress | None) -> None:
        self.spec, self.sink, self.total, self.progress = spec, sink, total, progress

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        if not logs or "train_runtime" in logs:  # the end-of-training summary, not a step
            log.info("summary %s", logs)
            return
        entry = {"round": self.spec.round, "step": int(state.global_step), **logs}
        self.sink.append(entry)
        with (self.spec.out_dir / "metrics.jsonl").open("a") as f:
            f.write(json.dumps(entry) + "\n")
        log.info("step %d/%d %s", state.global_step, self.total, json.dumps(logs))
        if self.progress is not None:
            self.progress(int(state.global_step), self.total, entry)


def _save_policy(model: Any, tokenizer: Any, dest: Path, optimizer_state: dict) -> Path:
    """Model, tokenizer and optimizer state to ``dest``, written under a temporary name first so ``dest``
    is always whole."""
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    torch.save(optimizer_state, tmp / OPTIMIZER_STATE)
    if dest.exists():  # a re-run of a round that crashed after saving: the new weights win
        shutil.rmtree(dest)
    tmp.rename(dest)
    return dest


def _drop_previous_optimizer_state(spec: RoundSpec) -> None:
    """Delete the previous round's optimizer state once this round has saved its own and delivered its rows:
    a run keeps one (1 GB for the default policy), its newest round's.  Only the previous round of this
    same run folder (``rounds/<n-1>/train/policy``) is touched, never a policy the run was started from.
    A kill between this and the loop recording the round makes the re-run start a fresh optimizer."""
    if spec.policy_in is None:
        return
    previous = spec.out_dir.resolve().parent.parent / str(spec.round - 1) / "train" / "policy"
    if Path(spec.policy_in).resolve() == previous:
        (previous / OPTIMIZER_STATE).unlink(missing_ok=True)


def heldout_eval(spec: RoundSpec, model: Any, tokenizer: Any, policy_ref: str, step: int) -> list[dict]:
    """The trusted exam: greedy answers on the held-out tasks with the domain's own prompt and budget
    (``rl_backend.exam_loop``), scored by the domain's verifier; rows of split ``heldout``.  No harness file is
    involved."""
    domain: DomainLike = spec.load_domain()
    max_new_tokens = spec.heldout_max_tokens or domain.exam_max_tokens
    specs = spec.heldout_specs or domain.eval_specs
    tasks = domain.tasks("heldout", specs, spec.heldout_size, spec.heldout_seed)
    answers = sit_exam(domain, tasks, model, tokenizer, max_new_tokens, batch_size=EVAL_BATCH_SIZE)
    verdicts = verify_all(domain, [(t.data_source, a.response, t.ground_truth) for t, a in zip(tasks, answers)])
    rows: list[dict] = []
    for i, (task, answer, (verified, info)) in enumerate(zip(tasks, answers, verdicts)):
        rows.append(trajectory_row(
            traj_id=f"{spec.run_id}-r{spec.round}-heldout-{i}", run_id=spec.run_id, round=spec.round,
            step=step, group_id=f"heldout-{i}", sample_idx=0,
            domain=domain.name, task_id=task.task_id, data_source=task.data_source, split="heldout",
            prompt=answer.prompt, response=answer.response,
            messages=answer.messages + [{"role": "assistant", "content": answer.response}],
            ground_truth=task.ground_truth, verified=float(verified), verifier_info=json.dumps(info, default=str),
            response_tokens=len(answer.token_ids), truncated=answer.truncated,
            finish_reason="length" if answer.truncated else "stop",
            harness_commit=spec.harness_commit, policy_ref=policy_ref,
        ))
    return rows


def _base_exam(spec: RoundSpec, model: Any, tokenizer: Any, policy_ref: str) -> dict:
    """The untrained base policy's exam, once per run (when a round starts from no policy), so that
    round 0's training can be judged against it: ``{"base": summary, "base_outcomes": {task_id: 0/1}}``."""
    if spec.policy_in is not None:
        return {}
    started = time.monotonic()
    rows = heldout_eval(spec, model, tokenizer, policy_ref, 0)
    log.info("base policy exam: %s", _summarise_eval(rows))
    return {"base": _summarise_eval(rows), "base_outcomes": {r["task_id"]: r["verified"] for r in rows},
            "seconds": {"base_exam": round(time.monotonic() - started, 1)}}


def _summarise_eval(rows: list[dict]) -> dict:
    """Accuracy overall and per data source, plus length and truncation, from verifier scores only."""
    n = len(rows)
    by_source: dict[str, list[float]] = {}
    for r in rows:
        by_source.setdefault(r["data_source"], []).append(r["verified"])
    return {
        "heldout_accuracy": sum(r["verified"] for r in rows) / n if n else 0.0,
        "n": n,
        "by_source": {s: sum(v) / len(v) for s, v in sorted(by_source.items())},
        "truncated_frac": sum(r["truncated"] for r in rows) / n if n else 0.0,
        "mean_response_tokens": sum(r["response_tokens"] for r in rows) / n if n else 0.0,
    }
