"""Held-out checks of the column checks of a score answer (``harness_answers._plain_columns``), written after
4307c0b froze them: entries the first set did not try, each hidden among plain ones, must get what the checks one
entry at a time give (``tests/test_harness_answers_columns.py`` holds the first set)."""

from __future__ import annotations

import pytest

from sandboxes.harness_answers import HarnessFailed, Scored, _plain_columns, scored_columns

RANGE = (0.0, 1.0)
KEYS = ("reward", "info", "keep", "error")


def _answer(rows: list[tuple]) -> tuple[dict, list[dict]]:
    return ({key: [row[k] for row in rows] for k, key in enumerate(KEYS)},
            [{"traj_id": f"t{i}"} for i in range(len(rows))])


def _plain_rows(n: int) -> list[tuple]:
    return [(float(i % 2), {"score": float(i % 2)}, True, None) for i in range(n)]


def _entry_by_entry(rows: list[tuple]) -> list[Scored]:
    columns, views = _answer(rows + [(None, {}, False, "keeps the column checks off")])
    return scored_columns(columns, views, RANGE)[:-1]


def test_a_bool_reward_among_plain_ones_fails_the_answer() -> None:
    rows = _plain_rows(12)
    rows.insert(4, (True, {}, True, None))
    columns, views = _answer(rows)
    with pytest.raises(HarnessFailed, match="reward of t4 is True"):
        scored_columns(columns, views, RANGE)


BOUNDARY = {
    # exactly at each bound: plain, and whole, both ways
    "16 entries, 200-character keys, 500-character texts": (
        1.0, {f"{i:02d}" + "k" * 198: "v" * 500 for i in range(16)}, True, None),
    "rewards at both ends of the range": (0.0, {}, False, None),
    "a negative zero reward": (-0.0, {}, True, None),
    "an empty info": (1.0, {}, True, None),
}


@pytest.mark.parametrize("case", sorted(BOUNDARY))
def test_an_entry_at_a_bound_is_plain_and_comes_back_as_the_entry_checks_give_it(case: str) -> None:
    rows = _plain_rows(12)
    rows.insert(6, BOUNDARY[case])
    rows.append((1.0, {}, True, None))
    columns, views = _answer(rows)
    assert _plain_columns(*(columns[k] for k in KEYS), RANGE)
    assert scored_columns(columns, views, RANGE) == _entry_by_entry(rows)


PAST = {
    "a list in an info": (1.0, {"trace": [1, 2, 3]}, True, None),
    "a 501-character key": (1.0, {"k" * 501: 1}, True, None),
    "an info of 40 entries, 300 characters each": (1.0, {f"{i:02d}": "x" * 300 for i in range(40)}, True, None),
    "an error with a reward": (0.5, {}, True, "filters: boom"),
    "an error text of 5000 characters": (None, {}, True, "e" * 5000),
}


@pytest.mark.parametrize("case", sorted(PAST))
def test_an_entry_past_a_bound_gets_the_entry_checks_outcome(case: str) -> None:
    rows = _plain_rows(12)
    rows.insert(2, PAST[case])
    columns, views = _answer(rows)
    assert not _plain_columns(*(columns[k] for k in KEYS), RANGE)
    assert scored_columns(columns, views, RANGE) == _entry_by_entry(rows)
