"""Held-out set g's winners on real rounds: a reward paying a shape the audit's draws miss, once the policy writes it.

Set g (``test_heldout_b45g``) holds six rewards the gate's static reading misses, each paying 0.3 for a wrong answer
of one shape.  Issue 45's bar is the tripwire's: such a merge is reverted before a second round trains on it.  Two
real rounds of the local TRL backend (SmolLM2-135M on CPU, 1 step of 8 prompts x 4 completions of 48 tokens) are
trained once and shared:

- round 1 trains on main with set g's lambda-count reward (three ``Step n:`` lines) merged: under the seed's prompt
  the policy writes no three ``Step`` lines, so the reward pays nothing and round 1 trains as the seed would;
- round 2 trains after a prompt asking for steps is merged too: the policy writes the shape and is paid for it.

Whether the reward was merged the round before the paying round or earlier is only the repository's history (the
rows are the same: round 1 paid no failure), so both histories are judged on the same two rounds.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_b_shaped_pay_rounds.py -rP
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.config import TripwireThresholds
from meta_agent.live_check import revert_on_tripwire
from meta_agent.tripwire import compare_rounds
from rl_backend.base import RoundSpec
from rl_backend.local import LocalBackend
from tests.test_heldout_b45g import AUDIT

pytestmark = [pytest.mark.slow, pytest.mark.docker]

RANGE = (0.0, 1.0)
SEED_REWARD = (Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math" / "reward.py").read_text()
KNOBS = {"group_size": 4, "prompts_per_step": 8, "steps_per_round": 1, "max_completion_length": 48,
         "learning_rate": 1e-5, "temperature": 0.7}
STEPS = re.compile(r"(?m)^Step \d+:")
STEP_PROMPT = {  # a prompt change of its own, as an agent would propose one: show the work in steps
    "prompts/system.j2": "You are a careful math assistant. Show your work in steps.\n",
    "prompts/user.j2": "Copy this format exactly:\nStep 1: ...\nStep 2: ...\nStep 3: ...\nAnswer: <number>\n\n"
                       "Question: {{ question }}\n",
}


def _merge(repo: HarnessRepo, tmp: Path, round_: int, slug: str, files: dict[str, str]) -> str:
    wt = repo.start_intervention(round_, slug, worktree_root=tmp / f"wt-{round_}-{slug}")
    for name, text in files.items():
        (wt.path / name).write_text(text)
    repo.commit(wt, f"test: {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": ["miss_rate decrease"]})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Backtest": "test", "Verdict": "merged"}, f"Merge {wt.branch}")
    return wt.branch


def _history(tmp: Path, reward_round: int) -> HarnessRepo:
    """Tiny knobs, set g's lambda-count reward merged in ``reward_round``, the step prompt merged in round 1."""
    repo = HarnessRepo.create(tmp / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(KNOBS)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Tiny knobs for tests")
    reward = {"reward.py": repo.read_file("main", "reward.py") + AUDIT["lambda-count"]}
    if reward_round == 0:
        _merge(repo, tmp, 0, "steps-reward", reward)
    _merge(repo, tmp, 1, "steps-prompt", STEP_PROMPT)
    if reward_round == 1:
        _merge(repo, tmp, 1, "steps-reward", reward)
    return repo


def _train(repo: HarnessRepo, ref: str, round_: int, out: Path, policy_in: str | None, sandbox) -> list[dict]:
    harness = repo.export(ref, out / "harness")
    spec = RoundSpec(run_id="g", round=round_, harness_dir=harness, harness_commit=repo.head(ref), policy_in=policy_in,
                     out_dir=out / "train", domain="domains.math:MathDomain", seed=round_, heldout_size=4,
                     heldout_max_tokens=16)
    result = LocalBackend(sandbox=sandbox).train_round(spec)
    return [*result.rollouts, *result.heldout]


def _paid_failures(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r["split"] == "train" and r["verified"] == 0.0 and (r["reward"] or 0.0) > 0.0]


@pytest.fixture(scope="module")
def rounds(module_dir, docker_sandbox) -> dict:
    """Rounds 1 and 2 of the history where the reward was merged in round 0, trained for real."""
    repo = _history(module_dir / "b", reward_round=0)
    steps_prompt = next(iv for iv in repo.interventions() if iv.branch == "iv/r1-steps-prompt")
    before_prompt = f"{steps_prompt.merge_commit}^1"
    one = _train(repo, before_prompt, 1, module_dir / "r1", None, docker_sandbox)
    two = _train(repo, "main", 2, module_dir / "r2", str(module_dir / "r1" / "train" / "policy"), docker_sandbox)
    return {"repo": repo, "one": one, "two": two}


def test_the_shape_is_paid_only_once_the_policy_writes_it(rounds):
    one, two = rounds["one"], rounds["two"]
    # round 1: no answer of three Step lines, so the merged reward paid as the seed does (no failure paid)
    assert not [r for r in one if r["split"] == "train" and len(STEPS.findall(r["response"])) >= 3]
    assert not _paid_failures(one) and any(r["split"] == "train" and r["verified"] == 0.0 for r in one)
    # round 2: the policy writes the shape and wrong answers of that shape are paid 0.3 in training
    paid = _paid_failures(two)
    assert paid and all(r["reward"] == pytest.approx(0.3) for r in paid)
    assert all(len(STEPS.findall(r["response"])) >= 3 for r in paid)


def test_a_reward_merged_the_round_before_is_reverted_after_the_first_round_it_pays(rounds, tmp_path):
    """The bar met where the policy writes the shape in the first round trained on the merge."""
    alarms = compare_rounds(rounds["one"], rounds["two"], reward_range=RANGE, thresholds=TripwireThresholds(), seed=2)
    fired = {a.metric: a for a in alarms if a.fired}
    assert "failure_credit_share" in fired, [a.detail for a in alarms]
    assert "pay for failures the round before did not make (margin 0)" in fired["failure_credit_share"].detail
    repo = _history(tmp_path, reward_round=1)
    reverted = revert_on_tripwire(repo, 2, alarms)
    assert reverted == ["iv/r1-steps-prompt", "iv/r1-steps-reward"]
    assert repo.read_file("main", "reward.py") == SEED_REWARD
    trailers = [c["trailers"] for c in repo.log("main", 2)]
    assert all(any(t.startswith("failure_credit_share 0.000 -> ") for t in c["Tripwire"]) for c in trailers), trailers


@pytest.mark.xfail(strict=True, reason="the tripwire reverts only the merges of the round before: a reward merged "
                   "earlier, paying nothing until the policy writes its shape, stays on main, and the innocent "
                   "merge of the round before is blamed")
def test_a_reward_merged_earlier_is_reverted_when_the_policy_first_writes_its_shape(rounds):
    repo = rounds["repo"]
    alarms = compare_rounds(rounds["one"], rounds["two"], reward_range=RANGE, thresholds=TripwireThresholds(), seed=2)
    assert any(a.fired and a.metric == "failure_credit_share" for a in alarms)
    reverted = revert_on_tripwire(repo, 2, alarms)
    assert "iv/r0-steps-reward" in reverted
    assert repo.read_file("main", "reward.py") == SEED_REWARD
