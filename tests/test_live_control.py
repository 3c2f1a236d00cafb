"""A concurrent control arm lets round 1 confirm a round-0 merge: the benefit is the difference between this
run's round 1 and the round 1 of an arm that trained from the same policy without the merge
(``meta_agent.judge.live_control``); without one, round 1 confirms nothing, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_archive import make_rows
from test_live_check import CONTROL, ROUNDS, TRUNCATED_BEFORE, _probation, groups

from harness_repo.repo import HarnessRepo
from meta_agent.judge.live_control import CONTROL_FILE, concurrent_arm, control_rows
from meta_agent.live_check import check_live_effects, measure_benefit
from meta_agent.skills import load_skills
from rl_backend.archive import Archive

BEFORE = {"round": 0, "domain": "math"}
AFTER = {"round": 1, "domain": "math"}


def test_a_round_zero_merge_is_confirmed_against_a_concurrent_arm_and_not_when_the_arm_moved_alike(
        tmp_path, monkeypatch):
    """The arm without the merge stayed at 0.5 truncated in round 1 while this run fell to 0.0625: held,
    confirmed, kept and a skill.  Had the control arm fallen just as far, it is ordinary learning:
    inconclusive, and the probation merge goes."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "longer", ["truncation_rate decrease: x"])
    unmoved = groups(TRUNCATED_BEFORE, tag="c")
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], *ROUNDS, control_rows=unmoved, control="concurrent")
    assert check["predictions"] == {"truncation_rate decrease: x": "held"}, check
    change = check["intervals"]["truncation_rate decrease: x"]
    assert change["delta"] == pytest.approx(0.0625 - 0.5) and "control arm" in change["method"]
    assert check["outcome"] == "confirmed" and repo.intervention(branch).status == "merged"
    assert len(load_skills("math")) == 1

    other = HarnessRepo.create(tmp_path / "harness2", "math")
    moved = _probation(other, tmp_path / "b", "longer", ["truncation_rate decrease: x"])
    learned_anyway = groups([0, 0, 0, 0, 1, 1, 0, 0], tag="c")
    (check,) = check_live_effects(other, 1, AFTER, [BEFORE], *ROUNDS, control_rows=learned_anyway,
                                  control="concurrent")
    assert check["predictions"] == {"truncation_rate decrease: x": "inconclusive"}
    assert check["outcome"] == "refuted" and other.intervention(moved).status == "reverted"


def test_the_concurrent_control_is_not_the_previous_rounds_trend():
    """The same rows read as round n-2 (a difference in differences) give another figure: the kind matters."""
    concurrent = measure_benefit("truncation_rate decrease: x", CONTROL, *ROUNDS, [], control="concurrent")
    previous = measure_benefit("truncation_rate decrease: x", CONTROL, *ROUNDS, [], control="previous")
    assert concurrent[1]["delta"] == pytest.approx(0.0625 - 0.5)
    assert previous[1]["delta"] == pytest.approx((0.0625 - 0.5) - (0.5 - 0.5))
    assert "control arm" not in previous[1]["method"]


def _arm(root: Path, name: str, rounds: list[int]) -> Path:
    run = root / name / "seed0"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": "seed0"}))
    archive = Archive(run / "archive")
    for n in rounds:
        archive.append_round("seed0", n, make_rows("seed0", n, 2))
    return run


def test_control_rows_come_from_the_named_arm_for_its_rounds_only(tmp_path):
    fixed = _arm(tmp_path, "fixed", [0, 1])
    recipe = _arm(tmp_path, "recipe", [0, 1, 2])
    archive = Archive(recipe / "archive")
    assert control_rows(recipe, archive, "seed0", 1) == ([], "none")  # no control arm named: round 1 has none
    (recipe / CONTROL_FILE).write_text(json.dumps({"run_dir": "../../fixed/seed0", "rounds": [1]}))
    rows, kind = control_rows(recipe, archive, "seed0", 1)
    assert kind == "concurrent" and {r["traj_id"] for r in rows} == {
        r["traj_id"] for r in Archive(fixed / "archive").rows(run_id="seed0", round=1)} != set()
    rows, kind = control_rows(recipe, archive, "seed0", 2)  # later rounds: the run's own round n-2
    assert kind == "previous" and {r["round"] for r in rows} == {0}
    assert control_rows(recipe, archive, "seed0", 0) == ([], "none")
    # the fixed arm naming itself (it copied the same shared folder) has no control
    (fixed / CONTROL_FILE).write_text(json.dumps({"run_dir": "../../fixed/seed0", "rounds": [1]}))
    assert concurrent_arm(fixed, 1) is None
    # a control arm without that round's rows is no control; a malformed file says what it expects
    (recipe / CONTROL_FILE).write_text(json.dumps({"run_dir": "../../fixed/seed0", "rounds": [1]}))
    _arm(tmp_path, "late", [0])
    (recipe / CONTROL_FILE).write_text(json.dumps({"run_dir": "../../late/seed0", "rounds": [1]}))
    assert control_rows(recipe, archive, "seed0", 1) == ([], "none")
    (recipe / CONTROL_FILE).write_text(json.dumps({"rounds": [1]}))
    with pytest.raises(ValueError, match="expected"):
        control_rows(recipe, archive, "seed0", 1)


def _filtered(paid: list[int], keep_all: bool, tag: str, record_kept: bool = True) -> list[dict]:
    """A round of groups of 4 whose first ``paid[g]`` members are paid (and verified right); the filter keeps
    only paid members, or everything (the repair).  ``record_kept``: the trainer wrote its per-row record."""
    rows = []
    for g, p in enumerate(paid):
        for k in range(4):
            row = {"traj_id": f"{tag}{g}-{k}", "group_id": f"{tag}{g}", "split": "train", "task_id": f"t{g}",
                   "truncated": False, "reward": 1.0 if k < p else 0.0, "verified": 1.0 if k < p else 0.0}
            if record_kept:
                row["kept"] = keep_all or k < p
            rows.append(row)
    return rows


PAID = [1, 2, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0]  # 7 of 64 paid, in 5 of 16 groups


def test_a_filter_repair_is_confirmed_on_what_the_trainer_kept_against_the_fixed_arm(tmp_path, monkeypatch):
    """The live bench's filter-drops-signal: main keeps only paid members, the repair (merged by the gate, not
    on probation) keeps every one.  kept_share comes from the trainer's own per-trajectory ``kept`` record:
    7/64 in the fixed arm's round 1 against 64/64 here, held, confirmed, a skill.  signal_share, the share of
    groups with a kept trajectory whose kept rewards differ: the fixed arm's kept groups are all paid, so flat
    (0 of 5); the repair's 5 groups with a paid member each have unpaid ones too (5 of 16)."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "loosen", ["kept_share increase: x"], probation=False)
    before, after, fixed = _filtered(PAID, False, "a"), _filtered(PAID, True, "b"), _filtered(PAID, False, "c")
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], before, after, control_rows=fixed, control="concurrent")
    change = check["intervals"]["kept_share increase: x"]
    assert (change["before"], change["after"]) == (pytest.approx(7 / 64), 1.0) and change["low"] > 0
    assert check["predictions"] == {"kept_share increase: x": "held"} and check["outcome"] == "confirmed"
    assert repo.intervention(branch).status == "merged" and len(load_skills("math")) == 1

    signal = measure_benefit("signal_share increase: x", fixed, before, after, [], control="concurrent")[1]
    assert (signal["before"], signal["after"]) == (0.0, pytest.approx(5 / 16))
    assert (signal["n_before"], signal["n_after"]) == (5, 16)  # the fixed arm's groups with a kept member


def test_live_signal_counts_only_groups_whose_spread_holds_a_right_answer():
    """As the gate's signal_share: a group whose only paid member is a wrong answer (the pays-wrong flaw) has
    reward spread but no signal; with a right answer paid beside it, it has."""
    from meta_agent.live_stats import SIGNAL, group_sums

    rows = _filtered([1, 1, 0, 0], True, "s")  # groups 0 and 1: one member paid and verified right
    for row in rows:
        if row["group_id"] == "s1":
            row["verified"] = 0.0  # group 1's paid member is wrong: spread among failures only
    assert sorted(group_sums(SIGNAL, rows)) == [(0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (1.0, 1.0)]


def _exam(right: int, n: int = 128) -> list[dict]:
    return [{"group_id": f"h{i}", "split": "heldout", "task_id": f"h{i}", "reward": None,
             "verified": 1.0 if i < right else 0.0} for i in range(n)]


def test_a_trend_cannot_carry_the_exam_below_nothing():
    """lr-too-high, seed 0, live: round 0 0.188, round 1 collapsed to 0.000, and round 2, after the merge that
    lowered the learning rate, still 0.000.  The trend 0.188 -> 0.000 extrapolated to -0.188, so staying at
    nothing was confirmed as a +0.188 benefit; an exam cannot fall below nothing, so it is no benefit.  A real
    recovery from the collapse still counts, and a rate's trend is held to [0, 1] the same way."""
    from meta_agent.live_stats import controlled_change

    control, collapsed = _exam(24), _exam(0)
    stayed = measure_benefit("heldout_accuracy increase: x", control, collapsed, _exam(0), [])
    assert stayed[0] == "inconclusive" and stayed[1]["delta"] == 0.0
    recovered = measure_benefit("heldout_accuracy increase: x", control, collapsed, _exam(20), [])
    assert recovered[0] == "held" and recovered[1]["delta"] == pytest.approx(20 / 128)
    # within the bounds the trend is extrapolated as before: (after - before) - (before - control)
    assert controlled_change("heldout_accuracy", _exam(10), _exam(20), _exam(40)).delta == pytest.approx(10 / 128)
    # over groups: kept_share fell from all to none of the groups, then stayed at none
    rows = [_filtered([0] * 16, keep, tag) for keep, tag in ((True, "c"), (False, "b"), (False, "a"))]
    for row in rows[1] + rows[2]:
        row["kept"] = False
    flat = controlled_change("kept_share", *rows)
    assert flat.delta == 0.0 and not flat.low > 0


def test_rows_without_the_trainers_kept_record_leave_kept_share_unmeasurable(tmp_path, monkeypatch):
    """A backend that does not record ``kept`` (verl, agent mode, rounds archived before it): no interval can be
    drawn, so the benefit confirms nothing; a harness's own reward info is never read for it."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "library"))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation(repo, tmp_path, "loosen", ["kept_share increase: x"], probation=False)
    bare = [_filtered(PAID, keep, tag, record_kept=False) for keep, tag in ((False, "a"), (True, "b"), (False, "c"))]
    for row in bare[1]:
        row["reward_info"] = json.dumps({"kept": True})  # what a harness could write about itself
    (check,) = check_live_effects(repo, 1, AFTER, [BEFORE], bare[0], bare[1], control_rows=bare[2],
                                  control="concurrent")
    assert check["predictions"] == {"kept_share increase: x": "unmeasurable"}
    assert check["outcome"] == "unconfirmed" and repo.intervention(branch).status == "merged"
    assert load_skills("math") == []
