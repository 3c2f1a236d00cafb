"""Held-out attacks on the dead slice after x1's fixes froze (829167e, 220b0a4): cases the per-entry judgement and the
off-exam set test were not designed for.  Wins stay as strict xfails, each with its reason.  No model, no Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_k38_slice import LIVE_EIGHT, SEED_LIVE, SEED_TASKS, dead, mixes_proposed, rows_of, shares

from domains.math import MathDomain
from meta_agent.digest import build_digest
from meta_agent.main_checks import add_main_findings

EASY = {"name": "leg_counting", "weight": 1.0, "config": {"max_animals": 2}}
HARD = {"name": "leg_counting", "weight": 1.0, "config": {"min_animals": 5, "max_animals": 8}}


def _judged(tasks: list[dict]) -> tuple[dict, list[dict]]:
    """The seed's live groups, eight live groups of the easy leg_counting entry and eight dead of the hard one, each
    row carrying the config its task was drawn with (as archive rows do)."""
    rows = rows_of(SEED_LIVE + [("leg_counting", g, r) for g, r in enumerate(LIVE_EIGHT)] +
                   [("leg_counting", 10 + g, 0) for g in range(8)])
    for r in (r for r in rows if r["data_source"].endswith("/leg_counting")):
        config = HARD["config"] if int(r["group_id"].rsplit("-g", 1)[1]) >= 10 else EASY["config"]
        r["task"] = json.dumps({"question": r["prompt"], "vars": {"name": "leg_counting", "config": config}})
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    digest["domain"] = "math"
    add_main_findings(digest, rows, (0.0, 1.0), train_tasks=tasks, exam_specs=MathDomain().eval_specs)
    return digest, rows


def test_the_dead_hard_entry_of_an_off_exam_kind_is_named_alone() -> None:
    [m] = dead(_judged([*SEED_TASKS, EASY, HARD])[0])
    assert [k for k, f in m["evidence"]["kinds"].items() if f["dead"]] == ["leg_counting@3"], m["evidence"]["kinds"]


@pytest.mark.xfail(strict=True, reason="held-out win: slice-mix moves weights by task name, so a dead entry named "
                                       "name@i (one config of a name drawn under two) is named but never cut")
def test_slice_mix_cuts_the_dead_entry_and_keeps_the_live_one(tmp_path: Path) -> None:
    tasks = [*SEED_TASKS, EASY, HARD]
    proposed = mixes_proposed(_judged(tasks)[0], tasks, tmp_path)
    cut = [t for t in proposed if t[3]["weight"] < HARD["weight"] and t[2]["weight"] == EASY["weight"]]
    assert cut != [], [shares(t) for t in proposed]
