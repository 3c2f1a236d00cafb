"""The harness inside TRL: its rewards and filters applied to GRPOTrainer, every rollout recorded.

Harness code never runs in this process.  Two pieces, used by ``rl_backend.local``:

- ``RolloutRecorder`` is the reward function TRL calls once per generation batch: it
  builds one trajectory row per completion, sends the batch's trajectory views to the
  sandboxed harness runtime (``sandboxes.harness_client.HarnessSession.score``: reward,
  filters and ``dynamic_sampling`` in the runtime's one order), scores each completion
  with the domain's trusted verifier here, and keeps the rows.  A trajectory the harness
  could not judge gets reward 0 for TRL, ``reward`` None in the archive, and never trains.
- ``HarnessGRPOTrainer`` applies the runtime's keep decisions as loss masks right after
  TRL scored a batch and before it is shuffled into micro-batches: TRL's advantages are replaced
  by ``rl_backend.grpo_rule``'s (a dropped trajectory is out of its group's baseline; a group left
  with one kept member trains nothing), and every trajectory that does not train gets an all-zero
  completion mask and a zero advantage -- the rule the verl sampler applies.  It also carries AdamW's moment
  estimates from the previous round (``optimizer_state``), so a round's first steps are not
  the large sign-like steps of a freshly started Adam.

It records how far the round moved the policy (``policy_shift``): the round's first micro-batch, as the loss scored
it before any update, is scored again under the round's final weights; the mean absolute change of its tokens'
log-probs and a KL estimate go into the round's ``eval`` (``update``), so one round tells whether an update size
(learning rate, steps) fits the run (``meta_agent.update_checks``).  One forward pass over one group a round; in
a round with no gradient (every group's rewards equal) a probe step on a unit signal instead (``_probe_step``).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from trl import GRPOTrainer

from rl_backend.base import DomainLike, HarnessCodeError
from rl_backend.exam_loop import verify_all  # noqa: F401 - one verifier call for training and the exam
from rl_backend.grpo_rule import group_advantages, trains
from rl_backend.shared_prefix import generate_shared_prefix
from sandboxes.harness_client import HarnessSession, trajectory_view
from trajectory.rows import trajectory_row


log = logging.getLogger("rl_backend.local")

OPTIMIZER_STATE = "optimizer_state.pt"
"""AdamW's state after a round, saved in the policy folder beside the weights it belongs to."""

MAX_UNJUDGED_SHARE = 0.5
"""More unjudged trajectories than this in one batch fail the round (the gate allows 1% in backtests)."""


@dataclass
class RoundContext:
    """Fields every row of a round shares."""

    run_id: str
    round: int
    domain: str
    harness_commit: str
    policy_ref: str


class RolloutRecorder:
    """The reward function handed to TRL: harness reward + trusted verification + one row per completion.

    TRL calls it once per generation batch (all groups of one optimizer step, each group's
    ``num_generations`` completions consecutive).  ``pending`` holds that batch's rows until
    the trainer has applied the filters; ``rows`` accumulates every row of the round.
    """

    __name__ = "harness_reward"  # TRL names metrics after the reward function

    def __init__(self, harness: HarnessSession, domain: DomainLike, ctx: RoundContext, group_size: int,
                 eos_token_ids: list[int], prompt_text: dict[str, str], task_json: dict[str, str],
                 dynamic_sampling: bool, mask_truncated: bool) -> None:
        self.harness, self.domain, self.ctx = harness, domain, ctx
        self.group_size = group_size
        self.eos_token_ids = set(eos_token_ids)
        self.prompt_text = prompt_text  # task_id -> chat-templated prompt the policy saw
        self.task_json = task_json  # task_id -> {"question", "vars"} the prompt was rendered from
        self.dynamic_sampling, self.mask_truncated = dynamic_sampling, mask_truncated
        self.pending: list[dict] = []
        self.keep: list[bool] = []
        self.rows: list[dict] = []

    def __call__(self, prompts: list, completions: list, completion_ids: list[list[int]],
                 **columns: Any) -> list[float]:
        step = int(columns["trainer_state"].global_step)
        texts = [c[-1]["content"] if isinstance(c, list) else str(c) for c in completions]
        verdicts = verify_all(self.domain, [(columns["data_source"][i], text, json.loads(columns["ground_truth"][i]))
                                            for i, text in enumerate(texts)])  # trusted, on the host
        rows = []
        for i, (prompt, text, ids) in enumerate(zip(prompts, texts, completion_ids)):
            group, idx = divmod(i, self.group_size)
            truncated = bool(ids) and ids[-1] not in self.eos_token_ids
            task_id, source = columns["task_id"][i], columns["data_source"][i]
            ground_truth = json.loads(columns["ground_truth"][i])
            verified, verifier_info = verdicts[i]
            rows.append(trajectory_row(  # reward and reward_info are the harness's, filled in below
                traj_id=f"{self.ctx.run_id}-r{self.ctx.round}-s{step}-g{group}-{idx}", run_id=self.ctx.run_id,
                round=self.ctx.round, step=step, group_id=f"s{step}-g{group}", sample_idx=idx,
                domain=self.ctx.domain, task_id=task_id, data_source=source, split="train",
                prompt=self.prompt_text[task_id], response=text,
                messages=list(prompt) + [{"role": "assistant", "content": text}], ground_truth=ground_truth,
                verified=float(verified), verifier_info=json.dumps(verifier_info, default=str),
                response_tokens=len(ids), truncated=truncated, finish_reason="length" if truncated else "stop",
                harness_commit=self.ctx.harness_commit, policy_ref=self.ctx.policy_ref,
                task=self.task_json[task_id],
            ))
        scored = self.harness.score([trajectory_view(r) for r in rows], reward_range=self.domain.reward_range,
                                    dynamic_sampling=self.dynamic_sampling, mask_truncated=self.mask_truncated)
        errors = [s.error for s in scored if s.error]
        if len(errors) > MAX_UNJUDGED_SHARE * len(scored):
            raise HarnessCodeError("reward.py/filters.py",
                                   f"the harness could not judge {len(errors)} of {len(scored)} "
                                   f"trajectories of step {step}; first error: {errors[0]}")
        for row, s in zip(rows, scored):
            info = dict(s.reward_info)
            if s.error:
                info["error"] = s.error
            row["reward"], row["reward_info"] = s.reward, json.dumps(info)
        self.pending, self.keep = rows, [s.keep for s in scored]
        self.rows.extend(rows)
        # an unjudged trajectory is masked out of the loss below; TRL still needs a number for it
        return [0.0 if s.reward is None else s.reward for s in scored]


def keep_counts(rows: list[dict], keep: list[bool]) -> dict:
    """How many trajectories of a batch the harness dropped, and how many of those it could not judge."""
    errors = sum(1 for r in rows if "error" in json.loads(r["reward_info"] or "{}"))
    return {"dropped": keep.count(False), "dropped_unjudged": errors}


LONE_REASON = ("the only kept member of its group: no baseline to compare it with, so it trains nothing "
               "(rl_backend.grpo_rule)")


class HarnessGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose loss only sees the trajectories the harness filters keep."""

    def __init__(self, *args: Any, recorder: RolloutRecorder, optimizer_state: Path | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recorder, self.optimizer_state = recorder, optimizer_state
        self.carried_optimizer_state = False
        self.first_batch: dict | None = None  # the round's first micro-batch and its log-probs before any update

    def create_optimizer(self, *args: Any, **kwargs: Any) -> Any:
        """The optimizer TRL would build, holding the previous round's moment estimates when there are any."""
        optimizer = super().create_optimizer(*args, **kwargs)
        if self.optimizer_state is not None and self.optimizer_state.exists():
            saved = torch.load(self.optimizer_state, map_location="cpu", weights_only=True)
            self.carried_optimizer_state = carry_optimizer_state(optimizer, saved)
        return optimizer

    def _generate_single_turn(self, *args: Any, **kwargs: Any) -> Any:
        """TRL's generation, with the step's shared prompt opening computed once (``rl_backend.shared_prefix``):
        TRL calls ``generate`` on the unwrapped model, so that call is routed there for the duration."""
        model = self.accelerator.unwrap_model(self.model)
        model.generate = functools.partial(generate_shared_prefix, model)
        try:
            return super()._generate_single_turn(*args, **kwargs)
        finally:
            del model.generate

    def _generate_and_score_completions(self, inputs: list[dict]) -> dict:
        output = super()._generate_and_score_completions(inputs)
        rows = self.recorder.pending
        if len(rows) != output["completion_mask"].size(0):  # TRL changed its batching: refuse to mask blindly
            raise RuntimeError(f"recorded {len(rows)} rollouts for a batch of {output['completion_mask'].size(0)}")
        keep, counts = self.recorder.keep, keep_counts(rows, self.recorder.keep)
        # the one GRPO rule of every backend (grpo_rule): TRL's baseline would still count the dropped ones
        keep = [k and r["reward"] is not None for k, r in zip(keep, rows)]
        groups = [r["group_id"] for r in rows]
        advantages = group_advantages([r["reward"] or 0.0 for r in rows], groups, keep,
                                      scale_by_std=self.scale_rewards != "none")
        mask = output["completion_mask"]
        trains_mask = trains(groups, keep)
        for row, k, t in zip(rows, keep, trains_mask):
            row["kept"] = k  # what kept_share counts below, per trajectory: the live check's kept and signal shares
            if k and not t:  # said in the archive, as the verl sampler's records say it
                row["reward_info"] = json.dumps(json.loads(row["reward_info"] or "{}") | {"dropped": LONE_REASON})
        trained = torch.tensor(trains_mask, dtype=mask.dtype, device=mask.device)
        output["completion_mask"] = mask * trained.unsqueeze(1)
        output["advantages"] = torch.tensor(advantages, dtype=output["advantages"].dtype,
                                            device=output["advantages"].device)
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

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor,
                                           attention_mask: torch.Tensor, logits_to_keep: int, *args: Any,
                                           **kwargs: Any) -> Any:
        """TRL's scoring; the round's first training forward (the weights before any update) is kept for
        ``policy_shift``: it costs nothing, the loss computes it anyway."""
        out = super()._get_per_token_logps_and_entropies(model, input_ids, attention_mask, logits_to_keep,
                                                         *args, **kwargs)
        if self.first_batch is None and torch.is_grad_enabled():
            self.first_batch = {"ids": input_ids.detach().clone(), "attention": attention_mask.detach().clone(),
                                "keep": logits_to_keep, "logps": out[0].detach().clone()}
        return out

    def _logps(self, b: dict) -> torch.Tensor:
        with torch.no_grad():
            return super()._get_per_token_logps_and_entropies(self.model, b["ids"], b["attention"], b["keep"])[0]

    def _probe_step(self, b: dict) -> float:
        """The step this optimizer would take from the round's start on a unit signal over the first batch (its
        completions paid +1 and -1 in turn, Adam's first step ``lr * g / (|g| + eps)``), applied to the weights
        while ``_logps`` scores them, then undone from a copy.  For a round whose own steps had no gradient
        (every group's rewards equal): a movement figure still, of the same rule.  Returns the learning rate."""
        group = self.optimizer.param_groups[0]
        lr, eps = float(group["lr"]), float(group.get("eps", 1e-8))
        params = [p for p in self.model.parameters() if p.requires_grad]
        saved = [p.detach().clone() for p in params]
        self.model.zero_grad(set_to_none=True)
        with torch.enable_grad():
            logps = super()._get_per_token_logps_and_entropies(self.model, b["ids"], b["attention"], b["keep"])[0]
            mask = b["attention"][:, -b["keep"]:].to(logps.dtype)
            sign = torch.tensor([1.0 if i % 2 == 0 else -1.0 for i in range(logps.size(0))], dtype=logps.dtype)
            (-(sign * (logps * mask).sum(1) / mask.sum(1).clamp(min=1)).sum()).backward()
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.add_(p.grad / (p.grad.abs() + eps), alpha=-lr)
        b["after"] = self._logps(b)
        with torch.no_grad():
            for p, old in zip(params, saved):
                p.copy_(old)
        self.model.zero_grad(set_to_none=True)
        return lr

    def policy_shift(self) -> dict | None:
        """How far the round moved the policy on its own first micro-batch (its completion tokens under the
        weights before the round and after it): ``mean_abs_logp`` (mean |log p_after - log p_before| per
        token), ``kl`` (KL(before || after) per token, the k3 estimate on before's own samples), ``tokens``,
        ``learning_rate``, ``source`` ("round": the round's own steps; "probe": no step had a gradient, so
        ``_probe_step``'s), ``seconds`` and ``cpu_s`` (what measuring it cost).  None where no batch trained."""
        if self.first_batch is None:
            return None
        started, cpu = time.monotonic(), time.process_time()
        b = self.first_batch
        moved = any(isinstance(g := e.get("grad_norm"), int | float) and g > 0 for e in self.state.log_history)
        lr = float(self.optimizer.param_groups[0]["lr"]) if moved else self._probe_step(b)
        after = self._logps(b) if moved else b.pop("after")
        mask = b["attention"][:, -b["keep"]:].bool()  # the tokens the loss saw (a dropped trajectory has none)
        diff = (after - b["logps"])[mask]
        kl = (torch.exp(diff) - 1 - diff).mean()
        return {"mean_abs_logp": round(float(diff.abs().mean()), 8) if mask.any() else None,
                "kl": round(float(kl), 10) if mask.any() else None,
                "tokens": int(mask.sum()), "learning_rate": lr, "source": "round" if moved else "probe",
                "seconds": round(time.monotonic() - started, 2), "cpu_s": round(time.process_time() - cpu, 2)}


def carry_optimizer_state(optimizer: torch.optim.Optimizer, saved: dict) -> bool:
    """Load ``saved`` (an earlier ``optimizer.state_dict()``) into ``optimizer``: its per-parameter state
    (moments, step counts) only; learning rate, betas and weight decay stay this round's.

    Returns False, leaving the optimizer fresh, when ``saved`` was made for other parameters.
    """
    groups = optimizer.state_dict()["param_groups"]
    params = [p for g in optimizer.param_groups for p in g["params"]]
    same = [len(g["params"]) for g in groups] == [len(g["params"]) for g in saved.get("param_groups", [])] and all(
        tensor.shape in (params[i].shape, ()) for i, state in saved["state"].items() for tensor in state.values())
    if not same:
        log.warning("optimizer state not carried over: it was saved for other parameters")
        return False
    optimizer.load_state_dict({"state": saved["state"], "param_groups": groups})
    return True
