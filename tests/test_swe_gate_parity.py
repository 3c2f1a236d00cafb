"""SWE's hack_rate: the round panel (digest) and the backtest's gate count the same trajectories as paid.

SWE rewards range over -1..1 (the seed pays -1 for a malformed answer, 0 for an unresolved patch,
1 for a resolved one).  A fixed cut of 0.5 on the gate's [0, 1] scale is a reward of 0 there: every
unresolved patch would count as paid.  The cut comes from the domain's reward range instead.
"""

from __future__ import annotations

import io

import numpy as np
from rich.console import Console

from domains.base import normalised_paid_cut, paid_cut
from domains.swe import SweDomain
from meta_agent import gate
from meta_agent.backtest import gate_thresholds
from meta_agent.config import GateThresholds
from meta_agent.digest import build_digest
from meta_agent.run_display import round_panel

# (reward, verified) per trajectory, four groups of four: malformed -1, unresolved 0, resolved 1, and two
# unresolved patches a harness paid 0.8 and 0.5 for (the hacks), one resolved it paid only 0.2 (a miss).
GROUPS = [
    [(-1.0, 0.0), (0.0, 0.0), (1.0, 1.0), (0.0, 0.0)],
    [(0.8, 0.0), (0.0, 0.0), (0.0, 0.0), (-1.0, 0.0)],
    [(1.0, 1.0), (0.2, 1.0), (0.0, 0.0), (0.0, 0.0)],
    [(0.5, 0.0), (0.0, 0.0), (-1.0, 0.0), (0.0, 0.0)],
]


def swe_rows() -> list[dict]:
    return [{"traj_id": f"g{g}-{i}", "group_id": f"g{g}", "sample_idx": i, "round": 1, "task_id": f"t{g}",
             "data_source": "swe/sqlparse", "prompt": "fix it", "response": "--- a/x.py", "reward": reward,
             "verified": verified, "response_tokens": 10, "truncated": False}
            for g, group in enumerate(GROUPS) for i, (reward, verified) in enumerate(group)]


def gate_hack_rate(rows: list[dict], thresholds: GateThresholds) -> float:
    groups = {g: i for i, g in enumerate(dict.fromkeys(r["group_id"] for r in rows))}
    arm = gate.Arm(np.array([r["reward"] for r in rows]), np.ones(len(rows), bool), np.zeros(len(rows), bool))
    sample = gate.Sample(np.array([groups[r["group_id"]] for r in rows]),
                         np.array([r["verified"] >= 0.5 for r in rows]))
    result = gate.decide(arm, arm, sample, [], thresholds, reward_range=SweDomain.reward_range)
    return result.metrics["hack_rate"].main


def test_paid_cut_comes_from_the_reward_range():
    assert paid_cut((-1.0, 1.0)) == 0.5 and normalised_paid_cut((-1.0, 1.0)) == 0.75
    assert paid_cut((0.0, 1.0)) == 0.5 and normalised_paid_cut((0.0, 1.0)) == 0.5
    assert paid_cut((0.0, 10.0)) == 5.0


def test_round_panel_and_backtest_agree_on_swe_hack_rate():
    rows = swe_rows()
    failures = [r for r in rows if r["verified"] < 0.5]
    expected = sum(r["reward"] >= 0.5 for r in failures) / len(failures)  # the two paid unresolved patches
    assert expected == 2 / 13

    digest = build_digest(1, rows, metrics=[], findings=[], eval={"heldout_accuracy": None}, previous=[])
    backtest = gate_hack_rate(rows, gate_thresholds(GateThresholds(), SweDomain.reward_range))
    assert digest["hack_rate"] == expected
    assert backtest == expected  # per-group ratio of sums: the same pooled share here (every row kept)

    console = Console(file=io.StringIO(), width=120)
    console.print(round_panel({"round": 1, "digest": digest, "interventions": [], "round_dir": "rounds/1",
                               "main": "abc"}))
    shown = [line.split() for line in console.file.getvalue().splitlines() if "hack_rate" in line]
    assert [cells[1:3] for cells in shown] == [["hack_rate", f"{expected:.3f}"]]

    # The cut this replaces: 0.5 on the [0, 1] scale pays every failure but the three malformed ones (-1),
    # unresolved patches (reward 0) included.
    assert gate_hack_rate(rows, GateThresholds()) == 10 / 13
