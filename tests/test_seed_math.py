"""The math seed harness, loaded by file path the way the backends and the backtest runner do."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import jinja2
import pytest
import yaml

from harness_repo.contract import HARNESS_FILES, SEVERITIES, HarnessConfig

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"


def load(relative: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)  # keep the seed dir free of __pycache__
    path = SEED / relative
    spec = importlib.util.spec_from_file_location(f"seed_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_finding(finding: dict, name: str) -> None:
    assert set(finding) == {"name", "severity", "rate", "example_ids", "message"}
    assert finding["name"] == name and finding["severity"] in SEVERITIES
    assert 0.0 <= finding["rate"] <= 1.0 and len(finding["example_ids"]) <= 5
    assert isinstance(finding["message"], str) and finding["message"]


def test_layout_and_config() -> None:
    for name in HARNESS_FILES:
        assert (SEED / name).is_file(), name
    for name in ("prompts/system.j2", "prompts/user.j2", "skills/README.md",
                 "diagnostics/format_failures.py", "diagnostics/truncation.py", "diagnostics/zero_variance.py"):
        assert (SEED / name).is_file(), name
    config = HarnessConfig.model_validate(yaml.safe_load((SEED / "harness.yaml").read_text()))
    assert config.domain == "math"
    assert [(t.name, t.weight) for t in config.tasks] == [("chain_sum", 1.0), ("products", 1.0)]
    small = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    assert all(t.config == small for t in config.tasks)
    g = config.grpo
    assert (g.group_size, g.prompts_per_step, g.steps_per_round) == (4, 4, 3)
    assert (g.learning_rate, g.beta, g.epsilon, g.temperature) == (2e-5, 0.0, 0.2, 0.7)
    assert (g.max_completion_length, g.max_prompt_length) == (32, 256)


def test_compute_score(monkeypatch: pytest.MonkeyPatch) -> None:
    reward = load("reward.py", monkeypatch)
    score = reward.compute_score

    assert score("reasoning_gym/chain_sum", "4 + 3 = 7\nAnswer: 7", {"answer": "7"}) == {
        "score": 1.0, "pred": "7", "format_ok": True}
    assert score("x", "Answer: 7.0.", "7")["score"] == 1.0, "numbers compare numerically"
    assert score("x", "**Answer:** 1,234", {"answer": "1234"})["score"] == 1.0
    assert score("x", "answer: 3/4", {"answer": "0.75"})["score"] == 1.0
    assert score("x", "Answer: -4", '{"answer": "-4"}', extra_info={"traj_id": "t"})["score"] == 1.0
    assert score("x", "Answer: Paris", {"answer": "paris"})["score"] == 1.0, "normalised strings"
    assert score("x", "Answer: 6\nso...\nAnswer: 7", {"answer": "7"})["pred"] == "7", "last line wins"

    assert score("x", "Answer: 8", {"answer": "7"}) == {"score": 0.0, "pred": "8", "format_ok": True}
    assert score("x", "The answer is 7", {"answer": "7"}) == {"score": 0.0, "pred": None, "format_ok": False}
    assert score("x", "So \\boxed{7}", {"answer": "7"}) == {"score": 0.0, "pred": None, "format_ok": False}
    assert score("x", "Answer:", {"answer": "7"})["format_ok"] is False
    assert score("x", None, {"answer": "7"})["score"] == 0.0
    with pytest.raises(ValueError, match="answer"):
        score("x", "Answer: 7", {"solution": "7"})


def test_reward_on_real_reasoning_gym_items(monkeypatch: pytest.MonkeyPatch) -> None:
    reasoning_gym = pytest.importorskip("reasoning_gym")
    reward = load("reward.py", monkeypatch)
    config = HarnessConfig.model_validate(yaml.safe_load((SEED / "harness.yaml").read_text()))
    for task in config.tasks:
        for item in reasoning_gym.create_dataset(task.name, size=5, seed=3, **task.config):
            gold = {"answer": item["answer"]}
            assert reward.compute_score(task.name, f"Answer: {item['answer']}", gold)["score"] == 1.0
            wrong = int(item["answer"]) + 1
            assert reward.compute_score(task.name, f"Answer: {wrong}", gold)["score"] == 0.0


def test_prompts_render_strictly() -> None:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(SEED / "prompts"), undefined=jinja2.StrictUndefined)
    user = env.get_template("user.j2").render(question="What is 2 + 3?", task={"name": "chain_sum"})
    assert user.startswith("What is 2 + 3?") and "Answer: <number>" in user
    system = env.get_template("system.j2").render()
    assert "Answer: <number>" in system and len(system) < 300
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("user.j2").render(task={})


def test_filters_keep_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    filters = load("filters.py", monkeypatch)
    traj = {"traj_id": "t1", "response": "", "truncated": True, "reward": 0.0}
    assert filters.keep_trajectory(traj) is True and filters.keep_group([traj, dict(traj)]) is True


def test_format_failures(monkeypatch: pytest.MonkeyPatch) -> None:
    diagnose = load("diagnostics/format_failures.py", monkeypatch).diagnose
    rollouts = [
        {"traj_id": "a", "response": "Answer: 3"},
        {"traj_id": "b", "response": "it is \\boxed{3}"},
        {"traj_id": "c", "response": "three"},
        {"traj_id": "d", "response": "x\nanswer: 4."},
    ]
    (finding,) = diagnose(rollouts)
    check_finding(finding, "format_failures")
    assert (finding["rate"], finding["severity"], finding["example_ids"]) == (0.5, "warning", ["b", "c"])
    assert "2/4" in finding["message"] and "boxed" in finding["message"]
    (low,) = diagnose(rollouts[:1] * 3 + rollouts[2:3])
    assert (low["rate"], low["severity"]) == (0.25, "info")
    many = [{"traj_id": str(i), "response": ""} for i in range(8)]
    assert diagnose(many)[0]["example_ids"] == ["0", "1", "2", "3", "4"]
    assert diagnose([]) == []


def test_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    diagnose = load("diagnostics/truncation.py", monkeypatch).diagnose
    rollouts = [{"traj_id": f"t{i}", "truncated": i < 3, "finish_reason": "length" if i < 3 else "stop"}
                for i in range(6)]
    (finding,) = diagnose(rollouts)
    check_finding(finding, "truncation")
    assert (finding["rate"], finding["severity"], finding["example_ids"]) == (0.5, "warning", ["t0", "t1", "t2"])
    (low,) = diagnose([{"traj_id": "a", "truncated": False}] * 4 + [{"traj_id": "b", "truncated": True}])
    assert (low["rate"], low["severity"], low["example_ids"]) == (0.2, "info", ["b"])
    assert diagnose([]) == []


def test_zero_variance(monkeypatch: pytest.MonkeyPatch) -> None:
    diagnose = load("diagnostics/zero_variance.py", monkeypatch).diagnose
    rewards = {"g1": [1.0, 1.0], "g2": [0.0, 1.0], "g3": [0.0, 0.0]}
    rollouts = [{"traj_id": f"{g}-{i}", "group_id": g, "reward": r}
                for g, rs in rewards.items() for i, r in enumerate(rs)]
    (finding,) = diagnose(rollouts)
    check_finding(finding, "zero_variance")
    assert finding["rate"] == pytest.approx(2 / 3) and finding["severity"] == "warning"
    assert finding["example_ids"] == ["g1-0", "g3-0"]
    assert "2/3" in finding["message"] and "all 0: 1" in finding["message"] and "all 1: 1" in finding["message"]
    (mixed,) = diagnose([r for r in rollouts if r["group_id"] == "g2"])
    assert (mixed["rate"], mixed["severity"], mixed["example_ids"]) == (0.0, "info", [])
    assert diagnose([{"traj_id": "a", "group_id": "g", "reward": None}]) == []
