"""Knob and budget recipes take their target from the archive's evidence and move either way; none aims at the
seed's value.  Each case is a harness on the far side of the seed, or a seed value wrong for the evidence: a
recipe that moves a knob back to the seed's value repairs none of them.  The evidence (``digest["evidence"]``)
is what ``meta_agent.agents.recipe_evidence`` gathers from a real archive (the last test)."""

from __future__ import annotations

from pathlib import Path

import yaml

import harness_repo
from meta_agent.agents.recipes import RULES, Change, HarnessFiles

SEED = Path(harness_repo.__file__).parent / "seeds" / "math"


def _math(tasks: list | None = None, **grpo: float) -> HarnessFiles:
    config = yaml.safe_load((SEED / "harness.yaml").read_text())
    config["grpo"].update(grpo)
    if tasks is not None:
        config["tasks"] = tasks
    return HarnessFiles(yaml.safe_dump(config, sort_keys=False), (SEED / "reward.py").read_text(),
                        (SEED / "prompts" / "user.j2").read_text())


def _evidence(answer_tokens: list[int] | None = None, identical: float = 0.0, solve: dict | None = None) -> dict:
    return {"answer_tokens": answer_tokens or [], "finished_tokens": answer_tokens or [], "identical_share": identical,
            "groups": 8, "solve": solve or {}, "verified_rate": 0.25}


def _mode(name: str, rate: float) -> dict:
    return {"name": name, "source": "trusted", "severity": "warning", "rate": rate, "message": "", "examples": []}


def _fired(digest: dict, files: HarnessFiles, rule: str) -> Change:
    changes = [c for r in RULES if isinstance(c := r(digest, files), Change) and c.rule == rule]
    assert changes, [r(digest, files) for r in RULES]
    return changes[0]


def _grpo(change: Change) -> dict:
    return yaml.safe_load(change.files["harness.yaml"])["grpo"]


def test_a_budget_grows_to_what_the_verified_answers_need_not_to_the_seeds() -> None:
    """Cut at 8 tokens: right answers of ~20 tokens ask for about 25; of ~60 tokens, about 75.  The old recipe
    gave 32 (the seed's) to both."""
    digest = {"truncation_rate": 0.9, "failure_modes": [_mode("truncation", 0.9)]}
    short = _grpo(_fired(digest | {"evidence": _evidence([18, 20, 21, 19, 22])}, _math(max_completion_length=8),
                         "truncation"))["max_completion_length"]
    long = _grpo(_fired(digest | {"evidence": _evidence([55, 60, 58, 61, 62])}, _math(max_completion_length=8),
                        "truncation"))["max_completion_length"]
    assert 24 <= short < 40 and long >= 62 and long != 32


def test_a_budget_far_above_what_answers_need_shrinks_when_responses_ramble() -> None:
    digest = {"truncation_rate": 0.05, "no_final_answer_rate": 0.8, "mean_response_tokens": 300,
              "failure_modes": [_mode("no_final_answer", 0.8)], "evidence": _evidence([18, 20, 21, 19, 22])}
    new = _grpo(_fired(digest, _math(max_completion_length=512), "truncation"))["max_completion_length"]
    assert 22 <= new <= 64


def test_identical_group_members_warm_a_sampler_colder_than_the_seed() -> None:
    """temperature 0.05: every group's members are the same answer.  The old recipes only cooled, and only
    from above the seed's."""
    digest = {"zero_variance_share": 1.0, "failure_modes": [_mode("zero_variance_groups", 1.0)],
              "evidence": _evidence([20], identical=0.9)}
    change = _fired(digest, _math(temperature=0.05), "warm-sampling")
    assert 0.5 <= _grpo(change)["temperature"] <= 1.0 and change.root_cause
    quiet = {**digest, "evidence": _evidence([20], identical=0.1)}
    assert not any(isinstance(c := r(quiet, _math(temperature=0.05)), Change) and c.rule == "warm-sampling"
                   for r in RULES)


def test_a_hot_sampler_cools_by_how_much_it_rambles_even_at_the_seeds_temperature() -> None:
    """The seed's own 0.7 can be wrong for a task mix: the old recipe refused to go below the seed's."""
    digest = {"no_final_answer_rate": 0.9, "failure_modes": [_mode("no_final_answer", 0.9)],
              "evidence": _evidence([20], identical=0.0)}
    at_seed = _grpo(_fired(digest, _math(), "cool-sampling"))["temperature"]
    hot = _grpo(_fired(digest, _math(temperature=1.3), "cool-sampling"))["temperature"]
    milder = _grpo(_fired(digest | {"no_final_answer_rate": 0.6}, _math(temperature=1.3), "cool-sampling"))
    assert at_seed < 0.7 and hot <= 0.8 and milder["temperature"] > hot


def test_tasks_nobody_solves_get_easier() -> None:
    """curriculum-step only made solved tasks harder; an unsolved mix had no recipe."""
    hard = [{"name": "chain_sum", "weight": 1.0, "config": {"min_terms": 4, "max_terms": 5, "min_digits": 3,
                                                             "max_digits": 4}},
            {"name": "products", "weight": 1.0, "config": {"min_terms": 3, "max_terms": 3, "min_digits": 2,
                                                            "max_digits": 3}}]
    solve = {"reasoning_gym/chain_sum": [0, 8], "reasoning_gym/products": [0, 8]}
    digest = {"zero_variance_share": 1.0, "verified_zero_variance_share": 1.0, "verified_mean": 0.0,
              "failure_modes": [_mode("zero_variance_groups", 1.0)],
              "per_task": {s: {"count": n, "accuracy": 0.0} for s, (_, n) in solve.items()},
              "evidence": _evidence([], solve=solve)}
    change = _fired(digest, _math(tasks=hard), "curriculum-step")
    tasks = {t["name"]: t["config"] for t in yaml.safe_load(change.files["harness.yaml"])["tasks"]}
    assert tasks["chain_sum"]["max_digits"] <= 2 and tasks["products"]["max_digits"] <= 2
    assert all(c["min_digits"] <= c["max_digits"] and c["min_terms"] <= c["max_terms"] for c in tasks.values())


def test_a_learning_rate_falls_by_how_much_the_exam_fell_not_to_the_seeds() -> None:
    fell = {"name": "heldout_regression", "source": "trusted", "severity": "warning", "rate": 0.2,
            "message": "held-out fell 0.300 -> 0.100"}
    small = {"failure_modes": [dict(fell, rate=0.05)], "heldout": {"vs_previous": {"previous": 0.3, "now": 0.25}},
             "heldout_accuracy": 0.25, "trends": {"heldout_accuracy": {"previous": 0.3, "delta": -0.05}}}
    big = {"failure_modes": [fell], "heldout": {"vs_previous": {"previous": 0.3, "now": 0.1}},
           "heldout_accuracy": 0.1, "trends": {"heldout_accuracy": {"previous": 0.3, "delta": -0.2}}}
    lr_small = _grpo(_fired(small, _math(learning_rate=2e-4), "lower-learning-rate"))["learning_rate"]
    lr_big = _grpo(_fired(big, _math(learning_rate=2e-4), "lower-learning-rate"))["learning_rate"]
    assert lr_big < lr_small < 2e-4 and lr_big != 2e-5


def test_the_evidence_comes_from_a_real_archive_of_training_and_exam_rows(tmp_path: Path) -> None:
    """Lengths of accepted answers from training and the exam (not truncated, a final line read), identical
    members per training group, solve counts of training only; a second round's rows stay out."""
    import json

    from meta_agent.agents.recipe_evidence import gather, needed_budget
    from rl_backend.archive import Archive
    from trajectory.rows import trajectory_row

    def row(i: int, group: str, response: str, verified: float, tokens: int, split: str = "train",
            truncated: bool = False, reason: str = "ok", rnd: int = 0) -> dict:
        return trajectory_row(traj_id=f"t{rnd}-{i}", run_id="r", round=rnd, step=0, group_id=group, sample_idx=i,
                              domain="math", task_id=f"task{group}", data_source=f"reasoning_gym/{group[:5]}",
                              split=split, prompt="q", response=response, messages=[], ground_truth={"answer": "7"},
                              verified=verified, verifier_info=json.dumps({"reason": reason}),
                              response_tokens=tokens, truncated=truncated, finish_reason="stop")

    rows = [row(0, "sameA", "Answer: 7", 1.0, 10), row(1, "sameA", "Answer:  7", 1.0, 10),  # whitespace only
            row(2, "mixdB", "Answer: 7", 1.0, 30), row(3, "mixdB", "I wonder", 0.0, 8, truncated=True),
            row(4, "exam0", "3 + 4 = 7\nAnswer: 7", 1.0, 50, split="heldout"),
            row(5, "exam1", "hmm", 0.0, 20, split="heldout", reason="no final answer")]
    archive = Archive(tmp_path / "archive")
    archive.append_round("r", 0, rows)
    archive.append_round("r", 1, [row(9, "sameA", "Answer: 7", 0.0, 99, rnd=1)])
    ev = gather(archive, 0)
    assert ev["answer_tokens"] == [10, 10, 30, 50] and ev["finished_tokens"] == [10, 10, 30, 50]
    assert ev["identical_share"] == 0.25 and ev["groups"] == 2  # 1 of 4 members repeats another
    assert ev["solve"] == {"reasoning_gym/sameA": [2, 2], "reasoning_gym/mixdB": [1, 2]} and ev["verified_rate"] == 0.75
    assert needed_budget(ev) == (63, "90th percentile 50 tokens of 4 verified answers")
    assert gather(archive, 5) is None and gather(None, 0) is None


def test_responses_cut_past_a_budget_that_fits_the_answers_count_as_rambling() -> None:
    """hot-sampling's round 0: 88% cut at 32 tokens while finished answers take 20; the cut is rambling, not the
    budget: the sampler cools.  With answers that need more than the budget, the cut explains the missing lines."""
    digest = {"no_final_answer_rate": 1.0, "truncation_rate": 0.875, "failure_modes": [_mode("no_final_answer", 1.0)],
              "evidence": _evidence([12, 18, 20])}
    change = _fired(digest, _math(temperature=1.3), "cool-sampling")
    assert _grpo(change)["temperature"] == 0.5 and change.root_cause
    long = dict(digest, evidence=_evidence([50, 60, 70]))
    assert not any(isinstance(c := r(long, _math(temperature=1.3)), Change) and c.rule == "cool-sampling"
                   for r in RULES)
