"""Held-out attacks on the pooled dead-slice judgement (k2), written after the code froze (adfb000): cases the pool,
the set test and the census were not designed for.  Wins stay as strict xfails, each with its reason (x1 fixed the
set test and the template pool: those pass now).  No model."""

from __future__ import annotations

from test_k2_slice_pool import KNOBS, judge
from test_k38_slice import LEGS, SEED_LIVE, SEED_TASKS, dead, rows_of

from meta_agent.slice_census import lineage_rows

NOW = {"tasks": [*SEED_TASKS, LEGS], "grpo": KNOBS}


def _rounds(legs: list[list[int]]) -> list[list[dict]]:
    return [[dict(r, run_id="run", round=n) for r in rows_of(SEED_LIVE[:2] + SEED_LIVE[4:6] +
                                                           [("leg_counting", 10 * n + g, k) for g, k in enumerate(ls)])]
            for n, ls in enumerate(legs)]


def test_a_kind_the_policy_learned_this_round_is_not_named_on_its_dead_past() -> None:
    rows = _rounds([[0, 0], [0, 0], [0, 0], [0, 0], [2, 0]])  # four dead rounds, then a group with signal
    history = [(n, NOW, rows[n]) for n in (3, 2, 1, 0)]
    pooled, rounds = lineage_rows(rows[4], history, NOW)
    assert rounds == [3, 2, 1, 0] and dead(judge(rows[4], pooled)) == [], judge(rows[4], pooled)["main_checks"]


def test_two_dead_kinds_off_the_exam_beside_live_ones_are_named_together() -> None:
    tasks = [*SEED_TASKS, LEGS, {"name": "gcd", "weight": 1.0, "config": {}}]
    from test_k38_slice import QUESTION
    QUESTION.setdefault("gcd", "What is the gcd of {g} and 12?")
    rows = rows_of(SEED_LIVE + [("leg_counting", g, 0) for g in range(4)] + [("gcd", g, 0) for g in range(4)])
    from domains.math import MathDomain
    from meta_agent.digest import build_digest
    from meta_agent.main_checks import add_main_findings
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, rows, (0.0, 1.0), train_tasks=tasks, exam_specs=MathDomain().eval_specs)
    [m] = dead(digest)
    assert sorted(k for k, f in m["evidence"]["kinds"].items() if f["dead"]) == ["gcd", "leg_counting"], m


def test_rounds_before_a_template_edit_are_not_pooled() -> None:
    rows = _rounds([[0, 0], [0, 0], [0]])
    before_edit = dict(NOW, templates="prompts/user.j2 at an older commit")  # what history would need to carry
    pooled, _ = lineage_rows(rows[2], [(1, before_edit, rows[1]), (0, before_edit, rows[0])], NOW)
    assert dead(judge(rows[2], pooled)) == []
