"""verl's replay buffer with the harness's per-trajectory keep mask: dropped trajectories never form a batch.

verl loads this file by path (``trainer.v1.sampler.custom_sampler.{path,name}``) in the
trainer process.  ``KeepMaskReplayBuffer`` is verl's own sync ``ReplayBuffer``; only
materialising a training batch changes: each trajectory's reward extra info carries the
``keep`` the reward entry returned (``rl_backend.verl.reward_entry``: the harness filter's
decision, 0 for a trajectory the harness could not judge), and a trajectory with ``keep`` 0 is
removed from the batch and from TransferQueue.  So it leaves the loss *and* the GRPO baseline,
where zeroing its response mask would leave it in the baseline (reference §13).

Once a custom sampler is set, verl no longer hands it ``algorithm.filter_groups``; the
launcher passes the group filter through ``sampler_kwargs`` (``filter_groups_metric``,
``train_batch_size``, ``max_inflight_gen_batches``) and this class gives it to verl's own
filtering code, which then evicts zero-variance groups and refills as it would without us.
"""

from __future__ import annotations

from typing import Any

import transfer_queue as tq
from transfer_queue import KVBatchMeta

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

KEEP_KEY = "keep"


def keep_of(extra_fields: Any) -> bool:
    """A trajectory's keep decision from its stored ``extra_fields``; a missing ``keep`` is a fault, not a keep."""
    fields = getattr(extra_fields, "data", extra_fields)
    info = fields.get("reward_extra_info", {}) if isinstance(fields, dict) else {}
    if KEEP_KEY not in info:
        raise RuntimeError(f"a trajectory has no {KEEP_KEY!r} in its reward extra info: is "
                           "reward.custom_reward_function.path rl_backend/verl/reward_entry.py?")
    return float(info[KEEP_KEY]) > 0.5


class KeepMaskReplayBuffer(ReplayBuffer):
    """``ReplayBuffer`` whose training batches hold only the trajectories the harness kept."""

    def __init__(self, **kwargs: Any) -> None:
        sampler_kwargs = dict(kwargs.get("sampler_kwargs") or {})
        metric = sampler_kwargs.get("filter_groups_metric")
        if metric is not None:
            kwargs.update(filter_groups_metric=metric, gen_batch_size=1,
                          train_batch_size=int(sampler_kwargs["train_batch_size"]),
                          max_inflight_gen_batches=int(sampler_kwargs.get("max_inflight_gen_batches", 1)))
        super().__init__(**kwargs)
        self.dropped_total = 0

    def _materialize_batch(self, partition_id: str, selected_prompt_uids: list[str],
                           partition_snapshot: dict[str, dict]) -> KVBatchMeta:
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        if partition_id == "val" or not batch.keys:
            return batch
        fields = tq.kv_batch_get(keys=list(batch.keys), partition_id=partition_id, select_fields=["extra_fields"])
        keep = [keep_of(value) for value in fields["extra_fields"]]
        dropped = [key for key, k in zip(batch.keys, keep) if not k]
        if len(dropped) == len(keep):
            raise RuntimeError(f"the harness kept none of the {len(keep)} trajectories of this batch (every keep is "
                               "0); see the round's reward_records/ for the harness's errors")
        if dropped:
            tq.kv_clear(partition_id=partition_id, keys=dropped)
            self.dropped_total += len(dropped)
        keys = [key for key, k in zip(batch.keys, keep) if k]
        tags = [tag for tag, k in zip(batch.tags, keep) if k]
        return KVBatchMeta(partition_id=partition_id, keys=keys, tags=tags)
