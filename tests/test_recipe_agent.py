"""The recipe agent on a real harness repo (real git): each rule's branch, trailers and edit.

The edited reward.py / filters.py are exported from the branch and imported here
to check that they do what the rule says (tests may run harness code in-process).
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path
from types import ModuleType

import jinja2
import pytest
import yaml

from harness_repo.contract import HarnessConfig
from harness_repo.repo import HarnessRepo
from meta_agent.agents import AgentContext, Proposal, RecipeAgent
from meta_agent.agents.recipe import MAX_COMPLETION_CAP, TRANSCRIPT
from meta_agent.gate import parse_effect


def quiet_digest(round: int = 1, **fields: object) -> dict:
    """A digest with no signal for any rule; ``fields`` override it."""
    digest = {
        "round": round, "n_trajectories": 64, "n_groups": 16, "reward_mean": 0.4, "reward_std": 0.3,
        "verified_mean": 0.45, "heldout_accuracy": 0.4, "zero_variance_share": 0.2,
        "verified_zero_variance_share": 0.2, "truncation_rate": 0.05, "mean_response_tokens": 30.0,
        "no_final_answer_rate": 0.1, "hack_rate": 0.0, "miss_rate": 0.05,
        "disagreements": {"hack": [], "miss": []}, "failure_modes": [],
        "per_task": {"reasoning_gym/chain_sum": {"count": 32, "accuracy": 0.5, "reward": 0.5},
                     "reasoning_gym/products": {"count": 32, "accuracy": 0.4, "reward": 0.4}},
        "trends": {}, "training": {"steps": 4},
    }
    digest.update(fields)
    return digest


BOXED_MISS = {"disagreements": {"hack": [], "miss": [
    {"traj_id": "t1", "prompt": "What is 4 + 8?", "response": "4 plus 8 is \\boxed{12}.",
     "reward": 0.0, "verified": 1.0}]}}


@pytest.fixture()
def repo(tmp_path: Path) -> HarnessRepo:
    return HarnessRepo.create(tmp_path / "harness", "math")


def propose(repo: HarnessRepo, digest: dict, *, history: list | None = None, skills: list | None = None,
            max_candidates: int = 2) -> list[Proposal]:
    ctx = AgentContext(round=digest["round"], digest=digest, digest_markdown="", history=history or [],
                       skills=skills or [], repo=repo, worktree_root=repo.path.parent / "worktrees",
                       round_dir=repo.path.parent / "rounds" / str(digest["round"]), max_candidates=max_candidates)
    return RecipeAgent().propose(ctx)


def transcript(repo: HarnessRepo, round: int) -> dict[str, dict]:
    data = json.loads((repo.path.parent / "rounds" / str(round) / TRANSCRIPT).read_text())
    return {entry["rule"]: entry for entry in data["rules"]}


def load(repo: HarnessRepo, ref: str, file: str) -> ModuleType:
    """Import ``file`` from an export of ``ref`` under a fresh module name."""
    dest = repo.path.parent / "exports" / uuid.uuid4().hex
    repo.export(ref, dest)
    spec = importlib.util.spec_from_file_location(f"h_{uuid.uuid4().hex}", dest / file)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_branch(repo: HarnessRepo, proposal: Proposal, branch: str, files: list[str], effects: list[tuple]) -> dict:
    """The branch, its trailers and its changed files match the proposal; returns the trailers."""
    assert proposal.branch == branch and proposal.agent == "recipe"
    iv = repo.intervention(branch)
    assert iv.status == "open"
    assert iv.trailers["Agent"] == ["recipe"]
    assert iv.trailers["Hypothesis"] == [proposal.hypothesis] and iv.hypothesis == proposal.hypothesis
    assert iv.trailers["Predicted-Effect"] == proposal.predicted_effects
    assert [parse_effect(e) for e in proposal.predicted_effects] == effects
    assert repo.changed_paths(branch) == files == proposal.files_changed
    assert repo.contract_violations(branch) == []
    repo.config(branch)  # harness.yaml still validates
    assert not list((repo.path.parent / "worktrees").iterdir())  # worktree removed, branch kept
    return iv.trailers


def test_boxed_answers_fixes_the_reward_then_stays_quiet(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(miss_rate=0.45, **BOXED_MISS))
    trailers = check_branch(repo, p, "iv/r1-boxed-answers", ["reward.py"],
                            [("miss_rate", "decrease"), ("reward_auc", "increase")])
    assert trailers["Recipe-Change"] == ["boxed-answers"]
    assert trailers["Trigger"] == ["miss_rate > 0.2 and a failure example contains \\boxed"]
    assert repo.log("iv/r1-boxed-answers", 1)[0]["subject"] == "Accept \\boxed{} answers in the reward"
    before, after = load(repo, "main", "reward.py"), load(repo, p.branch, "reward.py")
    gt = {"answer": "12"}
    assert before.compute_score("reasoning_gym/chain_sum", "so \\boxed{12}", gt)["score"] == 0.0
    assert after.compute_score("reasoning_gym/chain_sum", "so \\boxed{12}", gt)["score"] == 1.0
    assert after.compute_score("reasoning_gym/chain_sum", "so \\boxed{13}", gt)["score"] == 0.0
    assert after.compute_score("reasoning_gym/chain_sum", "x \\boxed{12}\nAnswer: 11", gt)["score"] == 0.0
    assert after.compute_score("reasoning_gym/chain_sum", "Answer: 12", gt)["score"] == 1.0
    assert after.compute_score("reasoning_gym/chain_sum", "no answer at all", gt)["score"] == 0.0

    # the branch is still open: the same digest next round proposes nothing new
    history = [iv.__dict__ for iv in repo.interventions()]
    assert propose(repo, quiet_digest(2, miss_rate=0.45, **BOXED_MISS), history=history) == []
    assert "still open" in transcript(repo, 2)["boxed-answers"]["reason"]
    # once merged, main's reward already reads \boxed: the rule stays quiet even without history
    repo.merge(p.branch, {"Backtest": "test"}, "Merge boxed answers")
    assert propose(repo, quiet_digest(3, miss_rate=0.45, **BOXED_MISS)) == []
    assert "already handles" in transcript(repo, 3)["boxed-answers"]["reason"]


def test_boxed_answers_needs_boxed_examples(repo: HarnessRepo) -> None:
    assert propose(repo, quiet_digest(miss_rate=0.9)) == []
    assert "\\boxed" in transcript(repo, 1)["boxed-answers"]["reason"]


def test_dynamic_sampling_drops_flat_groups(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(zero_variance_share=0.75), skills=[{"name": "dynamic-sampling"}])
    trailers = check_branch(repo, p, "iv/r1-dynamic-sampling", ["filters.py", "harness.yaml"],
                            [("signal_share", "unchanged"), ("kept_share", "decrease")])
    assert trailers["Skill"] == ["dynamic-sampling"] and p.skill == "dynamic-sampling"
    filters = load(repo, p.branch, "filters.py")
    assert filters.keep_group([{"reward": 1.0}, {"reward": 1.0}, {"reward": 1.0}]) is False
    assert filters.keep_group([{"reward": 0.0}, {"reward": 0.0}]) is False
    assert filters.keep_group([{"reward": 1.0}, {"reward": 0.0}]) is True
    assert filters.keep_group([{"reward": None}, {"reward": None}]) is True  # unknown: left to the old filter
    assert filters.keep_trajectory({"reward": 0.0}) is True
    assert repo.config(p.branch).grpo.dynamic_sampling is True
    assert repo.read_file(p.branch, "harness.yaml").startswith("# Seed math harness")  # header comment kept


def test_truncation_raises_length_within_bounds(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(truncation_rate=0.4))
    check_branch(repo, p, "iv/r1-truncation", ["harness.yaml"],
                 [("truncation_rate", "decrease"), ("mean_reward", "unchanged")])
    grpo = repo.config(p.branch).grpo
    assert (grpo.max_completion_length, grpo.mask_truncated) == (72, True)
    assert repo.config(p.branch).tasks == repo.config("main").tasks

    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(max_completion_length=MAX_COMPLETION_CAP - 10, mask_truncated=True)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Long completions")
    [p2] = propose(repo, quiet_digest(2, truncation_rate=0.4))
    assert repo.config(p2.branch).grpo.max_completion_length == MAX_COMPLETION_CAP  # bounded, not x1.5

    config["grpo"]["max_completion_length"] = MAX_COMPLETION_CAP
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "At the cap")
    assert propose(repo, quiet_digest(3, truncation_rate=0.4)) == []
    assert "cap" in transcript(repo, 3)["truncation"]["reason"]


def test_format_shaping_credits_the_answer_line(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(no_final_answer_rate=0.7))
    check_branch(repo, p, "iv/r1-format-shaping", ["prompts/user.j2", "reward.py"],
                 [("no_final_answer_rate", "decrease"), ("hack_rate", "unchanged")])
    reward = load(repo, p.branch, "reward.py")
    gt = {"answer": "5"}
    wrong = reward.compute_score("reasoning_gym/chain_sum", "I think\nAnswer: 7", gt)
    assert wrong["score"] == pytest.approx(0.1) and wrong["format_credit"] is True
    assert reward.compute_score("reasoning_gym/chain_sum", "Answer: 5\n", gt)["score"] == 1.0
    assert reward.compute_score("reasoning_gym/chain_sum", "no idea", gt)["score"] == 0.0
    assert reward.compute_score("reasoning_gym/chain_sum", "Answer: 7\nbut maybe not", gt)["score"] == 0.0
    template = repo.read_file(p.branch, "prompts/user.j2")
    text = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template).render(question="What is 2+3?")
    assert text.startswith("What is 2+3?") and text.rstrip().endswith('"Answer: <number>", and nothing after it.')


def test_curriculum_steps_one_knob_of_solved_tasks(repo: HarnessRepo) -> None:
    per_task = {"reasoning_gym/chain_sum": {"count": 32, "accuracy": 0.9, "reward": 0.9},
                "reasoning_gym/products": {"count": 4, "accuracy": 1.0, "reward": 1.0}}  # too few to trust
    [p] = propose(repo, quiet_digest(per_task=per_task))
    trailers = check_branch(repo, p, "iv/r1-curriculum-step", ["harness.yaml"],
                            [("verified_zero_variance_share", "decrease"), ("mean_reward", "unchanged")])
    assert trailers["Recipe-Change"] == ["curriculum-step:chain_sum.max_terms=3"]
    tasks = {t.name: t.config for t in repo.config(p.branch).tasks}
    assert tasks["chain_sum"] == {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 1}
    assert tasks["products"] == {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    # merged, the next step stretches the other knob
    repo.merge(p.branch, {"Backtest": "test"}, "Merge curriculum step")
    history = [iv.__dict__ for iv in repo.interventions()]
    [p2] = propose(repo, quiet_digest(2, per_task=per_task), history=history)
    assert {t.name: t.config for t in repo.config(p2.branch).tasks}["chain_sum"]["max_digits"] == 2


def test_kl_clip_on_reward_up_heldout_down(repo: HarnessRepo) -> None:
    trends = {"reward_mean": {"previous": 0.3, "delta": 0.15}, "heldout_accuracy": {"previous": 0.5, "delta": -0.1}}
    [p] = propose(repo, quiet_digest(trends=trends))
    check_branch(repo, p, "iv/r1-kl-clip", ["harness.yaml"],
                 [("heldout_accuracy", "increase"), ("mean_reward", "unchanged")])
    assert repo.config(p.branch).grpo.beta == pytest.approx(0.02)
    repo.merge(p.branch, {"Backtest": "test"}, "Merge kl")
    [p2] = propose(repo, quiet_digest(2, trends=trends))
    assert repo.config(p2.branch).grpo.epsilon == pytest.approx(0.15)  # beta already on: tighter clip


def test_strongest_signals_win_and_history_blocks_repeats(repo: HarnessRepo) -> None:
    loud = quiet_digest(miss_rate=0.3, zero_variance_share=0.9, truncation_rate=0.8, no_final_answer_rate=0.6,
                        **BOXED_MISS)
    ps = propose(repo, loud)
    # strengths: dynamic-sampling 0.8, truncation 0.73, format-shaping 0.2, boxed-answers 0.125;
    # truncation also edits harness.yaml, so it waits: two such branches would conflict on merge
    assert [p.branch for p in ps] == ["iv/r1-dynamic-sampling", "iv/r1-format-shaping"]
    assert sorted(iv.branch for iv in repo.interventions()) == sorted(p.branch for p in ps)
    log = transcript(repo, 1)
    assert log["truncation"]["fired"] and "deferred: harness.yaml" in log["truncation"]["reason"]
    assert log["boxed-answers"]["fired"] and "outranked" in log["boxed-answers"]["reason"]
    assert not log["curriculum-step"]["fired"] and "branch" not in log["truncation"]
    # both winners merge one after the other without conflict
    repo.merge("iv/r1-dynamic-sampling", {"Backtest": "test"}, "Merge dynamic sampling")
    repo.merge("iv/r1-format-shaping", {"Backtest": "test"}, "Merge format shaping")
    assert repo.config("main").grpo.dynamic_sampling is True

    tried = [{"branch": "iv/r0-truncation", "status": "rejected",
              "trailers": {"Recipe-Change": ["truncation:max_completion_length=72,mask_truncated=true"]}}]
    ps = propose(repo, quiet_digest(2, truncation_rate=0.8), history=tried)
    assert ps == [] and "already tried" in transcript(repo, 2)["truncation"]["reason"]
    other = [{"branch": "iv/r0-truncation", "status": "rejected",
              "trailers": {"Recipe-Change": ["truncation:max_completion_length=60,mask_truncated=true"]}}]
    assert [p.branch for p in propose(repo, quiet_digest(3, truncation_rate=0.8), history=other)] == \
        ["iv/r3-truncation"]


def test_no_signal_no_proposal(repo: HarnessRepo) -> None:
    main = repo.head("main")
    assert propose(repo, quiet_digest()) == []
    empty = quiet_digest(2, **{k: None for k in ("miss_rate", "zero_variance_share", "truncation_rate",
                                                  "no_final_answer_rate", "verified_mean")}, per_task={})
    assert propose(repo, empty) == []
    assert repo.interventions() == [] and repo.head("main") == main
    assert not any(entry["fired"] for entry in transcript(repo, 1).values())
    assert len(transcript(repo, 2)) == 6
    HarnessConfig.model_validate(yaml.safe_load(repo.read_file("main", "harness.yaml")))
