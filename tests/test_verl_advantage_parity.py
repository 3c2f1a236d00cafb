"""The GRPO rule for filtered trajectories (``rl_backend.grpo_rule``) is the same on both backends.

verl's side is verl 0.9.1's own code: the batch keys the keep-mask sampler leaves in the batch
(``sampler.trained_keys``) go through ``compute_advantage_for_multi_trajectories`` -- what the V1 trainer's
``_compute_advantage`` calls -- on a real ``DataProto``.  The local side is ``grpo_rule.group_advantages``,
which ``HarnessGRPOTrainer`` puts in place of TRL's advantages.  A key the sampler removes must get advantage
0 from the local backend (it is out of the loss there too).
"""

from __future__ import annotations

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # noqa: E402

from rl_backend.grpo_rule import group_advantages, trains  # noqa: E402
from rl_backend.verl.sampler import trained_keys  # noqa: E402

RESPONSE_LEN = 5


def verl_advantages(keys: list[str], rewards: list[float], lengths: list[int], scale_by_std: bool) -> list[float]:
    """verl's advantage per key: the outcome reward on the last response token, as the reward loop puts it."""
    mask = torch.zeros(len(keys), RESPONSE_LEN)
    scores = torch.zeros(len(keys), RESPONSE_LEN)
    for i, (r, n) in enumerate(zip(rewards, lengths)):
        mask[i, :n] = 1
        scores[i, n - 1] = r
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask},
                               non_tensors={"uid": np.array([k.rsplit("_", 2)[0] for k in keys], dtype=object)})
    out = compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator="grpo", num_repeat=4,
                                                   norm_adv_by_std_in_grpo=scale_by_std)
    return out.batch["advantages"][:, 0].tolist()


# (uid, session, reward, harness keep), single-turn (output 0): four groups of four
BATCH = [
    ("aa", 0, 1.0, True), ("aa", 1, 0.0, True), ("aa", 2, 1.0, True), ("aa", 3, 0.0, True),    # all kept
    ("bb", 0, 1.0, True), ("bb", 1, 0.0, False), ("bb", 2, 0.0, True), ("bb", 3, 0.5, True),   # one dropped
    ("cc", 0, 1.0, True), ("cc", 1, 0.0, False), ("cc", 2, 0.0, False), ("cc", 3, 1.0, False),  # one left
    ("dd", 0, 1.0, False), ("dd", 1, 0.0, False), ("dd", 2, 1.0, False), ("dd", 3, 0.0, False),  # emptied
    ("ee", 0, 0.3, True), ("ee", 1, 0.3, True), ("ee", 2, 0.9, False), ("ee", 3, 0.3, True),   # kept all equal
]


@pytest.mark.parametrize("scale_by_std", [True, False], ids=["grpo", "dr-grpo"])
def test_verl_and_the_local_backend_give_the_same_advantages(scale_by_std):
    keys = [f"{uid}_{s}_0" for uid, s, _, _ in BATCH]
    rewards = [r for _, _, r, _ in BATCH]
    keep = [k for _, _, _, k in BATCH]
    lengths = [1 + i % RESPONSE_LEN for i in range(len(BATCH))]

    in_batch = trained_keys(keys, keep)
    local = group_advantages(rewards, [uid for uid, *_ in BATCH], keep, scale_by_std=scale_by_std)
    kept = [i for i, t in enumerate(in_batch) if t]
    theirs = verl_advantages([keys[i] for i in kept], [rewards[i] for i in kept], [lengths[i] for i in kept],
                             scale_by_std)

    assert [keys[i].split("_")[0] for i in kept].count("cc") == 0, "a lone kept member must leave verl's batch"
    assert in_batch == trains([uid for uid, *_ in BATCH], keep)
    assert len(kept) == 10  # aa 4, bb 3, ee 3
    np.testing.assert_allclose([local[i] for i in kept], theirs, rtol=1e-5, atol=1e-5)
    left_out = [i for i, t in enumerate(in_batch) if not t]
    assert len(left_out) == len(BATCH) - 10 and all(local[i] == 0.0 for i in left_out)
    # the dropped member of bb is out of the baseline: the kept rewards 1.0, 0.0, 0.5 have mean 0.5, std 0.5
    bb = {s: local[i] for i, (uid, s, _, _) in enumerate(BATCH) if uid == "bb"}
    assert bb[0] == pytest.approx(1.0 if scale_by_std else 0.5, rel=1e-4) and bb[2] == pytest.approx(-bb[0])
    assert max(abs(a) for a in local) > 0.4  # the batch is not trivially all zero


def test_verl_alone_would_give_a_lone_member_its_raw_reward():
    """Why the rule removes a lone kept member: verl's estimator hands it mean 0 and std 1."""
    theirs = verl_advantages(["cc_0_0", "aa_0_0", "aa_1_0"], [0.75, 1.0, 0.0], [2, 2, 2], scale_by_std=True)
    assert theirs[0] == pytest.approx(0.75, rel=1e-4)
    assert group_advantages([0.75], ["cc"], [True]) == [0.0] and trains(["cc"], [True]) == [False]


def test_a_multi_output_session_counts_once_and_shares_its_decision():
    """verl groups by prompt and broadcasts a session's final-output advantage to its earlier outputs."""
    keys = ["aa_0_0", "aa_0_1", "aa_1_0", "bb_0_0", "bb_0_1", "bb_1_0"]
    keep = [True, True, True, True, True, False]  # bb's second session dropped: bb keeps one session of two
    assert trained_keys(keys, keep) == [True, True, True, False, False, False]
    theirs = verl_advantages(keys[:3], [0.0, 1.0, 0.0], [3, 3, 3], scale_by_std=True)
    # session aa_0's final output (reward 1.0) against aa_1's 0.0; aa_0's first output gets the same advantage
    local = group_advantages([1.0, 0.0], ["aa", "aa"], [True, True])
    np.testing.assert_allclose(theirs, [local[0], local[0], local[1]], rtol=1e-5)


def test_mismatched_lengths_are_refused():
    with pytest.raises(ValueError, match="3 group ids for 2 keep"):
        trains(["a", "a", "b"], [True, True])
    with pytest.raises(ValueError, match="2 rewards for 3 group ids"):
        group_advantages([1.0, 0.0], ["a", "a", "b"], [True, True, True])
