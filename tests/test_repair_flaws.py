"""The planted flaws of the harness-repair benchmark: each applies to the control (the math seed with its
reward gap closed), shows its own symptom under trusted checks, and its repair check passes a known-good
repair and fails the flaw itself."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ scripts import each other so

from repair_flaws import CONTROL, FLAW_LIST, FLAWS, control_files, flawed_files, write_harness  # noqa: E402

from harness_repo.contract import HarnessConfig  # noqa: E402
from meta_agent.domains.math import MathDomain  # noqa: E402


def test_there_are_at_least_eight_flaws_and_a_control() -> None:
    assert len(FLAWS) >= 8 and CONTROL not in FLAWS
    assert len({f.description for f in FLAW_LIST}) == len(FLAW_LIST)


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_harness(tmp_path_factory.mktemp("control"), flawed_files(CONTROL))


def test_the_control_shows_no_symptom_and_passes_every_repair_check(control: Path) -> None:
    for flaw in FLAW_LIST:
        assert flaw.symptom(control) is None, flaw.name
        assert flaw.repaired(control)[0], (flaw.name, flaw.repaired(control)[1])


@pytest.mark.parametrize("name", list(FLAWS))
def test_each_flaw_shows_its_symptom_and_only_a_repair_passes(name: str, tmp_path: Path) -> None:
    flaw = FLAWS[name]
    files = flawed_files(name)
    flawed = write_harness(tmp_path / "flawed", files)
    # a small diff: one or two files besides the control's reward
    assert 1 <= len(set(files) - {"reward.py"}) + (files["reward.py"] != control_files()["reward.py"]) <= 2
    config = HarnessConfig.model_validate(__import__("yaml").safe_load((flawed / "harness.yaml").read_text()))
    MathDomain().check_task_specs(config.tasks)  # still a valid harness: the flaw is in what it does
    symptom = flaw.symptom(flawed)
    assert symptom, name
    ok, why = flaw.repaired(flawed)
    assert not ok, (name, why)
    merged = {**control_files(), **files}
    repaired = write_harness(tmp_path / "repaired", {**files, **flaw.known_good(merged)})
    ok, why = flaw.repaired(repaired)
    assert ok, (name, why)
    assert flaw.symptom(repaired) is None, name


def test_the_seed_rewards_gaps_both_ways_are_what_the_check_sees(tmp_path: Path) -> None:
    """The seed itself is the first flaw: it misses inline, boxed and 'x = 7' answers and pays '14/2'."""
    from repair_flaws import _reward_disagreements
    misses, hacks = _reward_disagreements(write_harness(tmp_path, flawed_files("seed-reward")))
    assert "'so the answer: 7' (gold 7)" in misses and "'work \\\\boxed{7}' (gold 7)" in misses
    assert "'Answer: 14/2' (gold 7)" in hacks


def test_a_cheating_repair_does_not_pass(tmp_path: Path) -> None:
    """Adversarial repairs: a reward that pays everything 'repairs' every miss; a filter keeping one unpaid
    trajectory per group still drops the paid ones; a prompt that mentions 'answer' without a colon."""
    pay_all = "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n" \
              "    return {'score': 1.0}\n"
    h = write_harness(tmp_path / "a", {"reward.py": pay_all})
    assert not FLAWS["seed-reward"].repaired(h)[0] and not FLAWS["pays-wrong"].repaired(h)[0]
    unpaid_only = "def keep_trajectory(t):\n    return (t.get('reward') or 0) < 0.5\n"
    assert not FLAWS["filter-drops-signal"].repaired(write_harness(tmp_path / "b", {"filters.py": unpaid_only}))[0]
    vague = {"prompts/system.j2": "Be careful.\n", "prompts/user.j2": "{{ question }}\nGive the answer.\n"}
    assert not FLAWS["no-final-instruction"].repaired(write_harness(tmp_path / "c", vague))[0]
