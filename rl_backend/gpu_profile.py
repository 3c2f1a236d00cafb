"""The GRPO knobs a run on GPUs starts from: the seed harness's profile for a 1-8B model, per domain.

``meta_agent.run_config`` commits it onto a new GPU run's seed harness and records it in ``run.json``; the verl
backend validates the run's options with it when a configuration is invalid, to tell whose fault that is (a
configuration these knobs make valid is the harness's to have broken).  Plain data: importable anywhere.

    seed_profile_for("swe")       # SWE_GPU_PROFILE; math and code get GPU_SEED_PROFILE
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

SWE_TURN_TOKENS = 1024
"""Most tokens one policy turn of an SWE agent episode may generate (``agent_loops.yaml``'s ``max_turn_tokens``):
a turn is brief reasoning and one bash command; a turn that rambles ends there, not after the whole budget."""

MAX_DRAWS_PER_TASK = 2
"""A round draws each training task at most this many times (``task_pool_problem``): more rows than that are the
same few episodes again, which spends GPU hours without new signal."""

SWE_GPU_PROFILE: dict[str, Any] = {
    # 4 prompts x 8 episodes = 32 per step: divides over 1-16 GPUs; each episode holds a container, so the step's
    # episodes stay within what a node's Docker runs at once (agent_loops.yaml: max_containers per worker).
    "group_size": 8,
    "prompts_per_step": 4,
    # 3 steps x 4 prompts = 12 rows a round: the 6 shipped training tasks twice each (MAX_DRAWS_PER_TASK).
    "steps_per_round": 3,
    "learning_rate": 1e-6,
    "beta": 0.001,
    # the whole episode's budget: up to 15 turns of SWE_TURN_TOKENS-capped replies plus the command output shown
    # between them (verl counts observations in the response); a math-sized 2048 ends an episode in 2-3 turns.
    "max_completion_length": 16384,
    # the task statement (issue text) and the agent system prompt
    "max_prompt_length": 2048,
}
"""The seed harness's GRPO knobs for an SWE agent-mode run on GPUs; see each knob's reason above."""


def seed_profile_for(domain: str) -> dict[str, Any]:
    """The GPU seed profile of ``domain`` (its registry name)."""
    return SWE_GPU_PROFILE if domain == "swe" else GPU_SEED_PROFILE


def task_pool_problem(rows: int, distinct_tasks: int) -> str | None:
    """A round of ``rows`` training rows drawn from ``distinct_tasks`` tasks, refused when it repeats each task more
    than ``MAX_DRAWS_PER_TASK`` times; the problem names the knobs to lower."""
    if distinct_tasks <= 0 or rows <= MAX_DRAWS_PER_TASK * distinct_tasks:
        return None
    return (f"a round draws {rows} training rows (steps_per_round x prompts_per_step) from {distinct_tasks} distinct "
            f"task(s): more than {MAX_DRAWS_PER_TASK} draws of each; lower prompts_per_step or steps_per_round "
            f"to at most {MAX_DRAWS_PER_TASK * distinct_tasks} rows, or add tasks to the mix")
