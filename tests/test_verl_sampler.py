"""The keep-mask sampler on verl 0.9.1's real replay buffer over a real TransferQueue (local Ray, CPU).

Trajectories go in the way verl's agent-loop worker puts them (``agent_loop_tq._agent_loop_postprocess``:
``tq.kv_batch_put`` of ``list_of_dict_to_tensordict`` records, keys ``{uid}_{session}_{output}``), prompts the
way the trainer registers them, and the buffer's ``sample`` picks the training batch.
"""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

pytestmark = pytest.mark.slow  # a local Ray cluster and TransferQueue take ~30 s to start on 2 cores


@pytest.fixture(scope="module")
def tq():
    import ray
    import transfer_queue

    # logical CPUs: TransferQueue's controller and two storage units ask for one each
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    transfer_queue.init()
    yield transfer_queue
    transfer_queue.close()
    ray.shutdown()


@pytest.fixture(autouse=True)
def _empty(tq):
    yield
    for partition, items in (tq.kv_list() or {}).items():
        if items:
            tq.kv_clear(partition_id=partition, keys=list(items))


def put_groups(tq, groups: dict[str, list[tuple[float, float | None]]]) -> None:
    """``{prompt uid: [(reward, keep), ...]}``: finished prompts and one trajectory per session."""
    from verl.utils.tensordict_utils import list_of_dict_to_tensordict

    tq.kv_batch_put(keys=list(groups), partition_id="train",
                    tags=[{"is_prompt": True, "status": "finished", "global_steps": 1} for _ in groups])
    keys, fields = [], []
    for uid, sessions in groups.items():
        for session, (reward, keep) in enumerate(sessions):
            info = {"score": reward, "verified": reward} | ({} if keep is None else {"keep": keep})
            keys.append(f"{uid}_{session}_0")
            fields.append({"responses": torch.tensor([5, 6, 7]), "rm_scores": torch.tensor([0.0, 0.0, reward]),
                           "extra_fields": {"reward_extra_info": info, "min_global_steps": 1, "max_global_steps": 1}})
    tq.kv_batch_put(keys=keys, fields=list_of_dict_to_tensordict(fields), partition_id="train",
                    tags=[{"status": "success", "global_steps": 1} for _ in keys])


def buffer(refills: list[int] | None = None, **sampler_kwargs):
    from rl_backend.verl.sampler import KeepMaskReplayBuffer

    return KeepMaskReplayBuffer(trainer_mode="sync", trainer_config=OmegaConf.create({}),
                                max_off_policy_threshold=None, max_off_policy_strategy="drop",
                                sampler_kwargs=OmegaConf.create(sampler_kwargs),
                                refill_fn=lambda n: (refills if refills is not None else []).append(n) or n)


def test_exactly_the_masked_trajectories_are_dropped(tq):
    put_groups(tq, {"aaa": [(1.0, 1.0), (0.0, 0.0), (1.0, 1.0)], "bbb": [(0.0, 0.0), (0.5, 1.0), (0.0, 1.0)]})
    batch, _ = buffer().sample(global_steps=1, partition_id="train", batch_size=2)
    assert sorted(batch.keys) == ["aaa_0_0", "aaa_2_0", "bbb_1_0", "bbb_2_0"]
    # the dropped ones are gone from TransferQueue too: nothing downstream can read them back
    assert sorted(tq.kv_list()["train"]) == ["aaa_0_0", "aaa_2_0", "bbb_1_0", "bbb_2_0"]


def test_a_trajectory_without_keep_is_refused(tq):
    # a reward function that is not our entry (or a tampered one) returns no keep: never trained blindly
    put_groups(tq, {"ccc": [(1.0, 1.0), (0.0, None)]})
    with pytest.raises(RuntimeError, match="has no 'keep' in its reward extra info"):
        buffer().sample(global_steps=1, partition_id="train", batch_size=1)


def test_a_batch_with_nothing_kept_fails_the_step(tq):
    put_groups(tq, {"ddd": [(1.0, 0.0), (0.0, 0.0)]})
    with pytest.raises(RuntimeError, match="kept none of the 2 trajectories"):
        buffer().sample(global_steps=1, partition_id="train", batch_size=1)


def test_group_filter_reaches_verl_through_sampler_kwargs(tq):
    # eee has one reward for all sessions: verl's own group filter evicts it; two groups remain, so no refill
    put_groups(tq, {"eee": [(1.0, 1.0), (1.0, 1.0)], "fff": [(1.0, 1.0), (0.0, 1.0)],
                    "ggg": [(0.0, 1.0), (1.0, 0.0), (0.5, 1.0)]})
    refills: list[int] = []
    batch, metrics = buffer(refills, filter_groups_metric="reward", train_batch_size=2).sample(
        global_steps=1, partition_id="train", batch_size=2)
    assert sorted(batch.keys) == ["fff_0_0", "fff_1_0", "ggg_0_0", "ggg_2_0"]
    assert refills == [] and metrics["training/filter_groups/evicted_samples"] == 1
