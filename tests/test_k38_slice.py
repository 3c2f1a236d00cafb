"""A slice of the training mix that returns no learning signal: named from the round's groups, its weight or its
difficulty moved by what the groups measured.

Held-out set 12j's off-exam-task (in-sample from now): the mix adds leg_counting at weight 2 (reasoning-gym's
default difficulty); the base policy, 8 of its tasks x 4, got 0 of 32 right and 0 of 8 groups with signal, while the
seed's kinds returned signal in about 5 of 8 groups.  Variants of our own: an exam kind trained at a difficulty the
policy never solves (its difficulty falls, its weight stays); an off-exam kind the policy does solve (left alone); a
dead kind with only two groups in the round (too thin to act on); the seed's round (names nothing).  Real git for
the recipe; no model here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.agents.recipe_evidence import from_rows
from meta_agent.agents.recipe_types import Change, HarnessFiles
from meta_agent.agents.recipes import REMEDIES, RULES
from meta_agent.digest import build_digest
from meta_agent.main_checks import add_main_findings

SEED_TASKS = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())["tasks"]
LEGS = {"name": "leg_counting", "weight": 2.0, "config": {}}
QUESTION = {"chain_sum": "What is {g} + 2?", "products": "What is {g} * 3?",
            "leg_counting": "How many legs are there in total if you have {g} ducks, 3 cows, 5 spiders?"}


def rows_of(groups: list[tuple[str, int, int]], size: int = 4) -> list[dict]:
    """Training rows, one group per (kind, index, right answers); a right answer is paid and verified."""
    rows = []
    for kind, g, right in groups:
        for i in range(size):
            ok = float(i < right)
            rows.append({"traj_id": f"{kind}-{g}-{i}", "split": "train", "group_id": f"{kind}-g{g}", "step": 0,
                         "reward": ok, "verified": ok, "response_tokens": 12, "truncated": False, "kept": True,
                         "response": f"Answer: {g + 2 if ok else -1 - i}", "prompt": QUESTION[kind].format(g=g),
                         "verifier_info": json.dumps({"reason": "correct" if ok else "wrong answer"}),
                         "ground_truth": json.dumps({"answer": str(g + 2)}), "data_source": f"reasoning_gym/{kind}"})
    return rows


def judged(groups: list[tuple[str, int, int]], tasks: list[dict]) -> dict:
    rows = rows_of(groups)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    digest["domain"] = "math"
    digest["evidence"] = from_rows(rows)
    add_main_findings(digest, rows, (0.0, 1.0), train_tasks=tasks, exam_specs=MathDomain().eval_specs)
    return digest


def planted(tmp_path: Path, tasks: list[dict]) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"] = tasks
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "plant")
    return repo


def mixes_proposed(digest: dict, tasks: list[dict], tmp_path: Path) -> list[list[dict]]:
    """The task lists of every rule's change to main's tasks."""
    files = HarnessFiles.read(planted(tmp_path, tasks))
    out = []
    for rule in RULES:
        change = rule(digest, files)
        if isinstance(change, Change) and "harness.yaml" in change.files:
            new = yaml.safe_load(change.files["harness.yaml"])["tasks"]
            if new != tasks:
                out.append(new)
    return out


def shares(tasks: list[dict]) -> dict[str, float]:
    total = sum(float(t.get("weight", 1.0)) for t in tasks)
    return {str(t["name"]): float(t.get("weight", 1.0)) / total for t in tasks}


def dead(digest: dict) -> list[dict]:
    return [m for m in digest["failure_modes"] if m["name"] == "main:dead_slice"]


SEED_LIVE = [("chain_sum", g, r) for g, r in enumerate([1, 2, 0, 3])] + \
    [("products", g, r) for g, r in enumerate([2, 0, 1, 4])]
"""The seed's kinds as the base policy answers them: 5 of 8 groups with signal (the seed's note at 0.7)."""
LIVE_EIGHT = [1, 2, 0, 3, 2, 0, 1, 4]
"""One kind's eight groups, 5 with signal."""
TWELVE_J = SEED_LIVE + [("leg_counting", g, 0) for g in range(8)]


def test_12j_off_exam_kind_that_returns_no_signal_is_cut_through_the_recipe_agent(tmp_path: Path) -> None:
    tasks = [*SEED_TASKS, LEGS]
    digest = judged(TWELVE_J, tasks)
    repo = planted(tmp_path, tasks)
    ctx = AgentContext(round=1, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r1", max_candidates=4)
    mixes = [yaml.safe_load(repo.read_file(p.branch, "harness.yaml"))["tasks"] for p in RecipeAgent().propose(ctx)
             if "harness.yaml" in p.files_changed]
    cut = [shares(m) for m in mixes if shares(m).get("leg_counting", 0.0) < shares(tasks)["leg_counting"]]
    assert len(cut) == 1, mixes
    # the bench's repair: at most a quarter off the exam, each exam kind at least a quarter
    assert cut[0]["leg_counting"] <= 0.25 and min(cut[0]["chain_sum"], cut[0]["products"]) >= 0.25, cut


HARD_CHAIN = {"name": "chain_sum", "weight": 1.0,
              "config": {"min_terms": 4, "max_terms": 6, "min_digits": 3, "max_digits": 4}}


def test_an_exam_kind_at_a_difficulty_never_solved_is_named_and_made_easier_not_cut(tmp_path: Path) -> None:
    tasks = [HARD_CHAIN, SEED_TASKS[1]]
    groups = [("chain_sum", g, 0) for g in range(8)] + [("products", g, r) for g, r in enumerate(LIVE_EIGHT)]
    digest = judged(groups, tasks)
    [m] = dead(digest)
    assert list(m["evidence"]["kinds"]) == ["chain_sum", "products"], m
    assert m["evidence"]["kinds"]["chain_sum"]["on_exam"] and m["rate"] == 0.5, m
    [new] = mixes_proposed(digest, tasks, tmp_path)
    assert shares(new) == shares(tasks), new  # the exam weighs it: its weight stays
    config, before = {t["name"]: t.get("config") for t in new}["chain_sum"], HARD_CHAIN["config"]
    assert config["max_terms"] < before["max_terms"] and config["max_digits"] < before["max_digits"], config
    assert all(config[k] <= config[k.replace("min", "max")] for k in ("min_terms", "min_digits")), config
    remedies = REMEDIES.get("main:dead_slice", ())
    assert "curriculum-step" in remedies and "slice-mix" in remedies, remedies


def test_an_off_exam_kind_the_policy_solves_is_not_named_nor_cut(tmp_path: Path) -> None:
    tasks = [*SEED_TASKS, LEGS]
    groups = SEED_LIVE + [("leg_counting", g, r) for g, r in enumerate([1, 0, 2, 0, 0, 3, 0, 0])]
    digest = judged(groups, tasks)
    assert dead(digest) == [] and digest["main_checks"]["dead_slice"]["passed"], digest["main_checks"]["dead_slice"]
    assert [shares(m)["leg_counting"] for m in mixes_proposed(digest, tasks, tmp_path)] == [], digest["failure_modes"]


@pytest.mark.parametrize("n", [1, 2])
def test_a_dead_kind_with_one_or_two_groups_is_too_thin_to_name(n: int) -> None:
    """The bench's small size (2 prompts a round) draws one leg_counting group at most: no chance below alpha."""
    digest = judged(SEED_LIVE + [("leg_counting", g, 0) for g in range(n)], [*SEED_TASKS, LEGS])
    assert dead(digest) == [], dead(digest)
    assert "chance" in digest["main_checks"]["dead_slice"]["detail"], digest["main_checks"]["dead_slice"]


def test_the_seed_round_and_a_round_flat_everywhere_name_nothing() -> None:
    """The seed's mix as the base policy answers it (12 groups, as 4 prompts x 3 steps) and a round no kind solves
    (nothing returns signal to compare with: that is the round's, not a slice's)."""
    seed = [("chain_sum", g, r) for g, r in enumerate([1, 0, 2, 4, 1, 0])] + \
        [("products", g, r) for g, r in enumerate([0, 0, 1, 3, 0, 2])]
    flat = [("chain_sum", g, 0) for g in range(8)] + [("leg_counting", g, 0) for g in range(8)]
    for groups, tasks in ((seed, SEED_TASKS), (flat, [SEED_TASKS[0], LEGS])):
        digest = judged(groups, tasks)
        assert dead(digest) == [] and digest["main_checks"]["dead_slice"]["passed"], digest["main_checks"]


def test_the_finding_carries_rates_intervals_and_examples_and_the_branch_evidence_is_exact(tmp_path: Path) -> None:
    from dataclasses import replace

    from meta_agent.agents.recipe_slice import slice_evidence, slice_mix
    tasks = [*SEED_TASKS, LEGS]
    digest = judged(TWELVE_J, tasks)
    [m] = dead(digest)
    legs = m["evidence"]["kinds"]["leg_counting"]
    assert (legs["groups"], legs["signal"], legs["solve_rate"], legs["on_exam"]) == (8, 0, 0.0, False), legs
    assert legs["signal_interval"][0] == 0.0 and 0.3 < legs["signal_interval"][1] < 0.35, legs  # Wilson, 0 of 8
    # an off-exam kind is held against the others' live groups: 5 with signal and 1 solved in every member (x1)
    assert legs["chance"] == pytest.approx(28 / 8008, abs=1e-6) and m["rate"] == 0.5, legs  # C(8,6)/C(16,6)
    assert [e["group_id"] for e in m["examples"]] == ["leg_counting-g0", "leg_counting-g1", "leg_counting-g2"]
    assert "ducks" in m["examples"][0]["prompt"], m["examples"]
    change = slice_mix(digest, HarnessFiles.read(planted(tmp_path, tasks)))
    assert isinstance(change, Change) and slice_evidence(digest, change) == "", change
    config = yaml.safe_load(change.files["harness.yaml"])
    config["tasks"][-1]["weight"] = 3.0  # a branch that trains the dead kind more
    assert "trains the dead kinds" in slice_evidence(digest, replace(change, files={"harness.yaml":
                                                                                    yaml.safe_dump(config)}))


@pytest.mark.docker
def test_gate_merges_slice_mix_on_probation(docker_sandbox, tmp_path: Path) -> None:
    """12j's mix on a seed harness, its round named dead for leg_counting: the lighter weight renders, fits and is
    judged by the real gate over the world's archive; it merges on probation (only a trained round shows it)."""
    from test_recipe_agent import SETTINGS, World, gate_view, propose

    from meta_agent.agents.recipe_slice import slice_mix
    from meta_agent.backtest import backtest_branch
    world = World(tmp_path / "world")
    tasks = [*SEED_TASKS, LEGS]
    repo = planted(tmp_path, tasks)
    [mode] = dead(judged(TWELVE_J, tasks))
    digest = dict(world.digests["unanswered"], failure_modes=[mode])
    [p] = propose(repo, digest, rules=(slice_mix,))
    assert p.branch.endswith("-slice-mix") and [t.weight for t in repo.config(p.branch).tasks] == [1.0, 1.0, 0.1778]
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, tmp_path / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert set(gate_view(outcome)[1].values()) == {"live"}, gate_view(outcome)
