"""Constructed groups for every kind a round trains, not only its first.

The constructed checks built their groups on the round's first task that gave two right and two wrong answers.  A
filter that removes only another kind's worked answers (a character products write and sums do not) then never met
a group it could hurt: 12l's markdown filter dropped every reply holding ``*`` and was named nothing at sets 18-19,
while each products answer a learning policy writes (``6 * 7 = 42``) would be dropped.
"""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import PREFIX, SIGNAL, build_groups, run_constructed_checks
from test_a2_constructed import round_rows

QUESTIONS = [("State the final answer to the following arithmetic problem: 5 + 2 =", "7",
              ["I'm sorry, I can't help with that.", "The sum is 8 after a 2.", "5 + 3 = 8", "Seven plus"]),
             ("Solve the following multiplication: 3 * 4. Give only the result as your final answer.", "12",
              ["13", "The product is 14.", "Fifteen, I think", "Three times four is"])]
"""An untrained round of two kinds: the sums come first, and the products' replies hold no ``*`` of their own."""

STAR_FILTER = '''
def keep_trajectory(traj):
    return "*" not in (traj.get("response") or "")


def keep_group(group):
    return True
'''


def two_kinds() -> list[dict]:
    rows = round_rows(QUESTIONS)
    for r in rows:
        if r["group_id"] == "g1":
            r["data_source"] = "reasoning_gym/products"
    return rows


def test_every_kind_of_the_round_gets_its_worked_groups() -> None:
    groups = dict(build_groups(two_kinds(), MathDomain()))
    products = [kind for kind, members in groups.items() if "3 * 4 = 12" in {m["response"].split("\n")[0]
                                                                            for m in members}]
    assert products, sorted(groups)


@pytest.mark.docker
def test_a_filter_that_drops_one_kinds_worked_answers_is_named(tmp_path, docker_sandbox) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"filters.py": STAR_FILTER}, "filters")
    record = run_constructed_checks(repo, repo.head("main"), two_kinds(), MathDomain(), docker_sandbox,
                                    BacktestSettings())
    found = {f["name"]: f for f in record["findings"]}
    assert PREFIX + SIGNAL in found, record["checks"]
    assert found[PREFIX + SIGNAL]["severity"] == "error"
    assert {e["response"].split("\n")[0] for e in found[PREFIX + SIGNAL]["examples"] if not e["kept"]} \
        >= {"3 * 4 = 12"}, found[PREFIX + SIGNAL]["examples"]
