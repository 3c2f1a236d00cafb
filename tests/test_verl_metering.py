"""verl training is metered (issue 45, Deliver 5): the reward workers record container CPU and reward info bytes
per request, so the tripwire's ``training_cost_alarm`` compares a verl round with the round before.

The adversary: a reward that burns CPU in training only (0.3 s per call, any trajectory), which the backtest's
short sessions never show.  Before metering a verl round recorded no ``harness_cost``, so the alarm compared
nothing.  Each round here goes through verl 0.9.1's own loader and ``NaiveRewardManager.run_single``, the
harness in the Docker sandbox, as ``tests/test_verl_reward.py`` drives them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from meta_agent.judge.cpu_cost import training_cost_alarm  # noqa: E402
from rl_backend.verl import reward_entry  # noqa: E402
from rl_backend.verl.metering import load_cost  # noqa: E402
from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides  # noqa: E402
from rl_backend.verl.validate import compose  # noqa: E402
from harness_repo.contract import GRPOKnobs  # noqa: E402

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"

BURNER = '''
import time


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    end = time.process_time() + 0.3
    while time.process_time() < end:  # "a careful parse", in training only: the backtest's sessions are short
        pass
    return {"score": 1.0 if "7" in solution_str else 0.0, "note": "x" * 200}
'''
CALLS = 16


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from rl_backend.model import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None))


def manager(tmp_path: Path, reward: str | None, tokenizer):
    """verl's own reward manager over a copy of the math seed (``reward`` replacing its reward.py)."""
    import asyncio
    import shutil

    from verl.trainer.ppo.reward import load_reward_manager

    folder = tmp_path / "harness"
    shutil.copytree(SEED, folder)
    if reward:
        (folder / "reward.py").write_text(reward)
    plan = RoundPlan.for_round(tmp_path / "round", 1)
    ovr = build_overrides(GRPOKnobs(), LaunchOptions(), plan, model_path="/models/x", harness_dir=folder,
                          domain_ref="domains.math:MathDomain", run_id="r1", round=0)
    asyncio.set_event_loop(asyncio.new_event_loop())  # the manager keeps the loop current when it is made
    return load_reward_manager(compose(ovr), tokenizer), plan


def score(mgr, tokenizer, response: str) -> dict:
    """One trajectory through verl's NaiveRewardManager.run_single, as a reward worker calls it."""
    import numpy as np
    import torch

    from verl import DataProto

    ids = tokenizer(response, add_special_tokens=False)["input_ids"]
    prompt = [tokenizer.pad_token_id or 0] * 3
    data = DataProto.from_dict(
        tensors={"responses": torch.tensor([ids]), "attention_mask": torch.ones(1, len(prompt) + len(ids),
                                                                                dtype=torch.long)},
        non_tensors={"data_source": np.array(["reasoning_gym/chain_sum"], dtype=object),
                     "reward_model": np.array([{"ground_truth": '{"answer": "7"}', "style": "rule"}], dtype=object),
                     "extra_info": np.array([{"task_id": "chain_sum-1", "split": "train", "prompt": "3 + 4?"}],
                                            dtype=object)})
    return mgr.loop.run_until_complete(mgr.run_single(data))


def _round(tmp_path: Path, tokenizer, reward: str | None) -> dict:
    mgr, plan = manager(tmp_path, reward, tokenizer)
    for i in range(CALLS):
        score(mgr, tokenizer, f"attempt {i}: 3 + 4 = {7 + i % 2}\nAnswer: {7 + i % 2}")
    reward_entry.close_sessions()
    mgr.loop.close()
    return load_cost(plan.records, plan.group_records)


@pytest.mark.docker
def test_a_verl_round_records_its_harness_cost_and_a_burning_reward_fires_the_alarm(tmp_path, tokenizer,
                                                                                     docker_sandbox):
    seed = _round(tmp_path / "seed", tokenizer, None)
    assert seed["trajectories"] == CALLS and seed["sessions"] == 1 and seed["cpu_s"] > 0
    assert seed["reward_info_bytes"] > 0  # the seed's reward info (format_ok, pred) is counted
    burner = _round(tmp_path / "burner", tokenizer, BURNER)
    assert burner["trajectories"] == CALLS and burner["cpu_s"] > 0.3 * (CALLS - 4)  # the last reading may lag
    assert burner["reward_info_bytes"] > CALLS * 200
    alarm = training_cost_alarm(seed, burner)
    assert alarm.fired, alarm.detail
    assert not training_cost_alarm(seed, seed).fired
