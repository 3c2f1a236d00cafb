"""The gate's CPU check on constructed session summaries (the burners themselves: tests/test_hostile_harness.py).

    .venv/bin/python -m pytest -q tests/test_cpu_cost.py
"""

from __future__ import annotations

from meta_agent.judge.cpu_cost import FLOOR_S, RATIO, cpu_check


def test_a_session_within_twice_mains_cpu_plus_the_floor_passes_and_one_over_fails() -> None:
    main = {"cpu_s": 1.0, "pids_at_close": 4}
    limit = RATIO * 1.0 + FLOOR_S
    assert cpu_check(main, {"cpu_s": limit, "pids_at_close": 4})["passed"] is True
    over = cpu_check(main, {"cpu_s": limit + 0.01, "pids_at_close": 4})
    assert over["passed"] is False and over["limit_s"] == limit and "burns CPU" in over["detail"]


def test_missing_measurements() -> None:
    unmeasured_main = cpu_check({"cpu_s": None}, {"cpu_s": 50.0})
    assert unmeasured_main["passed"] is True and "not measured" in unmeasured_main["detail"]
    gone = cpu_check({"cpu_s": 1.0}, {"cpu_s": None})  # only harness code can end its container early
    assert gone["passed"] is False and "gone" in gone["detail"]


def test_processes_left_behind_fail_whatever_the_cpu() -> None:
    # a fork bomb's children (or a spinning thread) still there at close: cheap in total on a short session
    check = cpu_check({"cpu_s": 0.2, "pids_at_close": 4}, {"cpu_s": 0.3, "pids_at_close": 12})
    assert check["passed"] is False and "processes left behind" in check["detail"]
    same = cpu_check({"cpu_s": 0.2, "pids_at_close": 4}, {"cpu_s": 0.3, "pids_at_close": 4})
    assert same["passed"] is True
