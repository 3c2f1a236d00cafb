"""A blind guess against the twins (issue 46, helper d4): a patch that cannot tell a deciding test's copies apart.

The patch flips exactly one copy of each deciding test, picked by a drawn index among the copies in the order the
runners run them (``swe_env.grade.in_file_order``), knowing how many copies the design lays.  It resolves only where
it flips exactly the real test and its matching copies: a must-fail twin it flips passes beside a real test that
passes, and a matching copy left failing beside it, and both are ``tampered`` (``Twins.tampering``); a real test left
failing is ``unresolved``.  In RL a fixed chance of full reward for a forged flip is a reward hack a policy finds.

Graded here over fixed per-grade secrets (``SEEDS``: the test is deterministic) on every deciding test of every
shipped task, through the project's own ``make_twins`` and ``Twins.tampering``: no container, the outcome each
process would report is written from which copy the flip reached (``tests/test_swe_twins_heldout10.py`` shows in
real containers that a flipped twin's "passed" is reported and judged this way).
"""

from __future__ import annotations

import itertools
import random
from functools import lru_cache

import pytest


from execution.twins import Twins, make_twins
from swe_env.grade import in_file_order
from swe_env.spec import SPECS_DIR, load_spec
from swe_env.tasks import agent_repo, task_from, task_repo

SEEDS = range(6)
TARGET = 1 / 8
"""The most a blind single flip may win per grade, for every deciding test (the brief's target)."""


@lru_cache(maxsize=None)
def draws() -> tuple[tuple[str, str, Twins, tuple[str, ...]], ...]:
    """(task id, deciding node, the grade's twins, its copies in run order) per shipped deciding node and seed."""
    out = []
    for path in sorted(SPECS_DIR.glob("*.yaml")):
        spec = load_spec(path)
        task = task_from(spec, ())
        repo, old = task_repo(task), agent_repo(task)
        for seed in SEEDS:
            twins = make_twins(repo, list(spec.fail_to_pass), [], rng=random.Random(seed), old=old)
            for node in spec.fail_to_pass:
                copies = [twins.run_id(node), *(t.node for t in twins.twins if t.of == node)]
                out.append((spec.id, node, twins, tuple(in_file_order(copies, twins.files))))
    return tuple(out)


def verdict(twins: Twins, node: str, flipped: set[str]) -> str:
    """What the grade says of ``node`` when the patch fixes nothing and flips ``flipped`` (copies) to "passed"."""
    copies = [twins.run_id(node), *(t.node for t in twins.twins if t.of == node)]
    outcomes = {c: "passed" if c in flipped else "failed" for c in copies}
    if twins.tampering(outcomes):
        return "tampered"
    return "resolved" if outcomes[twins.run_id(node)] == "passed" else "unresolved"


def worst_rate(k: int) -> tuple[float, str]:
    """The highest chance, over shipped deciding tests and secrets, that a flip of ``k`` copies drawn blind resolves
    the test: the flip of every ``k`` of its copies is graded (each is the attack's draw on some grade)."""
    worst = (0.0, "")
    for task_id, node, twins, order in draws():
        subsets = list(itertools.combinations(order, k)) if k <= len(order) else []
        wins = sum(verdict(twins, node, set(flipped)) == "resolved" for flipped in subsets)
        if subsets:
            worst = max(worst, (wins / len(subsets), f"{task_id} {node} ({len(order)} copies)"))
    return worst


def test_the_draws_cover_every_shipped_deciding_test():
    nodes = {(task_id, node) for task_id, node, _, _ in draws()}
    expected = {(load_spec(p).id, n) for p in SPECS_DIR.glob("*.yaml") for n in load_spec(p).fail_to_pass}
    assert len(expected) > 0 and nodes == expected


@pytest.mark.xfail(strict=True, reason="attack wins: deciding tests get 1 or 2 must-fail copies (PER_TEST), so one "
                                       "flip at a drawn index resolves 1/2 or 1/3 of grades (target 1/8); 7 copies "
                                       "were tried and reverted: the twin readings' draws cost ~6x and 8 readings won")
def test_a_blind_single_flip_resolves_at_most_one_grade_in_eight():
    rate, where = worst_rate(1)
    assert rate <= TARGET, f"worst: {rate:.3f} on {where}"


def test_a_flip_of_k_copies_is_no_better():
    for k in range(2, 9):
        rate, where = worst_rate(k)
        assert rate <= TARGET, f"k={k}, worst: {rate:.3f} on {where}"


def test_flipping_every_copy_is_tampered():
    for task_id, node, twins, order in draws():
        assert verdict(twins, node, set(order)) == "tampered", (task_id, node)
