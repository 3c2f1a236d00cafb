"""A dead slice judged on enough groups (issue 44, k2): the earlier rounds of main's lineage pooled with this one
while main's task mix and generation knobs are unchanged, and, where the archive still holds too few groups, a
census of fresh groups the current policy generates.  No model or Docker in this file (the census runs in
``test_k2_census.py``)."""

from __future__ import annotations

from test_k38_slice import LEGS, SEED_LIVE, SEED_TASKS, dead, rows_of

from domains.math import MathDomain
from meta_agent.digest import build_digest
from meta_agent.main_checks import add_main_findings

KNOBS = {"temperature": 1.0, "max_completion_length": 256}
SMALL = [SEED_LIVE[:2] + SEED_LIVE[4:6] + [("leg_counting", g, 0) for g in range(2)] for _ in range(3)]
"""Three small rounds of 12j's mix: two groups of each seed kind (3 of 4 alive) and two dead leg_counting groups."""


def rounds_rows() -> list[list[dict]]:
    return [[dict(r, run_id="run", round=n) for r in rows_of(spec)] for n, spec in enumerate(SMALL)]


def judge(current: list[dict], slice_rows: list[dict] | None) -> dict:
    digest = build_digest(2, current, metrics=[], findings=[], eval={}, previous=[])
    given = {} if slice_rows is None else {"slice_rows": slice_rows}
    add_main_findings(digest, current, (0.0, 1.0), train_tasks=[*SEED_TASKS, LEGS],
                      exam_specs=MathDomain().eval_specs, **given)
    return digest


def test_a_kind_dead_over_three_small_rounds_of_one_mix_is_named_on_the_pooled_rows() -> None:
    rows = rounds_rows()
    pooled = [dict(r, group_id=f"r{r['round']}/{r['group_id']}") for rs in rows for r in rs]
    assert judge(rows[2], None)["main_checks"]["dead_slice"]["passed"]  # this round alone: too thin
    [m] = dead(judge(rows[2], pooled))
    assert m["evidence"]["kinds"]["leg_counting"]["groups"] == 6, m["evidence"]["kinds"]


def census_rows(kind: str, right: list[int]) -> list[dict]:
    return [dict(r, split="census", group_id=f"census/{r['group_id']}") for r in
            rows_of([(kind, 20 + g, k) for g, k in enumerate(right)])]


def test_census_groups_decide_a_round_too_small_to() -> None:
    current = rows_of([("chain_sum", 0, 1), ("leg_counting", 0, 0)])  # the bench's round 0: one group of each
    more = census_rows("chain_sum", [1, 2, 3, 0, 2, 1]) + census_rows("leg_counting", [0] * 6)
    [m] = dead(judge(current, current + more))
    assert m["evidence"]["kinds"]["leg_counting"]["groups"] == 7, m["evidence"]["kinds"]


def test_a_never_solved_kind_beside_kinds_always_solved_is_named() -> None:
    rows = rows_of([("chain_sum", g, 4) for g in range(6)] + [("leg_counting", g, 0) for g in range(6)])
    [m] = dead(judge(rows, None))
    assert m["evidence"]["kinds"]["chain_sum"]["dead"] is False, m["evidence"]["kinds"]


def test_the_lineage_pools_rounds_of_main_s_mix_and_stops_at_an_edit_to_it() -> None:
    from meta_agent.slice_census import lineage_rows
    rows = rounds_rows()
    now = {"tasks": [*SEED_TASKS, LEGS], "grpo": KNOBS}
    hotter = {"tasks": now["tasks"], "grpo": dict(KNOBS, temperature=1.4)}
    pooled, rounds = lineage_rows(rows[2], [(1, now, rows[1]), (0, now, rows[0])], now)
    assert rounds == [1, 0] and len(pooled) == 3 * len(rows[2]), rounds
    assert {r["group_id"] for r in pooled} >= {"r0/leg_counting-g0", "r1/leg_counting-g0", "leg_counting-g0"}
    [m] = dead(judge(rows[2], pooled))
    assert m["evidence"]["kinds"]["leg_counting"]["groups"] == 6, m["evidence"]["kinds"]
    # round 1 generated at another temperature: it and everything before it stay out, and six groups become two
    cut, rounds = lineage_rows(rows[2], [(1, hotter, rows[1]), (0, now, rows[0])], now)
    assert rounds == [] and cut == rows[2] and dead(judge(rows[2], cut)) == []
    mix = {"tasks": [*SEED_TASKS, dict(LEGS, weight=1.0)], "grpo": KNOBS}
    assert lineage_rows(rows[2], [(1, now, rows[1]), (0, mix, rows[0])], now)[1] == [1]


def test_the_census_is_sized_from_the_fisher_bound_and_capped() -> None:
    from meta_agent.slice_census import MAX_GROUPS, census_size
    from meta_agent.slice_checks import slice_figures
    tasks = [*SEED_TASKS, LEGS]
    small = rows_of([("chain_sum", 0, 0), ("leg_counting", 0, 0)])  # the bench's round 0
    figures, level = slice_figures(small, tasks, MathDomain().eval_specs)
    # nothing live: the others assumed live in half their groups; 1+m dead beside 1+m with round((1+m)/2) live,
    # m=8: C(9,4)/C(18,4)=0.041, m=9: C(10,5)/C(20,5)=0.016 < 0.05/2
    assert figures["leg_counting"]["thin"] and census_size(figures, level) == 9 < MAX_GROUPS // 2, figures
    live = rows_of([("chain_sum", g, r) for g, r in enumerate([1, 2, 3])] + [("leg_counting", 0, 0)])  # 3 of 3
    figures, level = slice_figures(live, tasks, MathDomain().eval_specs)
    m = census_size(figures, level)  # 1+m leg groups beside 3+m live: m=1 0.067, m=2 1/C(8,5)=0.018 < 0.05/2
    assert m == 2, (m, figures)
    seed = rows_of(SEED_LIVE)  # nothing thin: no census
    assert census_size(*slice_figures(seed, SEED_TASKS, MathDomain().eval_specs)) == 0
    flat = rows_of([("chain_sum", 0, 0), ("products", 0, 0)])  # the seed's round 0 at the small size, all flat:
    figures, level = slice_figures(flat, SEED_TASKS, MathDomain().eval_specs)  # thin, but the seed's own kinds
    assert figures["chain_sum"]["thin"] and census_size(figures, level) == 0, figures


def test_kinds_dead_together_one_off_the_exam_are_named_as_a_set_and_the_seed_s_are_not() -> None:
    """As the census measured the base policy on 12j's mix (seed 0): chain_sum and leg_counting 0 of 10 groups
    right, products 6 of 9 with signal.  Alone each is diluted by the other (chance 0.057 > 0.05/3); together
    C(9,6)/C(29,6) = 0.0002 < 0.05/4.  The seed's mix, chain_sum dead beside products in four groups each, names
    nothing: no kind is off the exam, so no set is tested (and ``census_size`` draws no census for it)."""
    current = rows_of([("chain_sum", 0, 0), ("leg_counting", 0, 0)])
    products = [2, 1, 0, 3, 1, 0, 2, 4, 1]
    more = census_rows("chain_sum", [0] * 9) + census_rows("leg_counting", [0] * 9) + census_rows("products", products)
    [m] = dead(judge(current, current + more))
    kinds = m["evidence"]["kinds"]
    assert [k for k, f in kinds.items() if f["dead"]] == ["chain_sum", "leg_counting"], kinds
    assert kinds["leg_counting"]["chance"] > 0.05 / 3 > kinds["leg_counting"]["set_chance"], kinds
    seed = rows_of([("chain_sum", 0, 0), ("products", 0, 1)]) + census_rows("chain_sum", [0] * 3) + \
        census_rows("products", products[:3])
    digest = build_digest(0, seed, metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, seed, (0.0, 1.0), train_tasks=SEED_TASKS, exam_specs=MathDomain().eval_specs,
                      slice_rows=seed)
    assert dead(digest) == [] and "set_chance" not in str(digest["main_checks"]["dead_slice"]), digest["main_checks"]
