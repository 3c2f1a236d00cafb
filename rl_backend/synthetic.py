"""Synthetic math rollouts: archive rows with realistic failure modes, no model needed.

For demos, tests and benchmarks of the backtest.  Questions are real reasoning-gym
items; responses are drawn from a fixed mix of behaviours a small policy shows
(right or wrong, ``Answer:`` line or ``\\boxed{}`` only, no final answer,
truncated).  ``verified`` comes from the trusted verifier the caller passes, as in
training (``rl_backend`` never imports ``meta_agent``; the caller does).

    from domains.math import MathDomain
    rows = synthetic_math_rows(run_id="demo", round=0, n_groups=50, group_size=4, seed=0,
                               verify=MathDomain().verify)
"""

from __future__ import annotations

import random
from collections.abc import Callable

from trajectory.rows import trajectory_row

Verify = Callable[[str, str, dict], tuple[float, dict]]
"""The trusted verifier: ``verify(data_source, response, ground_truth) -> (score in [0, 1], info)``."""

# behaviour -> weight; chosen so that every gate metric has something to measure
BEHAVIOURS = {
    "right_answer_line": 0.30,
    "right_boxed_only": 0.15,
    "wrong_answer_line": 0.25,
    "wrong_boxed_only": 0.05,
    "no_final_answer": 0.15,
    "truncated": 0.10,
}


def _response(behaviour: str, question: str, answer: str, rng: random.Random) -> tuple[str, bool]:
    try:
        wrong = str(int(answer) + rng.choice([-2, -1, 1, 3]))
    except ValueError:
        wrong = answer + "0"
    work = f"Let me compute. {question.split('?')[0].strip()}..."
    if behaviour == "right_answer_line":
        return f"{work}\nAnswer: {answer}", False
    if behaviour == "right_boxed_only":
        return f"{work} The result is \\boxed{{{answer}}}.", False
    if behaviour == "wrong_answer_line":
        return f"{work}\nAnswer: {wrong}", False
    if behaviour == "wrong_boxed_only":
        return f"{work} The result is \\boxed{{{wrong}}}.", False
    if behaviour == "no_final_answer":
        return f"{work} I think the numbers add up but I am not sure.", False
    return f"{work} First I add the first two numbers and then I carry the", True


def synthetic_math_rows(run_id: str, round: int, n_groups: int, group_size: int = 4, seed: int = 0,
                        tasks: tuple[str, ...] = ("chain_sum", "products"), harness_commit: str = "synthetic",
                        *, verify: Verify) -> list[dict]:
    """``n_groups`` GRPO groups of ``group_size`` rollouts each, as archive rows scored by ``verify``
    (the caller's trusted verifier, e.g. ``MathDomain().verify``: this layer imports no domain)."""
    import reasoning_gym

    rng = random.Random(f"{seed}-{round}")
    per_task = -(-n_groups // len(tasks))
    items = []
    for t, name in enumerate(tasks):
        config = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1} if name == "chain_sum" else {}
        ds = reasoning_gym.create_dataset(name, size=per_task, seed=seed * 1000 + round * 10 + t, **config)
        items += [(name, i, ds[i]) for i in range(per_task)]
    rows = []
    names, weights = list(BEHAVIOURS), list(BEHAVIOURS.values())
    for g, (name, i, item) in enumerate(items[:n_groups]):
        gt = {"answer": str(item["answer"])}
        source, task_id = f"reasoning_gym/{name}", f"{name}-{seed}-{round}-{i}"
        for k in range(group_size):
            behaviour = rng.choices(names, weights)[0]
            response, truncated = _response(behaviour, item["question"], gt["answer"], rng)
            score, info = verify(source, response, gt)
            rows.append(trajectory_row(
                traj_id=f"{run_id}-r{round}-g{g}-s{k}", run_id=run_id, round=round, step=g // 8,
                group_id=f"g{g}", sample_idx=k, domain="math", task_id=task_id,
                data_source=source, split="train", prompt=item["question"], response=response,
                messages=[{"role": "user", "content": item["question"]}, {"role": "assistant", "content": response}],
                ground_truth=gt, reward_info={"behaviour": behaviour}, verified=float(score), verifier_info=info,
                response_tokens=len(response.split()), truncated=truncated,
                finish_reason="length" if truncated else "stop", harness_commit=harness_commit,
                policy_ref="synthetic", task={"question": item["question"], "vars": {
                    "id": task_id, "name": name, "data_source": source, "split": "train", "config": config}},
            ))
    return rows
