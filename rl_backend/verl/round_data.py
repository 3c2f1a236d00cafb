"""A round's verl datasets: the training prompts the harness renders, and the held-out exam prompts.

    write_round_data(spec, config, plan, sandbox)    # plan.train_file, plan.val_file

``data/train.parquet``: the domain draws ``steps_per_round x prompts_per_step`` training tasks with the
harness's mix, and the sandboxed harness runtime renders their prompts -- except for a domain that trains
in agent mode (SWE: ``domain.agent_messages``), whose rows carry the agent-mode opening the verl agent loop
continues, as agent mode outside verl does (never the patch-mode prompt before the bash environment's).
``data/val.parquet``: the held-out
tasks with the domain's own exam prompt (verl requires the file but never validates: ``trainer.test_freq=-1``,
see ``exam.py``).  Nested values are JSON text so every row has the same Arrow schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from harness_repo.contract import HarnessConfig
from rl_backend.base import RoundSpec, TrainingFailed
from rl_backend.gpu_profile import task_pool_problem
from rl_backend.verl.config import RoundPlan
from sandboxes.base import Limits, Sandbox

RENDER_LIMITS = Limits(timeout_s=600, memory_mb=1024, cpus=1.0, pids=64)


def write_round_data(spec: RoundSpec, config: HarnessConfig, plan: RoundPlan, sandbox: Sandbox) -> None:
    """Draw, render and write the round's training and held-out rows; a harness that fails to render fails it."""
    from sandboxes.harness_client import HarnessSession

    domain = spec.load_domain()
    n = config.grpo.steps_per_round * config.grpo.prompts_per_step
    try:
        tasks = domain.tasks("train", config.tasks, n, spec.seed)
    except ValueError as exc:
        raise TrainingFailed(f"harness.yaml tasks: {exc}") from exc
    if hasattr(domain, "agent_messages") and (problem := task_pool_problem(n, len({t.task_id for t in tasks}))):
        raise TrainingFailed(f"harness.yaml grpo: {problem}")  # a fixed pool of episodes (SWE): not the same again
    if hasattr(domain, "agent_messages"):  # agent mode: one conversation, the domain's
        rendered = [domain.agent_messages(t) for t in tasks]
    else:
        with HarnessSession(sandbox, spec.harness_dir, limits=RENDER_LIMITS) as harness:
            rendered = harness.render([{"question": t.question, "task": t.template_vars()} for t in tasks])
    if errors := [r for r in rendered if isinstance(r, str)]:
        raise TrainingFailed(f"prompts: {len(errors)} of {len(tasks)} failed to render: {errors[0]}")
    heldout = domain.tasks("heldout", spec.heldout_specs or domain.eval_specs, spec.heldout_size,
                           spec.heldout_seed)
    plan.train_file.parent.mkdir(parents=True, exist_ok=True)
    write_parquet(plan.train_file, [data_row(spec, t, m, i, "train") for i, (t, m) in enumerate(zip(tasks, rendered))])
    write_parquet(plan.val_file, [data_row(spec, t, domain.exam_messages(t), i, "heldout")
                                  for i, t in enumerate(heldout)])


def round_pool_problem(spec: RoundSpec, config: HarnessConfig) -> str | None:
    """``gpu_profile.task_pool_problem`` of an agent-mode round's draw (a fixed pool of tasks; a generated domain's
    draws are new problems); None when the mix itself is bad: the round says why."""
    if not hasattr(spec.load_domain(), "agent_messages"):
        return None
    n = config.grpo.steps_per_round * config.grpo.prompts_per_step
    try:
        tasks = spec.load_domain().tasks("train", config.tasks, n, spec.seed)
    except ValueError:
        return None
    return task_pool_problem(n, len({t.task_id for t in tasks}))


def agent_turn_tokens() -> int | None:
    """One agent turn's token cap, as the agent loop registration gives it to the loop (``agent_loops.yaml``)."""
    import yaml

    from rl_backend.verl.config import AGENT_LOOP, AGENT_LOOPS

    entry = next(e for e in yaml.safe_load(AGENT_LOOPS.read_text()) if e["name"] == AGENT_LOOP)
    return entry.get("max_turn_tokens")


def data_row(spec: RoundSpec, task: Any, messages: list[dict], index: int, split: str) -> dict:
    """One verl dataset row; nested values as JSON text so every row has the same Arrow schema."""
    return {"data_source": task.data_source, "prompt": messages, "ability": spec.load_domain().name,
            "reward_model": {"style": "rule", "ground_truth": json.dumps(task.ground_truth)},
            "extra_info": {"index": index, "task_id": task.task_id, "split": split, "run_id": spec.run_id,
                           "round": spec.round, "prompt": messages[-1]["content"]}}


def write_parquet(path: Path, rows: list[dict]) -> None:
    """``rows`` to ``path`` through a temporary file, so a crash never leaves half a dataset."""
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(pa.Table.from_pylist(rows), tmp)
    tmp.replace(path)
