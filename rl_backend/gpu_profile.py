"""The GRPO knobs a run on GPUs starts from: the seed harness's profile for a 1-8B model.

``meta_agent.run_config`` commits it onto a new GPU run's seed harness and records it in ``run.json``; the verl
backend validates the run's options with it when a configuration is invalid, to tell whose fault that is (a
configuration these knobs make valid is the harness's to have broken).  Plain data: importable anywhere.
"""

from __future__ import annotations

from typing import Any

GPU_SEED_PROFILE: dict[str, Any] = {
    # 8 samples per prompt: the group size verl's and TRL's GRPO recipes start from; enough spread for a
    # baseline on tasks a 1-8B model solves 20-80% of the time, without quadrupling generation cost like 32.
    "group_size": 8,
    # 64 prompts x 8 = 512 trajectories per step: divides over 1, 2, 4 and 8 GPUs and 2 nodes of 8, and is
    # within the 256-1024 a practitioner starts a 1-8B GRPO run with (verl's GSM8K example: 1024 x 5).
    "prompts_per_step": 64,
    # 20 steps (1280 prompts, 10240 trajectories) per round: enough optimizer steps to move a multi-billion
    # model at lr 1e-6, and enough rows for the backtest's sample, while a round stays an hour or so on 8 GPUs.
    "steps_per_round": 20,
    # 1e-6 with a constant schedule: the learning rate of verl's and DAPO's GRPO examples for 1.5-8B models;
    # the CPU seed's 1e-5 is for a 135M model and destabilises billion-parameter ones.
    "learning_rate": 1e-6,
    # a small KL term (verl's examples: kl_loss_coef 0.001, low_var_kl) keeps early rounds near the base.
    "beta": 0.001,
    # 2048 response tokens: math chains of thought of 1-8B instruct models mostly end within it, so a round
    # trains on finished answers, not cut-off ones (the CPU seed's 32-48 tokens cut almost every one).
    "max_completion_length": 2048,
    "max_prompt_length": 1024,
}
"""The seed harness's GRPO knobs for a run on GPUs (a 1-8B model); see each knob's reason above."""
