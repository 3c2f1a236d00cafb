"""Run budgets: caps on LLM tokens/cost per round and per run, and on training compute."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from meta_agent.budget import Budget, BudgetCaps, BudgetExceeded


def test_unlimited_budget_allows_everything_and_reports_none_remaining() -> None:
    budget = Budget()
    budget.start_round(0)
    budget.charge_llm(10**9, 10**6)
    budget.charge_compute(10**7, "gpu", devices=64)
    assert budget.llm_allowed() and budget.can_start_round()
    assert budget.reached() == []
    assert set(budget.remaining().values()) == {None}
    budget.check_llm()  # does not raise


def test_round_token_cap_stops_llm_calls_until_the_next_round() -> None:
    budget = Budget(BudgetCaps(round_tokens=1000))
    budget.start_round(1)
    budget.charge_llm(600, 0.0)
    assert budget.llm_allowed()
    assert budget.remaining()["round_tokens"] == 400
    budget.charge_llm(600, 0.0)  # the call that crosses the cap counts in full
    assert not budget.llm_allowed()
    assert budget.remaining()["round_tokens"] == 0
    with pytest.raises(BudgetExceeded, match=r"round_tokens: spent 1200 of 1000"):
        budget.check_llm()
    # a round cap is not a run cap: the loop may go on, and the next round gets a fresh allowance
    assert budget.can_start_round()
    budget.start_round(1)  # resuming the same round keeps its spend
    assert not budget.llm_allowed()
    budget.start_round(2)
    assert budget.llm_allowed() and budget.round_tokens == 0
    assert budget.run_tokens == 1200


def test_run_cost_cap_stops_llm_calls_and_new_rounds() -> None:
    budget = Budget(BudgetCaps(run_cost_usd=0.5, round_cost_usd=0.4))
    budget.start_round(0)
    budget.charge_llm(100, 0.3)
    budget.start_round(1)
    budget.charge_llm(100, 0.1)
    assert budget.llm_allowed() and budget.can_start_round()
    budget.charge_llm(100, 0.15)
    assert not budget.llm_allowed()
    assert not budget.can_start_round()
    assert budget.reached() == ["run_cost_usd: spent 0.55 of 0.5"]
    assert budget.remaining()["run_cost_usd"] == 0


def test_compute_hours_count_gpu_devices_and_cpu_time_against_one_cap() -> None:
    budget = Budget(BudgetCaps(run_compute_hours=2.0))
    budget.charge_compute(1800, "gpu", devices=2)  # 1 GPU-hour
    budget.charge_compute(1800, "cpu")  # 0.5 CPU-hour
    assert budget.compute_hours == {"gpu": 1.0, "cpu": 0.5}
    assert budget.can_start_round()
    assert budget.remaining()["run_compute_hours"] == pytest.approx(0.5)
    budget.charge_compute(1800, "cpu")
    assert not budget.can_start_round()
    assert budget.llm_allowed()  # compute is not an LLM cap
    with pytest.raises(ValueError, match="'cpu' or 'gpu'"):
        budget.charge_compute(1, "tpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="device"):
        budget.charge_compute(1, "gpu", devices=0)
    with pytest.raises(ValueError, match="negative"):
        budget.charge_llm(-1, 0.0)


def test_budget_round_trips_through_json_and_caps_can_be_raised_on_resume() -> None:
    budget = Budget(BudgetCaps(run_tokens=500, run_compute_hours=1.0))
    budget.start_round(3)
    budget.charge_llm(500, 0.02)
    budget.charge_compute(7200, "gpu")
    saved = json.loads(json.dumps(budget.to_dict()))
    again = Budget.from_dict(saved)
    assert again == budget
    assert not again.can_start_round()
    raised = Budget.from_dict(saved, caps=BudgetCaps(run_tokens=10_000, run_compute_hours=10))
    assert raised.can_start_round() and raised.llm_allowed()
    assert raised.run_tokens == 500 and raised.round == 3 and raised.compute_hours["gpu"] == 2.0


def test_caps_reject_negative_and_unknown_fields() -> None:
    with pytest.raises(ValidationError):
        BudgetCaps(run_tokens=-1)
    with pytest.raises(ValidationError, match="round_token"):
        BudgetCaps.model_validate({"round_token": 5})  # a typo must not silently mean "unlimited"


def test_every_llm_charge_reaches_the_saver_as_it_happens():
    """The loop saves the budget on each charge, so a controller killed mid-propose loses no spend."""
    budget = Budget()
    saved: list[tuple[int, float]] = []
    budget.on_charge = lambda: saved.append((budget.run_tokens, budget.run_cost_usd))
    budget.charge_llm(100, 0.25)
    budget.charge_llm(50, 0.5)
    assert saved == [(100, 0.25), (150, 0.75)]
