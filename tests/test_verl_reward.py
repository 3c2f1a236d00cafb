"""The reward entry through verl 0.9.1's own loader and reward manager, the harness in the Docker sandbox.

Rows are scored by ``NaiveRewardManager.run_single`` on real ``DataProto`` items whose responses are
token ids of the SmolLM2 tokenizer, exactly as verl's reward workers call it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from rl_backend.verl import reward_entry  # noqa: E402
from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides  # noqa: E402
from rl_backend.verl.validate import compose  # noqa: E402
from harness_repo.contract import GRPOKnobs  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SEED = REPO / "harness_repo" / "seeds" / "math"
SOURCE = "reasoning_gym/chain_sum"
GOLD = json.dumps({"answer": "7"})

HOSTILE_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    if "crash" in solution_str:
        raise ValueError("cannot parse")
    if "greedy" in solution_str:
        return 5.0          # outside the math domain's [0, 1]: must not train
    return {"score": 1.0 if "7" in solution_str else 0.0, "seen_keys": sorted(extra_info)}
'''
LENGTH_FILTER = '''
def keep_trajectory(traj):
    return len(traj["response"]) < 40
'''


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from rl_backend.model import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None))


def harness(tmp_path: Path, reward: str | None = None, filters: str | None = None) -> Path:
    folder = tmp_path / "harness"
    shutil.copytree(SEED, folder)
    if reward:
        (folder / "reward.py").write_text(reward)
    if filters:
        (folder / "filters.py").write_text(filters)
    return folder


def manager(tmp_path: Path, harness_dir: Path, tokenizer):
    from verl.trainer.ppo.reward import load_reward_manager

    plan = RoundPlan.for_round(tmp_path / "round", 1)
    ovr = build_overrides(GRPOKnobs(), LaunchOptions(), plan, model_path="/models/x", harness_dir=harness_dir,
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
        non_tensors={"data_source": np.array([SOURCE], dtype=object),
                     "reward_model": np.array([{"ground_truth": GOLD, "style": "rule"}], dtype=object),
                     "extra_info": np.array([{"task_id": "chain_sum-1", "split": "train", "prompt": "3 + 4?"}],
                                            dtype=object)})
    return mgr.loop.run_until_complete(mgr.run_single(data))


def verdictless(scored: dict) -> dict:
    """The reward extra info without the verifier's info (JSON text, checked on its own)."""
    return {k: v for k, v in scored["reward_extra_info"].items() if k != "verifier_info"}


@pytest.fixture(autouse=True)
def _fresh_sessions():
    yield
    reward_entry.close_sessions()
    asyncio.get_event_loop().close()


@pytest.mark.docker
def test_seed_harness_scores_through_verl_and_the_sandbox(tmp_path: Path, tokenizer, docker_sandbox):
    mgr, plan = manager(tmp_path, harness(tmp_path), tokenizer)
    right = score(mgr, tokenizer, "3 + 4 = 7\nAnswer: 7")
    wrong = score(mgr, tokenizer, "Answer: 8")
    boxed = score(mgr, tokenizer, "\\boxed{7}")  # the seed reward reads only Answer lines; the verifier reads boxes
    assert right["reward_score"] == 1.0 and verdictless(right) == {"score": 1.0, "keep": 1.0, "verified": 1.0,
                                                                   "harness_error": 0.0}
    assert wrong["reward_score"] == 0.0 and wrong["reward_extra_info"]["verified"] == 0.0
    assert verdictless(boxed) == {"score": 0.0, "keep": 1.0, "verified": 1.0, "harness_error": 0.0}
    records = reward_entry.load_records(plan.records)
    assert len(records) == 3
    record = records[reward_entry.record_key("\\boxed{7}", GOLD)]
    assert record["reward"] == 0.0 and record["verified"] == 1.0 and record["reward_info"]["format_ok"] is False
    # the verdict verl keeps per row is the record's, info included: what the sampler and the archive carry
    assert boxed["reward_extra_info"]["verifier_info"] == record["verifier_info"]
    assert json.loads(record["verifier_info"]) and isinstance(json.loads(record["verifier_info"]), dict)


@pytest.mark.docker
def test_hostile_harness_never_gets_a_training_score(tmp_path: Path, tokenizer, docker_sandbox):
    mgr, plan = manager(tmp_path, harness(tmp_path, HOSTILE_REWARD, LENGTH_FILTER), tokenizer)
    crash = score(mgr, tokenizer, "crash 7")
    greedy = score(mgr, tokenizer, "greedy 7")
    long = score(mgr, tokenizer, "7 " + "and so on " * 5)
    fine = score(mgr, tokenizer, "it is 7")
    # a raising reward and an out-of-range reward: placeholder 0.0, keep 0, so the sampler drops them
    assert verdictless(crash) == {"score": 0.0, "keep": 0.0, "verified": 0.0, "harness_error": 1.0}
    assert verdictless(greedy) == {"score": 0.0, "keep": 0.0, "verified": 0.0, "harness_error": 1.0}
    # the harness's own filter: scored, but not kept
    assert verdictless(long) == {"score": 1.0, "keep": 0.0, "verified": 0.0, "harness_error": 0.0}
    assert fine["reward_extra_info"]["keep"] == 1.0
    records = reward_entry.load_records(plan.records)
    crashed = records[reward_entry.record_key("crash 7", GOLD)]
    assert crashed["reward"] is None and "ValueError: cannot parse" in crashed["error"]
    assert "outside the domain's range" in records[reward_entry.record_key("greedy 7", GOLD)]["error"]
    # harness code saw the trajectory view, never the verifier's outcome
    seen = records[reward_entry.record_key("it is 7", GOLD)]["reward_info"]["seen_keys"]
    assert seen == ["group_id", "sample_idx", "split", "task_id", "traj_id"]


@pytest.mark.docker
def test_a_harness_that_cannot_start_is_an_error_not_a_score(tmp_path: Path, tokenizer, docker_sandbox):
    mgr, plan = manager(tmp_path, harness(tmp_path, "import not_a_module\n"), tokenizer)
    out = score(mgr, tokenizer, "Answer: 7")
    assert verdictless(out) == {"score": 0.0, "keep": 0.0, "verified": 1.0, "harness_error": 1.0}
    (record,) = reward_entry.load_records(plan.records).values()
    assert record["reward"] is None and "not_a_module" in record["error"]
