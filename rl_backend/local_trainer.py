"""The harness inside TRL: its prompts, reward and filters applied to GRPOTrainer, every rollout recorded.

Three pieces, used by ``rl_backend.local``:

- ``Harness.load(dir)`` reads an exported harness commit: ``harness.yaml`` (validated),
  ``prompts/*.j2`` (Jinja ``StrictUndefined``), ``reward.py`` and ``filters.py``
  imported by path.  Only gated commits reach training, so importing them here is
  allowed; any exception they raise becomes ``HarnessCodeError``.
- ``RolloutRecorder`` is the reward function TRL calls once per generation batch: it
  scores each completion with the harness reward (``extra_info``: ``task_id, split,
  index`` (position in the batch), ``traj_id``), the domain's trusted verifier, and
  keeps a trajectory row for each.
- ``HarnessGRPOTrainer`` applies the harness filters (and ``dynamic_sampling``) as loss
  masks right after TRL scored a batch and before it is shuffled into micro-batches:
  a dropped trajectory gets an all-zero completion mask and a zero advantage.
"""

from __future__ import annotations

import importlib.util
import json
import math
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import jinja2
import torch
import yaml
from trl import GRPOTrainer

from harness_repo.contract import HarnessConfig
from meta_agent.domains.base import Domain, Task
from rl_backend.schema import SCHEMA_VERSION


class HarnessCodeError(Exception):
    """Harness code (reward, filters, templates, harness.yaml) failed; ``where`` names the part."""

    def __init__(self, where: str, exc: BaseException) -> None:
        self.where = where
        self.detail = "".join(traceback.format_exception(exc)).rstrip()
        super().__init__(f"{where}: {type(exc).__name__}: {exc}")


def _import_file(path: Path, name: str) -> ModuleType | None:
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise HarnessCodeError(f"importing {path.name}", exc) from exc
    return module


@dataclass
class Harness:
    """An exported harness commit, loaded for training."""

    config: HarnessConfig
    system: jinja2.Template | None
    user: jinja2.Template
    reward_module: ModuleType
    filters_module: ModuleType | None

    @classmethod
    def load(cls, root: Path) -> "Harness":
        """Load ``root``; ``HarnessCodeError`` naming the file that does not load."""
        try:
            config = HarnessConfig.model_validate(yaml.safe_load((root / "harness.yaml").read_text()))
        except Exception as exc:
            raise HarnessCodeError("reading harness.yaml", exc) from exc
        env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)

        def template(name: str) -> jinja2.Template | None:
            path = root / "prompts" / name
            if not path.is_file():
                return None
            try:
                return env.from_string(path.read_text())
            except Exception as exc:
                raise HarnessCodeError(f"parsing prompts/{name}", exc) from exc

        reward = _import_file(root / "reward.py", "harness_reward")
        if reward is None or not callable(getattr(reward, "compute_score", None)):
            raise HarnessCodeError("reward.py", ValueError("reward.py must define compute_score(...)"))
        return cls(config=config, system=template("system.j2"), user=template("user.j2") or env.from_string("{{ question }}"),
                   reward_module=reward, filters_module=_import_file(root / "filters.py", "harness_filters"))

    def messages(self, task: Task) -> list[dict]:
        """The chat prompt for ``task``: rendered system (if any, and non-empty) and user messages."""
        variables = {"question": task.question, "task": task.template_vars()}
        out = []
        try:
            if self.system is not None:
                system = self.system.render(**variables).strip()
                if system:
                    out.append({"role": "system", "content": system})
            out.append({"role": "user", "content": self.user.render(**variables).strip()})
        except Exception as exc:
            raise HarnessCodeError("rendering prompts", exc) from exc
        return out

    def reward(self, data_source: str, response: str, ground_truth: dict, extra_info: dict) -> tuple[float, dict]:
        """The harness reward and its info dict (``{"score": x}`` when it returns a bare number)."""
        try:
            out = self.reward_module.compute_score(data_source, response, ground_truth, extra_info=extra_info)
            info = dict(out) if isinstance(out, dict) else {"score": out}
            score = float(info["score"])
            if not math.isfinite(score):
                raise ValueError(f"score {score} is not finite")
            json.dumps(info, default=str)  # the archive must be able to store it
        except Exception as exc:
            raise HarnessCodeError("reward.py compute_score", exc) from exc
        return score, json.loads(json.dumps(info, default=str))

    def keep_trajectory(self, view: dict) -> bool:
        return self._filter("keep_trajectory", view)

    def keep_group(self, views: list[dict]) -> bool:
        return self._filter("keep_group", views)

    def _filter(self, name: str, arg: Any) -> bool:
        fn = getattr(self.filters_module, name, None) if self.filters_module else None
        if fn is None:
            return True  # the contract makes both filters optional: default keep
        try:
            return bool(fn(arg))
        except Exception as exc:
            raise HarnessCodeError(f"filters.py {name}", exc) from exc


@dataclass
class RoundContext:
    """Fields every row of a round shares."""

    run_id: str
    round: int
    domain: str
    harness_commit: str
    policy_ref: str


def trajectory_view(row: dict) -> dict:
    """What harness code may see of a row: never ``verified``/``verifier_info`` (contract)."""
    keys = ("traj_id", "group_id", "sample_idx", "task_id", "data_source", "prompt", "response",
            "response_tokens", "truncated", "finish_reason", "reward")
    view = {k: row[k] for k in keys}
    view["ground_truth"] = json.loads(row["ground_truth"])
    return view


class RolloutRecorder:
    """The reward function handed to TRL: harness reward + trusted verification + one row per completion.

    TRL calls it once per generation batch (all groups of one optimizer step, each group's
    ``num_generations`` completions consecutive).  ``pending`` holds that batch's rows until
    the trainer has applied the filters; ``rows`` accumulates every row of the round.
    """

    __name__ = "harness_reward"  # TRL names metrics after the reward function

    def __init__(self, harness: Harness, domain: Domain, ctx: RoundContext, group_size: int,
                 eos_token_ids: list[int], prompt_text: dict[str, str]) -> None:
        self.harness, self.domain, self.ctx = harness, domain, ctx
        self.group_size = group_size
        self.eos_token_ids = set(eos_token_ids)
        self.prompt_text = prompt_text  # task_id -> chat-templated prompt the policy saw
        self.pending: list[dict] = []
        self.rows: list[dict] = []

    def __call__(self, prompts: list, completions: list, completion_ids: list[list[int]], **columns: Any) -> list[float]:
        step = int(columns["trainer_state"].global_step)
        self.pending = []
        rewards = []
        for i, (prompt, completion, ids) in enumerate(zip(prompts, completions, completion_ids)):
            group, idx = divmod(i, self.group_size)
            text = completion[-1]["content"] if isinstance(completion, list) else str(completion)
            truncated = bool(ids) and ids[-1] not in self.eos_token_ids
            task_id, source = columns["task_id"][i], columns["data_source"][i]
            ground_truth = json.loads(columns["ground_truth"][i])
            group_id = f"s{step}-g{group}"
            traj_id = f"{self.ctx.run_id}-r{self.ctx.round}-s{step}-g{group}-{idx}"
            reward, reward_info = self.harness.reward(
                source, text, ground_truth, {"task_id": task_id, "split": "train", "index": i, "traj_id": traj_id})
            verified, verifier_info = self.domain.verify(source, text, ground_truth)
            row = {
                "traj_id": traj_id, "run_id": self.ctx.run_id, "round": self.ctx.round, "step": step,
                "group_id": group_id, "sample_idx": idx, "domain": self.ctx.domain, "task_id": task_id,
                "data_source": source, "split": "train", "prompt": self.prompt_text[task_id], "response": text,
                "messages": json.dumps(list(prompt) + [{"role": "assistant", "content": text}]),
                "ground_truth": json.dumps(ground_truth), "reward": reward, "reward_info": json.dumps(reward_info),
                "verified": float(verified), "verifier_info": json.dumps(verifier_info, default=str),
                "response_tokens": len(ids), "truncated": truncated, "finish_reason": "length" if truncated else "stop",
                "harness_commit": self.ctx.harness_commit, "policy_ref": self.ctx.policy_ref,
                "schema_version": SCHEMA_VERSION,
            }
            self.pending.append(row)
            rewards.append(reward)
        self.rows.extend(self.pending)
        return rewards


def keep_mask(harness: Harness, rows: list[dict], group_size: int, dynamic_sampling: bool) -> tuple[list[bool], dict]:
    """Which rows of one generation batch stay in the loss, and counts of why the others left."""
    views = [trajectory_view(r) for r in rows]
    keep = [harness.keep_trajectory(v) for v in views]
    counts = {"dropped_by_trajectory_filter": keep.count(False), "dropped_by_group_filter": 0,
              "dropped_zero_variance": 0}
    for start in range(0, len(rows), group_size):
        members = range(start, start + group_size)
        if not harness.keep_group([views[i] for i in members]):
            counts["dropped_by_group_filter"] += sum(keep[i] for i in members)
            for i in members:
                keep[i] = False
        elif dynamic_sampling and len({rows[i]["reward"] for i in members}) == 1:
            counts["dropped_zero_variance"] += sum(keep[i] for i in members)
            for i in members:
                keep[i] = False
    return keep, counts


class HarnessGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose loss only sees the trajectories the harness filters keep."""

    def __init__(self, *args: Any, recorder: RolloutRecorder, dynamic_sampling: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder = recorder
        self.dynamic_sampling = dynamic_sampling

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        output = super()._generate_and_score_completions(inputs)
        rows = self.recorder.pending
        if len(rows) != output["completion_mask"].size(0):  # TRL changed its batching: refuse to mask blindly
            raise RuntimeError(f"recorded {len(rows)} rollouts for a batch of {output['completion_mask'].size(0)}")
        keep, counts = keep_mask(self.recorder.harness, rows, self.num_generations, self.dynamic_sampling)
        kept = torch.tensor(keep, dtype=output["completion_mask"].dtype, device=output["completion_mask"].device)
        output["completion_mask"] = output["completion_mask"] * kept.unsqueeze(1)
        output["advantages"] = output["advantages"] * kept.to(output["advantages"].dtype)
        loss_mask = output["completion_mask"]
        if "tool_mask" in output:
            loss_mask = loss_mask * output["tool_mask"]
        # TRL's "dapo" loss divides by this token count: keep it equal to the tokens left in the loss.
        output["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        metrics = self._metrics["train"]
        metrics["harness/kept_trajectories"].append(float(sum(keep)))
        metrics["harness/loss_trajectories"].append(float((loss_mask.sum(dim=1) > 0).sum().item()))
        metrics["harness/loss_tokens"].append(float(loss_mask.sum().item()))
        for name, value in counts.items():
            metrics[f"harness/{name}"].append(float(value))
        metrics["verified"].append(sum(r["verified"] for r in rows) / len(rows))
        metrics["truncated_frac"].append(sum(r["truncated"] for r in rows) / len(rows))
        return output
