"""A round whose exam falls below the policy it trained from is rolled back: the next round trains from that
starting policy again (``meta_agent.run.lineage``), and what the run compares rounds with follows the lineage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from rich.console import Console
from test_archive import make_rows
from test_loop import ROOT, _tiny_run

from meta_agent.heldout_stats import add_heldout_regression, round_figures
from meta_agent.judge.live_control import control_rows
from meta_agent.run.lineage import parent, rollback_plan
from meta_agent.run_display import heldout_lines, round_panel
from meta_agent.run_dir import write_json_atomic
from rl_backend.archive import Archive

FELL = {"name": "heldout_regression", "source": "trusted", "severity": "error", "rate": 0.2, "message": "",
        "examples": []}


def _exam(run_id: str, round: int, right: int, n: int = 64) -> list[dict]:
    """``n`` held-out rows, one per task, the first ``right`` verified right."""
    rows = make_rows(run_id, round, n, size=1, split="heldout", prefix="exam-")
    for i, row in enumerate(rows):
        row.update(task_id=f"h{i}", group_id=f"heldout-{i}", verified=float(i < right), reward=None)
    return rows


def test_the_lineage_names_where_each_round_started_and_where_a_fall_goes_back_to():
    legacy = {"0": {"policy_ref": "p0"}, "1": {"policy_ref": "p1"}}  # recorded before policy_from existed
    assert [parent(legacy, n) for n in range(3)] == [None, 0, 1]
    rounds = {"0": {"policy_ref": "p0", "harness_commit": "c0", "policy_from": None},
              "1": {"policy_ref": "p1", "harness_commit": "c1", "policy_from": 0},
              "2": {"policy_ref": "p2", "harness_commit": "c2", "policy_from": 0}}  # round 2 was rolled back
    assert parent(rounds, 2) == 0
    assert rollback_plan(rounds, 2, {"failure_modes": [{"name": "truncation"}]}) is None
    plan = rollback_plan(rounds, 2, {"failure_modes": [FELL]})
    assert (plan["round"], plan["policy"], plan["commit"]) == (0, "p0", "c0")
    assert "round 3 trains from round 0's policy" in plan["message"]
    # round 0 fell below the untrained base policy: round 1 starts from the base again
    first = rollback_plan(rounds, 0, {"failure_modes": [FELL]})
    assert (first["round"], first["policy"], first["commit"]) == (None, None, None)
    assert "untrained base policy" in first["message"]
    # the round it would go back to has no record: no rollback rather than a guess
    assert rollback_plan({"1": {"policy_from": 0}}, 1, {"failure_modes": [FELL]}) is None


def test_a_rolled_back_round_is_judged_against_the_policy_it_trained_from():
    """Round 3 restarted from round 1's policy: its exam is paired with round 1's, and the message says so."""
    fell = {"value": -0.2, "low": -0.3, "high": -0.1, "n": 64, "lost": 14, "gained": 1}
    digest = {"round": 3, "failure_modes": [], "heldout": {"vs_previous": fell, "trained_from": 1}}
    add_heldout_regression(digest)
    assert "from round 1's policy, which it trained from" in digest["failure_modes"][0]["message"]
    # rolled back to the base in round 1: paired with the base policy's exam
    to_base = {"round": 1, "failure_modes": [], "heldout": {"vs_previous": None, "vs_base": fell, "trained_from": None}}
    add_heldout_regression(to_base)
    assert "untrained base policy" in to_base["failure_modes"][0]["message"]
    normal = {"round": 2, "failure_modes": [], "heldout": {"vs_previous": fell, "trained_from": 1}}
    add_heldout_regression(normal)
    assert "from the previous round" in normal["failure_modes"][0]["message"]
    # round_figures' vs_previous is whatever exam the loop pairs it with
    figures = round_figures({"a": 1.0, "b": 0.0}, None, {"a": 1.0, "b": 1.0})
    assert figures["vs_previous"]["lost"] == 1


def test_live_checks_take_their_control_from_the_lineage(tmp_path):
    """Round 2 fell, round 3 was rolled back to round 1's policy, round 4 trained from round 3's.

    - Round 3 checks round 2's merges against round 2 itself: both trained from round 1's policy, so the plain
      difference is the merges' effect (``rollback``).
    - Round 4's trend is round 3's change over *its* start, round 1, not over the fallen round 2.
    """
    archive = Archive(tmp_path / "archive")
    for n in range(5):
        archive.append_round("run", n, make_rows("run", n, 2))
    lineage = {0: None, 1: 0, 2: 1, 3: 1, 4: 3}
    rows, kind = control_rows(tmp_path, archive, "run", 3, lineage.get)
    assert kind == "rollback" and {r["round"] for r in rows} == {2}
    rows, kind = control_rows(tmp_path, archive, "run", 4, lineage.get)
    assert kind == "previous" and {r["round"] for r in rows} == {1}
    rows, kind = control_rows(tmp_path, archive, "run", 4)  # without the lineage: round n-2, the fallen round
    assert kind == "previous" and {r["round"] for r in rows} == {2}
    # rolled back to the base in round 1: round 0 started where round 1 did
    rows, kind = control_rows(tmp_path, archive, "run", 1, {0: None, 1: None}.get)
    assert kind == "rollback" and {r["round"] for r in rows} == {0}
    # a round trained after a rollback to the base has no earlier exam of its start in the archive
    assert control_rows(tmp_path, archive, "run", 2, {0: None, 1: None, 2: 1}.get) == ([], "none")


@pytest.mark.slow
@pytest.mark.docker
def test_the_loop_rolls_back_after_an_exam_that_fell(tmp_path, docker_sandbox):
    """Round 1's exam fell from 26/64 to 2/64: the digest names heldout_regression, and the state the loop saves
    on leaving the digest phase points the next round at round 0's policy and the harness that trained it."""
    rd, repo = _tiny_run(tmp_path / "run")
    commit = repo.head("main")
    archive = Archive(rd.archive)
    p0, p1 = str(rd.round_dir(0) / "train" / "policy"), str(rd.round_dir(1) / "train" / "policy")
    rounds = {}
    for n, (policy, right) in enumerate([(p0, 26), (p1, 2)]):
        train = [r | {"harness_commit": commit, "policy_ref": policy} for r in make_rows("run", n, 4)]
        archive.append_round("run", n, train + _exam("run", n, right))
        evaluation = {"heldout_accuracy": right / 64, "n": 64}
        write_json_atomic(rd.round_dir(n) / "train" / "result.json",
                          {"policy_ref": policy, "metrics": [], "eval": evaluation, "harness_commit": commit,
                           "train_seconds": 1.0})
        rounds[str(n)] = {"policy_ref": policy, "eval": evaluation, "harness_commit": commit,
                          "policy_from": n - 1 if n else None}
    write_json_atomic(rd.round_dir(1) / "findings.json", [])
    rd.save_state({"round": 1, "phase": "digest", "policy_ref": p1, "policy_round": 1, "policy_commit": commit,
                   "last_good_commit": commit, "rounds": rounds})
    write_json_atomic(rd.run_json, rd.config() | {"rounds": 2})
    # the controller kills itself at its first state save: the one that leaves the digest phase
    proc = subprocess.run([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(rd.path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "META_AGENT_FAILPOINTS": "state.saved"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    state = rd.state()
    assert state["phase"] == "propose"
    assert (state["policy_ref"], state["policy_round"], state["policy_commit"]) == (p0, 0, commit)
    assert state["rounds"]["1"]["rolled_back_to"] == 0
    digest = json.loads((rd.round_dir(1) / "digest.json").read_text())
    assert digest["failure_modes"][0]["name"] == "heldout_regression"
    assert digest["heldout"]["trained_from"] == 0 and digest["rollback"]["round"] == 0
    assert "round 2 trains from round 0's policy" in (rd.round_dir(1) / "digest.md").read_text()
    shown = subprocess.run([sys.executable, "-m", "meta_agent", "show", "1", "--run-dir", str(rd.path)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0 and "Rollback" in shown.stdout and "round 0's policy" in shown.stdout, shown


def test_the_round_panel_says_where_a_rolled_back_round_started():
    fell = {"value": -0.2, "low": -0.3, "high": -0.1, "n": 64, "lost": 14, "gained": 1, "excludes_zero": True}
    digest = {"round": 3, "heldout": {"vs_previous": fell, "trained_from": 1},
              "rollback": {"round": 1, "message": "round 3's exam fell below the policy it trained from"}}
    console = Console(width=200, record=True)
    console.print(round_panel({"round": 3, "digest": digest, "interventions": [], "round_dir": "rounds/3"}))
    text = console.export_text()
    assert "vs round 1, its start" in text and "vs last round" not in text
    assert "rollback" in text and "round 3's exam fell" in text
    digest["heldout"]["trained_from"] = 2
    assert heldout_lines(digest["heldout"], 3)[0][0] == "vs last round"
