"""Held-out checks of the loop's split by round phase (issue 49), written after the split froze (4454754).

The split moved each phase's code into ``meta_agent.phases`` and left ``loop.py`` as the driver; these check what
the crash tests did not aim at: the loop is still the dataclass callers build (keywords in the same order,
``dataclasses.replace``), and a state saved after the last phase of a round (``done``) resumes into the next
round without running a phase again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from meta_agent.budget import Budget
from meta_agent.loop import Events, RoundLoop
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive

FIELDS = ["run", "repo", "archive", "backend", "domain", "agent", "sandbox", "run_id", "thresholds", "tripwire",
          "settings", "evaluation", "candidates", "seed", "budget", "events", "rollback"]
"""RoundLoop's fields before the split (loop.py at 4454754^), in order: positional callers depend on it."""


def _loop(path: Path, events: Events) -> RoundLoop:
    path.mkdir()
    run = RunDir(path)
    return RoundLoop(run=run, repo=None, archive=Archive(run.archive), backend=None, domain=None, agent=None,
                     sandbox=None, run_id="r", budget=Budget(), events=events)


def test_the_loop_keeps_its_fields_in_order_and_replace_keeps_the_phases(tmp_path: Path):
    loop = _loop(tmp_path / "run", Events())
    assert [f.name for f in dataclasses.fields(RoundLoop)] == FIELDS
    other = dataclasses.replace(loop, candidates=0)
    assert type(other) is RoundLoop and other.candidates == 0 and other.run is loop.run
    assert callable(other.phase_backtest) and other.summary(0, {})["round"] == 0


def test_a_state_saved_done_resumes_into_the_next_round_without_running_a_phase(tmp_path: Path):
    phases: list[tuple[int, str]] = []
    done: list[dict] = []
    loop = _loop(tmp_path / "run", Events(phase=lambda n, p: phases.append((n, p)), round_done=done.append))
    rdir = loop.run.round_dir(0)
    write_json_atomic(rdir / "train" / "result.json", {"policy_ref": "p0", "metrics": [], "eval": {},
                                                        "harness_commit": "c0", "train_seconds": 1.0})
    write_json_atomic(rdir / "digest.json", {"round": 0, "reward_mean": 0.5})
    state = {"round": 0, "phase": "done", "policy_ref": "p0", "last_good_commit": "c0",
             "rounds": {"0": {"interventions": [{"branch": "iv/a", "status": "merged", "verdict": "pass"}],
                              "main_after": "c1"}}}
    loop.run_round(state)
    assert phases == []  # nothing re-run: train, diagnose, digest, propose and backtest were all done
    assert [d["round"] for d in done] == [0]
    assert done[0]["interventions"] == [{"branch": "iv/a", "status": "merged", "verdict": "pass"}]
    assert done[0]["digest"] == {"round": 0, "reward_mean": 0.5} and done[0]["main"] == "c1"
    saved = RunDir(loop.run.path).state()  # read back from disk
    assert (state["round"], state["phase"]) == (1, "train")
    assert (saved["round"], saved["phase"]) == (1, "train")
