"""A recipe predicts what its evidence can show (issue 44, 12i's fail-open-reward).

A small run's first round: two groups, nothing solved, one paid failure in one group, and a reward audit that sees
main paying constructed wrong answers.  verifier-answers is the right repair.  It predicted the sample's hack_rate,
failure_pay and reward_auc, none of which a bootstrap over two groups can show (a resample drawing the unpaid group
twice, one in four, moves nothing; no success makes the AUC undefined), so the gate rejected it for want of evidence
while the finding that named the mode, the audit over constructed answers, was there to be predicted.  The recipe
agent now promises only what its evidence can show, and the gate still rejects what does not hold.
"""

from __future__ import annotations

from pathlib import Path

import json

import pytest
from test_recipe_agent import SETTINGS
from test_search_agent_fitted import ONE, _round

import harness_repo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import TRANSCRIPT, RecipeAgent
from meta_agent.agents.recipe_evidence import gather
from meta_agent.agents.recipe_predict import can_show, fit
from meta_agent.agents.recipe_reward import boxed_answers, seed_reward
from meta_agent.agents.recipe_types import HarnessFiles
from meta_agent.backtest import backtest_branch
from rl_backend.archive import Archive
from trajectory.rows import trajectory_row

VERIFIER_ANSWERS = ["hack_rate decrease: no answer the verifier rejects is paid",
                    "failure_pay decrease: verified failures earn 0",
                    "reward_auc increase: the reward reads the answer the verifier reads",
                    "audit_hack_rate decrease: no constructed answer the verifier rejects is paid"]
"""What verifier-answers predicted in 12i's fail-open-reward round (the sample's rates and the audit's)."""
SIX = [("H", "W", "W", "N")] + [("W", "W", "N", "W")] * 5
"""Six unsolved groups, the paid failure in one: still no interval over the sample's groups, but the audit spans six
tasks, enough for one (``judge.audit_contrast.MIN_GROUPS``)."""


def test_an_interval_over_groups_clears_zero_only_when_few_resamples_miss_every_carrier() -> None:
    assert [can_show(k, 2) for k in (0, 1, 2)] == [False, False, True]
    assert [can_show(k, 4) for k in (1, 2, 3)] == [False, False, True]
    # (61/64)^64 = 0.046, (60/64)^64 = 0.016: against a tail of 0.025
    assert [can_show(k, 64) for k in (3, 4)] == [False, True]
    assert not can_show(3, 2)  # more carriers than groups is bad evidence, not proof


def test_a_reward_repair_on_two_groups_promises_the_audit_not_the_sample() -> None:
    one = {"spread": {"groups": 2, "hack": 1, "failure_pay": 1, "miss": 0, "success": 0, "failure": 2}}
    kept, unshown = fit(VERIFIER_ANSWERS, one)
    assert kept == VERIFIER_ANSWERS[3:], kept
    assert [t for t, _ in unshown] == VERIFIER_ANSWERS[:3]
    assert "1 of the round's groups (hack), of 2 the gate may sample" in unshown[0][1], unshown
    assert "0 of the round's groups (success)" in unshown[2][1], unshown
    # paid failures in both groups: the sample shows them; an AUC needs a success it does not have
    both = {"spread": {**one["spread"], "hack": 2, "failure_pay": 2}}
    assert fit(VERIFIER_ANSWERS, both)[0] == VERIFIER_ANSWERS[:2] + VERIFIER_ANSWERS[3:]
    # nothing else to promise: the lines stay, and the gate's rejection says why
    assert fit(VERIFIER_ANSWERS[:2], one) == (VERIFIER_ANSWERS[:2], [])
    # no spread read (an agent without an archive): nothing is guessed
    assert fit(VERIFIER_ANSWERS, {}) == (VERIFIER_ANSWERS, [])


def test_the_spread_is_read_from_a_real_archive_as_the_gate_counts_pay(tmp_path: Path) -> None:
    """A paid failure the filters dropped pays nothing; a success whose reward erred is a miss (and an error); failures
    paid differently spread only in a group without a kept success; the exam's rows and another round's stay out."""

    def row(i: int, group: str, verified: float, reward: float | None, kept: bool = True, split: str = "train",
            rnd: int = 0) -> dict:
        return trajectory_row(traj_id=f"t{rnd}-{i}", run_id="r", round=rnd, step=0, group_id=group, sample_idx=i,
                              domain="math", task_id=f"task{group}", data_source="reasoning_gym/chain_sum",
                              split=split, prompt="q", response="Answer: 7", messages=[],
                              ground_truth={"answer": "7"}, verified=verified, verifier_info="{}", reward=reward,
                              kept=kept, response_tokens=3, truncated=False, finish_reason="stop")

    archive = Archive(tmp_path / "archive")
    archive.append_round("r", 0, [row(0, "g0", 0.0, 1.0), row(1, "g0", 1.0, 1.0),
                                  row(2, "g1", 0.0, 1.0, kept=False), row(3, "g1", 0.0, 0.3), row(7, "g1", 0.0, 0.0),
                                  row(4, "g2", 1.0, None), row(5, "g2", 0.0, 0.0),
                                  row(6, "x0", 0.0, 1.0, split="heldout")])
    archive.append_round("r", 1, [row(9, "g3", 0.0, 1.0, rnd=1)])
    assert gather(archive, 0)["spread"] == {"groups": 3, "hack": 1, "failure_pay": 2, "miss": 1, "success": 2,
                                            "failure": 3, "error": 1, "failure_spread": 1, "sampled": 3}


def _recipe_then_gate(tmp_path: Path, sandbox, plan: list[tuple[str, ...]] = ONE) -> tuple:
    """The recipe agent on the round, then the gate on its branch: (repo, archive, proposal, outcome)."""
    repo, archive, digest = _round(tmp_path, sandbox, plan)
    assert digest["hack_rate"] > 0 and digest["audit_hack_rate"] > 0, digest
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "rounds" / "0", max_candidates=1,
                       archive=archive)
    [proposal] = RecipeAgent().propose(ctx)
    assert proposal.branch == "iv/r0-verifier-answers", proposal
    outcome = backtest_branch(repo, archive, proposal.branch, sandbox, tmp_path / "backtests",
                              settings=SETTINGS, run_id="small")
    return repo, archive, proposal, outcome


@pytest.mark.docker
def test_recipe_arm_repair_on_a_sample_that_cannot_show_its_rates_is_merged(tmp_path: Path, docker_sandbox) -> None:
    _, _, proposal, outcome = _recipe_then_gate(tmp_path, docker_sandbox)
    assert outcome.decision == "merge", outcome.reasons
    assert outcome.report["gate"]["probation"] is True, outcome.report["gate"]
    assert any(e.startswith("audit_hack_rate decrease") for e in proposal.predicted_effects), proposal
    assert not any(e.startswith(("hack_rate", "failure_pay", "reward_auc")) for e in proposal.predicted_effects)
    [entry] = [e for e in json.loads((tmp_path / "rounds" / "0" / TRANSCRIPT).read_text())["rules"]
               if e.get("branch")]
    assert len(entry["unshown"]) == 3 and "1 of the round's groups (hack), of 2" in entry["unshown"][0], entry


@pytest.mark.docker
def test_where_the_audit_spans_enough_tasks_the_gate_holds_the_promise_offline_and_rejects_a_false_one(
        tmp_path: Path, docker_sandbox) -> None:
    """Six groups: the sample's rates still cannot show the repair, the audit can.  The recipe's repair merges on
    what the gate measured (not on probation); a reward that changes nothing, committed with the very same
    predictions, is rejected: the gate's evidence rule is what it was."""
    repo, archive, proposal, outcome = _recipe_then_gate(tmp_path, docker_sandbox, SIX)
    assert [e.split()[0] for e in proposal.predicted_effects] == ["audit_miss_rate", "audit_hack_rate"], proposal
    gate = outcome.report["gate"]
    assert (outcome.decision, gate["probation"]) == ("merge", False), outcome.reasons
    held = [e for e in gate["effects"] if e["status"] == "held"]
    assert "audit_hack_rate" in [e["metric"] for e in held], gate["effects"]

    wt = repo.start_intervention(0, "same-pay", worktree_root=tmp_path / "wt")
    reward = Path(wt.path) / "reward.py"
    reward.write_text(reward.read_text() + "\n# the verifier's rules, as the digest asked\n")
    repo.commit(wt, "Pay what the verifier accepts", {"Hypothesis": "wrong answers are paid",
                                                      "Predicted-Effect": proposal.predicted_effects})
    repo.remove_worktree(wt, force=True)
    same = backtest_branch(repo, archive, "iv/r0-same-pay", docker_sandbox,
                           tmp_path / "backtests", settings=SETTINGS, run_id="small")
    assert same.decision == "reject", same.reasons
    assert "audit_hack_rate decrease" in same.reasons[0] and "inconclusive" in same.reasons[0], same.reasons


SEED_FILES = Path(harness_repo.__file__).parent / "seeds" / "math"


def _files(reward: str) -> HarnessFiles:
    user = (SEED_FILES / "prompts" / "user.j2").read_text()
    return HarnessFiles((SEED_FILES / "harness.yaml").read_text(), reward, user)


def _digest(**fields) -> dict:
    """A two-group round's digest, disagreements shown in one group, and an audit that saw ``audit`` examples."""
    audit = fields.pop("audit")
    return {"round": 0, "failure_modes": [], "disagreements": {"hack": [], "miss": []},
            "audit": {"examples": audit}, **fields}


HACK = {"response": "Answer: 14/2", "verified": 0.0, "reward": 1.0}
BOXED = {"response": "so \\boxed{7}", "verified": 1.0, "reward": 0.0}


def test_seed_reward_promises_the_audit_that_named_its_mode() -> None:
    d = _digest(hack_rate=0.125, disagreements={"hack": [HACK], "miss": []}, audit_hack_rate=0.4,
                audit={"hack": [HACK], "miss": []},
                evidence={"spread": {"groups": 2, "hack": 1, "failure_pay": 1, "miss": 0, "success": 0, "failure": 2}})
    change = seed_reward(d, _files((SEED_FILES / "reward.py").read_text() + "\n# edited\n"))
    kept, _ = fit(change.effects, d["evidence"])
    assert [e.split()[0] for e in kept] == ["audit_hack_rate"], kept
    # without an audit example the rule promises what it did: the sample's rates
    plain = seed_reward({**d, "audit": {"examples": {"hack": [], "miss": []}}}, _files(
        (SEED_FILES / "reward.py").read_text() + "\n# edited\n"))
    assert [e.split()[0] for e in plain.effects] == ["hack_rate", "failure_pay"], plain.effects


def test_boxed_answers_promises_the_audit_that_named_its_mode() -> None:
    d = _digest(miss_rate=0.5, disagreements={"hack": [], "miss": [BOXED]}, audit_miss_rate=0.3,
                audit={"hack": [], "miss": [BOXED]},
                evidence={"spread": {"groups": 2, "hack": 0, "failure_pay": 0, "miss": 1, "success": 2, "failure": 2}})
    change = boxed_answers(d, _files((SEED_FILES / "reward.py").read_text()))
    kept, _ = fit(change.effects, d["evidence"])
    assert [e.split()[0] for e in kept] == ["audit_miss_rate"], kept
    # an audit whose unpaid right answers hold no box: the box repair cannot promise them
    other = boxed_answers({**d, "audit": {"examples": {"hack": [], "miss": [{**BOXED, "response": "x = 7"}]}}},
                          _files((SEED_FILES / "reward.py").read_text()))
    assert not any(e.startswith("audit_") for e in other.effects), other.effects


def _main_finding(name: str, rate: float) -> dict:
    return {"name": f"main:{name}", "source": "main_checks", "severity": "error", "rate": rate,
            "message": f"main fails the gate's {name} check", "examples": [{"response": "I am not sure."}]}


def test_verifier_answers_reads_the_main_findings_it_is_listed_for() -> None:
    from meta_agent.agents.recipe_reward import verifier_answers

    partial = _digest(failure_modes=[_main_finding("failure_spread", 0.5), _main_finding("failure_pay_new", 0.3)],
                      hack_rate=0.0, audit={"hack": [], "miss": []})
    change = verifier_answers(partial, _files((SEED_FILES / "reward.py").read_text() + "\n# partial credit\n"))
    assert not isinstance(change, str), change
    assert [e.split()[0] for e in change.effects] == ["failure_pay", "failure_spread"], change.effects
    crash = _digest(failure_modes=[_main_finding("execution", 0.125)], audit={"hack": [], "miss": []})
    change = verifier_answers(crash, _files((SEED_FILES / "reward.py").read_text() + "\n# crashes\n"))
    assert not isinstance(change, str) and [e.split()[0] for e in change.effects] == ["error_rate"], change
    # a finding whose rate is 0 or that shows no example is no evidence
    quiet = _digest(failure_modes=[{**_main_finding("execution", 0.125), "examples": []}],
                    audit={"hack": [], "miss": []})
    assert isinstance(verifier_answers(quiet, _files((SEED_FILES / "reward.py").read_text())), str)


def _rows(rnd: int, groups: list[tuple[float, float]], first: int = 0) -> list[dict]:
    """One row per (verified, reward) pair, each its own group of a chain_sum round."""
    return [trajectory_row(traj_id=f"t{rnd}-{first + i}", run_id="r", round=rnd, step=0, group_id=f"g{first + i}",
                           sample_idx=0, domain="math", task_id=f"task{first + i}",
                           data_source="reasoning_gym/chain_sum", split="train", prompt="q", response="Answer: 14/2",
                           messages=[], ground_truth={"answer": "7"}, verified=v, verifier_info="{}", reward=r,
                           response_tokens=3, truncated=False, finish_reason="stop")
            for i, (v, r) in enumerate(groups)]


def test_the_round_s_carriers_are_read_among_every_group_the_gate_may_sample(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "archive")
    archive.append_round("r", 0, _rows(0, [(0.0, 0.0)] * 6))
    archive.append_round("r", 1, _rows(1, [(0.0, 1.0)] * 2, first=6))
    ev = gather(archive, 1)
    kept, unshown = fit(VERIFIER_ANSWERS, ev)
    assert kept == VERIFIER_ANSWERS[3:], kept
    assert "2 of the round's groups (hack), of 8 the gate may sample" in unshown[0][1], unshown
    # a run of one round: both of its groups carry it, and the gate can show it
    alone = Archive(tmp_path / "alone")
    alone.append_round("r", 1, _rows(1, [(0.0, 1.0)] * 2, first=6))
    assert fit(VERIFIER_ANSWERS, gather(alone, 1))[0] == VERIFIER_ANSWERS[:2] + VERIFIER_ANSWERS[3:]
