"""A score answer checked column by column (``harness_answers._plain_columns``) decides exactly as the checks one
entry at a time: each hostile entry below, hidden among plain ones, gets the same outcome either way.

The per-entry checks run for the whole answer as soon as one entry is not plain; so each case is compared with the
same rows checked one entry at a time (an answer that also holds one error, which no column check passes)."""

from __future__ import annotations

import math

import pytest

from sandboxes.harness_answers import FLOAT32_MAX, HarnessFailed, Scored, _plain_columns, scored_columns

RANGE = (0.0, 1.0)


def _answer(rows: list[tuple]) -> tuple[dict, list[dict]]:
    views = [{"traj_id": f"t{i}"} for i in range(len(rows))]
    columns = {key: [row[k] for row in rows] for k, key in enumerate(("reward", "info", "keep", "error"))}
    return columns, views


def _plain_rows(n: int) -> list[tuple]:
    return [(float(i % 2), {"score": float(i % 2), "pred": str(i), "format_ok": True}, i % 3 > 0, None)
            for i in range(n)]


def _entry_by_entry(rows: list[tuple]) -> list[Scored]:
    """``rows`` through the per-entry checks: checked beside one row with an error (never plain), which is
    then left out."""
    columns, views = _answer(rows + [(None, {}, False, "the row that keeps the column checks off")])
    assert not _plain_columns(*(columns[k] for k in ("reward", "info", "keep", "error")), RANGE)
    return scored_columns(columns, views, RANGE)[:-1]


def test_a_plain_answer_takes_the_column_checks_and_gets_what_the_entry_checks_give() -> None:
    rows = _plain_rows(50)
    columns, views = _answer(rows)
    assert _plain_columns(*(columns[k] for k in ("reward", "info", "keep", "error")), RANGE)
    assert scored_columns(columns, views, RANGE) == _entry_by_entry(rows)


HOSTILE = {
    "reward above the range": (1.5, {}, True, None),
    "reward below the range": (-0.25, {}, True, None),
    "reward beyond float32": (FLOAT32_MAX * 4, {}, True, None),
    "reward an int": (1, {}, True, None),
    "no reward": (None, {}, True, None),
    "info not a dict": (1.0, ["a", "list"], True, None),
    "info of 17 entries": (1.0, {f"k{i}": i for i in range(17)}, True, None),
    "info of 70 entries": (1.0, {f"k{i}": i for i in range(70)}, True, None),
    "info with a long key": (1.0, {"k" * 201: 1}, True, None),
    "info with a long text": (1.0, {"text": "x" * 501}, True, None),
    "info with a huge text": (1.0, {"text": "x" * 20_000}, True, None),
    "info with a nested value": (1.0, {"nested": {"a": [1, 2]}}, True, None),
    "keep false with an error": (1.0, {}, False, "reward: boom"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_entry_among_plain_ones_gets_the_entry_checks_outcome(case: str) -> None:
    rows = _plain_rows(20)
    rows.insert(7, HOSTILE[case])
    columns, views = _answer(rows)
    assert not _plain_columns(*(columns[k] for k in ("reward", "info", "keep", "error")), RANGE)
    got = scored_columns(columns, views, RANGE)
    assert got == _entry_by_entry(rows)


def test_an_int_reward_among_plain_ones_comes_back_a_float() -> None:
    rows = _plain_rows(20)
    rows.insert(5, (1, {}, True, None))
    columns, views = _answer(rows)
    assert type(scored_columns(columns, views, RANGE)[5].reward) is float


@pytest.mark.parametrize("reward", [math.nan, math.inf, -math.inf])
def test_a_reward_that_is_not_finite_fails_the_answer_among_plain_ones(reward: float) -> None:
    rows = _plain_rows(20)
    rows.insert(3, (reward, {}, True, None))
    columns, views = _answer(rows)
    with pytest.raises(HarnessFailed, match="reward of t3"):
        scored_columns(columns, views, RANGE)


@pytest.mark.parametrize("keep", [1, 0, "yes", None])
def test_a_keep_that_is_not_a_bool_fails_the_answer_among_plain_ones(keep: object) -> None:
    rows = _plain_rows(20)
    rows.insert(11, (1.0, {}, keep, None))
    columns, views = _answer(rows)
    with pytest.raises(HarnessFailed, match="keep of t11"):
        scored_columns(columns, views, RANGE)


def test_a_reward_beyond_float32_is_refused_among_plain_ones_even_where_the_range_allows_it() -> None:
    wide = (-1e300, 1e300)
    rows = _plain_rows(20)
    rows.insert(9, (FLOAT32_MAX * 4, {}, True, None))
    columns, views = _answer(rows)
    got = scored_columns(columns, views, wide)
    assert (got[9].reward, got[9].invalid_reward, got[9].keep) == (None, FLOAT32_MAX * 4, False)
    assert "float32" in got[9].error
    assert [s.reward for s in got[:9] + got[10:]] == [r[0] for r in rows[:9] + rows[10:]]
