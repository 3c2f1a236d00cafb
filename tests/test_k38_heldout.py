"""Held-out attacks on ``main:dead_slice`` and ``slice-mix``, written after both froze (560de6f): cases the check
and the recipe were not designed for.  Wins stay as strict xfails, each with its reason (x1 fixed the hard entry
and partial credit: those pass now).  No model, no Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_k38_slice import (LEGS, LIVE_EIGHT, QUESTION, SEED_LIVE, SEED_TASKS, dead, judged, mixes_proposed, rows_of,
                            shares)

from domains.math import MathDomain
from meta_agent.digest import build_digest
from meta_agent.main_checks import add_main_findings


def test_a_dead_exam_kind_beside_a_live_off_exam_kind_cuts_neither(tmp_path: Path) -> None:
    hard = {"name": "chain_sum", "weight": 1.0, "config": {"min_terms": 5, "max_terms": 6, "min_digits": 4,
                                                          "max_digits": 5}}
    tasks = [hard, SEED_TASKS[1], LEGS]
    groups = [("chain_sum", g, 0) for g in range(8)] + [("products", g, r) for g, r in enumerate(LIVE_EIGHT)] + \
        [("leg_counting", g, r) for g, r in enumerate(LIVE_EIGHT)]
    digest = judged(groups, tasks)
    [m] = dead(digest)
    assert [k for k, v in m["evidence"]["kinds"].items() if v["dead"]] == ["chain_sum"], m
    proposed = mixes_proposed(digest, tasks, tmp_path)
    assert [shares(t) for t in proposed] == [shares(tasks)], proposed  # curriculum-step only: difficulty, no weight


def test_a_kind_split_over_two_entries_is_cut_in_both() -> None:
    tasks = [*SEED_TASKS, dict(LEGS, weight=1.0), dict(LEGS, weight=1.0, config={"max_animals": 5})]
    from meta_agent.agents.recipe_slice import slice_weights
    [m] = dead(judged(SEED_LIVE + [("leg_counting", g, 0) for g in range(8)], tasks))
    assert slice_weights(m["evidence"], {"leg_counting": 2.0}) == {"leg_counting": 0.1778}, m["evidence"]["live"]


def test_a_hard_entry_of_a_kind_beside_an_easy_one_is_told_apart() -> None:
    """Was a strict xfail (rows of this test carried no config, so the entries pooled); archive rows carry the
    config their task was drawn with (``task``'s ``vars``), as these now do, and the check judges each entry of a
    name drawn under two configs apart (x1)."""
    hard = {"name": "products", "weight": 1.0, "config": {"min_terms": 4, "max_terms": 5, "min_digits": 3,
                                                         "max_digits": 4}}
    tasks = [*SEED_TASKS, hard]
    rows = rows_of(SEED_LIVE + [("products", 10 + g, 0) for g in range(8)])
    for r in (r for r in rows if r["data_source"].endswith("/products")):
        config = hard["config"] if int(r["group_id"].rsplit("-g", 1)[1]) >= 10 else SEED_TASKS[1]["config"]
        r["task"] = json.dumps({"question": r["prompt"], "vars": {"name": "products", "config": config}})
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, rows, (0.0, 1.0), train_tasks=tasks, exam_specs=MathDomain().eval_specs)
    [m] = dead(digest)
    assert [k for k, f in m["evidence"]["kinds"].items() if f["dead"]] == ["products@2"], m["evidence"]["kinds"]
    assert m["rate"] == pytest.approx(1 / 3, abs=1e-4), m  # the hard entry's weight, 1 of 3


def test_a_kind_dead_over_three_small_rounds_is_named() -> None:
    """Was a strict xfail (the check read this round only); the digest phase now pools the lineage's earlier rounds
    under main's mix (``slice_census.lineage_rows``, k2)."""
    from meta_agent.slice_census import lineage_rows
    rounds = [SEED_LIVE[:2] + SEED_LIVE[4:6] + [("leg_counting", 10 * n + g, 0) for g in range(2)] for n in range(3)]
    per_round = [rows_of(spec) for spec in rounds]
    main_yaml = {"tasks": [*SEED_TASKS, LEGS], "grpo": {"temperature": 0.7}}
    pooled, _ = lineage_rows(per_round[2], [(1, main_yaml, per_round[1]), (0, main_yaml, per_round[0])], main_yaml)
    digest = build_digest(2, per_round[2], metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, per_round[2], (0.0, 1.0), train_tasks=[*SEED_TASKS, LEGS],
                      exam_specs=MathDomain().eval_specs, slice_rows=pooled)
    assert dead(digest) != []


def test_partial_credit_does_not_hide_a_kind_never_solved() -> None:
    rows = rows_of(SEED_LIVE + [("leg_counting", g, 0) for g in range(8)])
    for r in rows:
        if r["data_source"].endswith("leg_counting") and r["traj_id"].endswith(("-0", "-1")):
            r["reward"] = 0.2  # formatted, wrong
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, rows, (0.0, 1.0), train_tasks=[*SEED_TASKS, LEGS], exam_specs=MathDomain().eval_specs)
    assert [m["evidence"]["kinds"]["leg_counting"]["dead"] for m in dead(digest)] == [True], json.dumps(
        digest["main_checks"]["dead_slice"])


def test_four_kinds_one_dead_is_named_within_the_split_alpha() -> None:
    tasks = [*SEED_TASKS, {"name": "gcd", "weight": 1.0, "config": {}}, LEGS]
    groups = [(k, g, r) for k in ("chain_sum", "products", "gcd") for g, r in enumerate(LIVE_EIGHT)] + \
        [("leg_counting", g, 0) for g in range(8)]
    QUESTION.setdefault("gcd", "What is the gcd of {g} and 12?")  # rows_of's question for the fourth kind
    [m] = dead(judged(groups, tasks))
    assert m["evidence"]["alpha"] == pytest.approx(0.05 / 4) and m["rate"] == 0.4, m["evidence"]  # weight 2 of 5
