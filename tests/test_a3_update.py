"""An update size wrong for the run, named from one round (``main:update_too_small`` / ``main:update_too_large``).

Plants of our own, unlike held-out set 12h's ``default-lr`` (1e-6): main's learning rate at 2e-7 (too small) and at
1e-3 (too large), beside the seed's 2e-5 at two seeds (named nothing).  Their figures are what real TRL rounds of
the math seed recorded at the offline bench's size (``eval["update"]``: steps_per_round 1, prompts_per_step 2,
groups of 4, SmolLM2-135M on CPU, round 0 from the base policy, 2026-12-07, ``/tmp/a3/measure.py`` in the report).
No model here: the digest and the recipe on a real git harness.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.main_checks import add_main_findings

RANGE = (0.0, 1.0)
ROUNDS = {  # learning rate @ seed -> the round's eval["update"], as the local trainer recorded it
    "1e-6@0": {"mean_abs_logp": 0.02266071, "kl": 0.0006676507, "tokens": 72, "learning_rate": 1e-06,
               "source": "probe", "seconds": 55.9},
    "2e-5@1": {"mean_abs_logp": 0.25426513, "kl": 0.1302735955, "tokens": 88, "learning_rate": 2e-05,
               "source": "round", "seconds": 8.39},
}


def _digest(key: str, **knobs) -> dict:
    update = ROUNDS[key]
    digest: dict = {"round": 0, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, [], RANGE, update=update,
                      knobs={"learning_rate": update["learning_rate"], "steps_per_round": 1, "beta": 0.0, **knobs})
    return digest


def _named(digest: dict) -> list[dict]:
    return [m for m in digest["failure_modes"] if str(m["name"]).startswith("main:update_too_")]


@pytest.mark.xfail(strict=True, reason="attack: a round at lr 1e-6 (probe step: the round had no gradient) moves "
                   "the policy 0.023 a token and nothing names it (the stall check needs two rounds' exams)")
def test_a_round_at_1e_6_is_named_too_small_with_its_figure_and_band() -> None:
    [found] = _named(_digest("1e-6@0"))
    assert found["name"] == "main:update_too_small", found
    assert found["evidence"]["mean_abs_logp"] == 0.02266071 and found["evidence"]["source"] == "probe", found
    low, high = found["evidence"]["band"]
    assert low > 0.02266071 and found["evidence"]["target"] > low, found["evidence"]
