"""Held-out cases for the update-size check (``meta_agent.update_checks``), written after its freeze (session 36,
17:45 UTC): variants it was not designed for.  Figures are what real TRL rounds of the math seed recorded
(``eval["update"]`` of ``LocalBackend().train_round``, SmolLM2-135M on CPU, round 0 from the base policy, steps and
groups as named, 2026-12-07), except the last case, whose record is built as the trainer writes it.  A case the
check gets wrong stays a strict xfail with the reason.
"""

from __future__ import annotations

import pytest

from meta_agent.main_checks import add_main_findings

RANGE = (0.0, 1.0)
ROUNDS = {
    # 12h's lower repair bound, 1 step of 2 groups, seed 0 (no gradient: a probe step)
    "lr 5e-6": ({"mean_abs_logp": 0.11359106, "kl": 0.0165319815, "tokens": 72, "learning_rate": 5e-06,
                 "source": "probe"}, {"learning_rate": 5e-6, "steps_per_round": 1}),
    # the seed's rate with hot sampling (temperature 1.3), seed 1: the rate is right, the sampling is not
    "hot sampling": ({"mean_abs_logp": 0.3713378, "kl": 0.111807555, "tokens": 128, "learning_rate": 2e-05,
                      "source": "probe"}, {"learning_rate": 2e-5, "steps_per_round": 1, "temperature": 1.3}),
    # the KL coefficient at its maximum (12c's kl-anchor kind), 3 steps of 2 groups, seed 1
    "beta 1.0": ({"mean_abs_logp": 0.09283482, "kl": 0.0148257827, "tokens": 65, "learning_rate": 2e-05,
                  "source": "round"}, {"learning_rate": 2e-5, "steps_per_round": 3, "beta": 1.0}),
    # the seed's rate, 6 steps of 2 groups: the seed's 12 groups a round in smaller steps, seed 1
    "6 steps": ({"mean_abs_logp": 1.2127049, "kl": 1.6360104084, "tokens": 71, "learning_rate": 2e-05,
                 "source": "round"}, {"learning_rate": 2e-5, "steps_per_round": 6}),
    # the trainer's highest rate, 1e-2, 1 step of 2 groups, seed 1
    "lr 1e-2": ({"mean_abs_logp": 30.22798347, "kl": 29.3162822723, "tokens": 88, "learning_rate": 0.01,
                 "source": "round"}, {"learning_rate": 1e-2, "steps_per_round": 1}),
    # 1e-6 where the filters dropped the round's first group: the trainer records no figure (no token of it trained)
    "first group dropped": ({"mean_abs_logp": None, "kl": None, "tokens": 0, "learning_rate": 1e-06,
                             "source": "round"}, {"learning_rate": 1e-6, "steps_per_round": 2}),
}


def _named(key: str) -> list[str]:
    update, knobs = ROUNDS[key]
    digest: dict = {"round": 0, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], RANGE, update=update, knobs=knobs)
    return [m["name"] for m in digest["failure_modes"] if str(m["name"]).startswith("main:update_too_")]


def test_12h_lower_repair_bound_is_not_named() -> None:
    assert _named("lr 5e-6") == []


def test_hot_sampling_is_not_blamed_on_the_rate() -> None:
    assert _named("hot sampling") == []


def test_the_trainers_highest_rate_is_named_too_large() -> None:
    assert _named("lr 1e-2") == ["main:update_too_large"]


@pytest.mark.xfail(strict=True, reason="held-out win: at beta 1.0 the round's first two steps had no gradient, so "
                   "the anchor never pulled (the policy equalled its reference when the one step with signal came); "
                   "the round moved 0.093, inside the band, and an anchor that binds only later goes unnamed")
def test_a_kl_anchor_at_its_maximum_is_named_too_small() -> None:
    assert _named("beta 1.0") == ["main:update_too_small"]


def test_the_seeds_groups_in_smaller_steps_are_not_named() -> None:
    """A held-out win when written (the band measured at 1 and 3 steps read 6 steps' 1.21 as too large); closed
    after the run by widening the band with the round's steps (``update_checks.band_for``)."""
    assert _named("6 steps") == []


@pytest.mark.xfail(strict=True, reason="held-out win: the figure is measured on the round's first group only; where "
                   "the filters dropped it, nothing is measured and a 1e-6 round goes unnamed")
def test_a_round_whose_first_group_was_dropped_is_still_measured() -> None:
    assert _named("first group dropped") == ["main:update_too_small"]
