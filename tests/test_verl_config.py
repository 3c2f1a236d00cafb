"""Every configuration the verl backend generates composes with verl 0.9.1's own Hydra config and passes verl's
validators and ours; broken ones fail with the reason.  Needs ``pip install .[verl]`` (``.venv-verl``)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from harness_repo.contract import GRPOKnobs  # noqa: E402
from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides  # noqa: E402
from rl_backend.verl.validate import validate_overrides  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOMAINS = {"math": "domains.math:MathDomain", "swe": "domains.swe:SweDomain"}
# 4 prompts x 4 samples = 16 trajectories a step: divisible by 1, 8 and 16 GPUs
KNOBS = dict(group_size=4, prompts_per_step=4, steps_per_round=3)


def overrides(tmp_path: Path, domain: str = "math", *, gpus: int = 1, nodes: int = 1, resume: bool = False,
              dynamic_sampling: bool = False, launch: int = 1, **knobs) -> list[str]:
    plan = RoundPlan.for_round(tmp_path / "rounds" / "0" / "train", launch)
    plan.launch_dir.mkdir(parents=True, exist_ok=True)
    return build_overrides(GRPOKnobs(**(KNOBS | knobs), dynamic_sampling=dynamic_sampling),
                           LaunchOptions(gpus=gpus, nodes=nodes), plan, model_path="/models/Qwen3-4B",
                           harness_dir=REPO / "harness_repo" / "seeds" / "math", domain_ref=DOMAINS[domain],
                           run_id="r1", round=0, resume=resume, agent_loop=domain == "swe")


@pytest.mark.slow
def test_every_generated_configuration_validates(tmp_path: Path):
    failures = []
    for domain, gpus, nodes, resume, filters in itertools.product(DOMAINS, (1, 8), (1, 2), (False, True),
                                                                  (False, True)):
        ovr = overrides(tmp_path, domain, gpus=gpus, nodes=nodes, resume=resume, dynamic_sampling=filters)
        result = validate_overrides(ovr, ray_address="ray://head:10001" if nodes > 1 else None)
        if not result.ok:
            failures.append(((domain, gpus, nodes, resume, filters), result.problems))
    assert failures == []


def test_swe_rolls_out_with_our_agent_loop(tmp_path: Path):
    from rl_backend.verl.validate import compose

    agent = compose(overrides(tmp_path, "swe")).actor_rollout_ref.rollout.agent
    assert agent.default_agent_loop == "swe_agent" and agent.agent_loop_config_path.endswith("agent_loops.yaml")


def test_generated_keys_reach_verl(tmp_path: Path):
    from rl_backend.verl.validate import compose

    cfg = compose(overrides(tmp_path, resume=True, dynamic_sampling=True))
    assert cfg.trainer.resume_mode == "auto" and cfg.actor_rollout_ref.rollout.n == 4
    assert cfg.algorithm.filter_groups.enable and cfg.trainer.v1.sampler.sampler_kwargs.filter_groups_metric == "reward"
    assert cfg.reward.custom_reward_function.path.endswith("rl_backend/verl/reward_entry.py")
    assert cfg.custom_reward_function.path is None  # the legacy key verl 0.9 ignores stays unset
    assert "hf_model" in cfg.actor_rollout_ref.actor.checkpoint.save_contents
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH.endswith("launches/1/metrics.jsonl")


def test_the_sampler_gets_what_it_needs_to_judge_whole_groups(tmp_path: Path):
    from rl_backend.verl.validate import compose

    cfg = compose(overrides(tmp_path, mask_truncated=True, max_completion_length=96))
    kwargs = cfg.trainer.v1.sampler.sampler_kwargs
    assert kwargs.harness_dir == str(REPO / "harness_repo" / "seeds" / "math")
    assert kwargs.mask_truncated is True and kwargs.dynamic_sampling is False and kwargs.max_response_length == 96
    assert kwargs.tokenizer_path == "/models/Qwen3-4B" and kwargs.group_records_dir.endswith("0/train/group_records")


@pytest.mark.parametrize("change,reason", [
    (lambda o: o + ["actor_rollout_ref.rollout.name=foo"], "rollout.name='foo' is not one of"),
    (lambda o: o + ["trainer.logger=[console,jsonl]"], "unknown trainer.logger ['jsonl']"),
    (lambda o: o + ["custom_reward_function.path=/x/reward.py"], "legacy key(s) custom_reward_function.*"),
    (lambda o: o + ["algorithm.filter_groups.enable=True", "algorithm.filter_groups.metric=acc"],
     "algorithm.filter_groups.metric='acc' is never returned by the reward entry"),
    (lambda o: o + ["algorithm.filter_groups.enable=True"],
     "set +trainer.v1.sampler.sampler_kwargs.filter_groups_metric"),
    (lambda o: o + ["actor_rollout_ref.rollout.agent.default_agent_loop=swe_agent"],
     "unknown rollout.agent.default_agent_loop 'swe_agent'"),
    (lambda o: o + ["trainer.totl_epochs=3"], "Could not override 'trainer.totl_epochs'"),
    (lambda o: o + ["reward.reward_manager.name=batch"], "unknown reward manager 'batch'"),
    (lambda o: o + ["actor_rollout_ref.actor.ppo_mini_batch_size=8"],
     "data.train_batch_size (4) must be >= actor.ppo_mini_batch_size (8)"),
    (lambda o: o + ["actor_rollout_ref.actor.loss_agg_mode=foo"], "Invalid loss_agg_mode: foo"),
    (lambda o: o + ["trainer.nnodes=2"], "trainer.nnodes=2 needs a Ray cluster"),
])
def test_a_broken_configuration_fails_with_the_reason(tmp_path: Path, change, reason: str, monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    result = validate_overrides(change(overrides(tmp_path)))
    assert not result.ok and any(reason in p for p in result.problems), result.problems


def test_batch_divisibility_names_the_numbers(tmp_path: Path):
    # 3 prompts x 3 samples = 9 trajectories cannot be spread over 8 GPUs
    result = validate_overrides(overrides(tmp_path, gpus=8, group_size=3, prompts_per_step=3))
    assert result.problems == ["data.train_batch_size*rollout.n = 3*3 trajectories per step is not divisible by the "
                               "8 GPUs; change prompts_per_step or group_size, or --gpus"]


def test_missing_metrics_folder_is_reported(tmp_path: Path):
    ovr = overrides(tmp_path)
    (tmp_path / "rounds" / "0" / "train" / "launches" / "1").rmdir()
    assert any("does not exist (verl's file logger does not create it)" in p
               for p in validate_overrides(ovr).problems)

