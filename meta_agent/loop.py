"""The round loop: train -> diagnose -> digest -> propose -> backtest -> promote, then the next round.

State is saved atomically after every phase, and every phase can be re-entered
after a crash without losing or duplicating anything:

- train: the backend streams the round's rows into the archive as one part, made
  visible only when the round has finished (``RoundSpec.archive``); then the loop writes
  ``rounds/<n>/train/result.json`` (metrics and evaluation, no rows), then the state moves
  on.  A resumed round re-uses a saved result, so rows are never re-drawn; a part whose
  result was never saved is removed by ``meta_agent.recovery`` and the round trains again;
- archive appends are idempotent for identical rows (a run folder from before the rows
  streamed still has them in result.json; they are appended from there, once);
- diagnose and digest are pure functions of what is on disk;
- propose keeps the branches already committed for this round and asks the agent only
  for the rest (a branch created but killed before its commit is removed first);
- backtest outputs are cached by (tree, sample), and an intervention that was
  already merged or tagged is not judged again; a merge carries its evidence in
  the merge commit itself, so one cannot exist without the other.

What a kill leaves half done inside a phase is found by ``meta_agent.recovery`` when the
loop starts, with a line of output per finding.  Crash points (``harness_repo.failpoints``)
sit after every durable write, so tests can SIGKILL the loop exactly there.

What each phase does lives in ``meta_agent.phases`` (one module a phase); this module is the driver: it
resumes, runs the phases in order, saves the state between them and reports progress.
"""

from __future__ import annotations

import json

from meta_agent.phases.diagnose import DiagnosePhase
from meta_agent.phases.digest import DigestPhase
from meta_agent.phases.gate import GatePhase
from meta_agent.phases.parts import Events, InfrastructureFailed, RoundFailed, round_seed
from meta_agent.phases.propose import ProposePhase
from meta_agent.phases.record import RecordPhase
from meta_agent.phases.train import TrainPhase
from meta_agent.recovery import recover

__all__ = ["PHASES", "Events", "InfrastructureFailed", "RoundFailed", "RoundLoop", "round_seed"]

PHASES = ("train", "archive", "diagnose", "digest", "propose", "backtest", "done")
"""Phases a ``state.json`` may name.  ``archive`` is entered no more (train leaves straight for diagnose);
it stays so that a state saved there by an older run still resumes."""


class RoundLoop(TrainPhase, DiagnosePhase, DigestPhase, ProposePhase, GatePhase, RecordPhase):
    """The run's parts (``meta_agent.phases.parts.RoundParts``: run folder, harness repo, archive, backend,
    domain, agent, sandbox, thresholds, budget, events) and every phase over them, driven round by round."""

    def state(self) -> dict:
        state = self.run.state()
        state.setdefault("round", 0)
        state.setdefault("phase", "train")
        state.setdefault("policy_ref", None)
        state.setdefault("last_good_commit", self.repo.head("main"))
        state.setdefault("rounds", {})
        return state

    def run_rounds(self, total_rounds: int) -> dict:
        """Run until ``total_rounds`` rounds are done; returns the final state."""
        state = self.state()
        for line in recover(self.run, self.repo, self.archive, self.run_id, state):
            self.events.message(f"recovered: {line}")
        # LLM spend is saved as it happens: a kill inside propose neither loses nor repeats it
        self.budget.on_charge = lambda: self.run.save_state(state | {"budget": self.budget.to_dict()})
        retried: set[int] = set()
        while state["round"] < total_rounds:
            if state["phase"] == "train" and not self.budget.can_start_round():
                state["status"] = "budget_exhausted"
                self.events.message("run budget reached (" + "; ".join(self.budget.reached())
                                    + "); no new round starts")
                self.run.save_state(state | {"budget": self.budget.to_dict()})
                return state
            self.budget.start_round(state["round"])
            try:
                self.run_round(state)
            except InfrastructureFailed:
                state["status"] = "stopped"
                self.run.save_state(state)
                raise
            except RoundFailed:
                n = state["round"]
                # main was restored to the last good harness: retry the round once on it
                if n in retried or "restored" not in state["rounds"].get(str(n), {}):
                    state["status"] = "failed"
                    self.run.save_state(state)
                    raise
                retried.add(n)
        state["status"] = "finished"
        self.run.save_state(state)
        return state

    def run_round(self, state: dict) -> None:
        """Round ``state["round"]`` from the phase its state names to the end; the state is saved after each."""
        n = state["round"]
        rdir = self.run.round_dir(n)
        info = state["rounds"].setdefault(str(n), {})
        phase = state["phase"]
        if phase == "train":
            self.events.phase(n, "train")
            self.phase_train(n, rdir, state, info)
            phase = "archive"
        result = json.loads((rdir / "train" / "result.json").read_text())
        if phase == "archive":
            self.phase_archive(n, result, state)
            self._save(state, "diagnose")
            phase = "diagnose"
        rows = self.archive.rows(run_id=self.run_id, round=n, split="train")
        if phase == "diagnose":
            self.events.phase(n, "diagnose")
            self.phase_diagnose(n, rdir, result, rows)
            self._save(state, "digest")
            phase = "digest"
        if phase == "digest":
            self.events.phase(n, "digest")
            self.phase_digest(n, rdir, result, rows, state, info)
            self._save(state, "propose")
            phase = "propose"
        if phase == "propose":
            self.events.phase(n, "propose")
            self.phase_propose(n, rdir, info)
            self._save(state, "backtest")
            phase = "backtest"
        if phase == "backtest":
            self.events.phase(n, "backtest")
            self.phase_backtest(n, rdir, info)
            self._save(state, "done")
        self.events.round_done(self.summary(n, info))
        state["round"] = n + 1
        self._save(state, "train")
