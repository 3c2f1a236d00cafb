"""The gate phase: every open proposal of the round is backtested on the archive and merged or refuted.

Backtest outputs are cached by (tree, sample), and an intervention already merged or tagged is not judged again;
a merge carries its evidence in the merge commit itself, so one cannot exist without the other."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc

from meta_agent.backtest import backtest_branch
from meta_agent.judge.rescore import rescore_if_judge_changed
from meta_agent.judge.sharded_backtest import backtest_plan
from meta_agent.phases.parts import RoundParts


class GatePhase(RoundParts):
    def phase_backtest(self, n: int, rdir: Path, info: dict) -> None:
        """Judge round ``n``'s proposals; ``info`` records each one's outcome and main's head after them."""
        info["interventions"] = self._backtest(n, rdir)
        info["main_after"] = self.repo.head("main")

    def _backtest(self, n: int, rdir: Path) -> list[dict]:
        ivs = [iv for iv in self.repo.interventions() if iv.round == n]
        todo = [iv.branch for iv in ivs if iv.status == "open" and iv.head != iv.base]
        if todo:  # every group the archive holds now with --sample-groups all; Ray started once for the round
            with backtest_plan(self.archive, self.settings, self.events.message) as (settings, runner):
                for branch in todo:
                    self.events.message(f"backtesting {branch}")
                    outcome = backtest_branch(self.repo, self.archive, branch, self.sandbox, rdir / "backtests",
                                              domain=self.domain, thresholds=self.thresholds, settings=settings,
                                              progress=self.events.message, runner=runner, **self._compute_left(n),
                                              probe_secret=self.run.draw_secret())  # the probe's draw, keyed apart
                    self.events.message(f"{branch}: {outcome.decision} ({outcome.report['key_figures']})")
        ivs = [self.repo.intervention(iv.branch) if iv.branch in todo else iv for iv in ivs]  # as judged
        out = [{"branch": iv.branch, "status": iv.status, "verdict": iv.verdict} for iv in ivs]
        # the diagnostics ratchet's retroactive half: a merge that changed diagnostics/ re-scores the archive
        merged = [o["branch"] for o in out if o["status"] == "merged"]
        rescore_if_judge_changed(self.run, self.repo, self.domain, merged, self.events.message)
        return out

    def _compute_left(self, n: int) -> dict:
        """The run's remaining compute and its measured seconds per generated token, for the gate's cost check."""
        left = self.budget.remaining().get("run_compute_hours")
        saved = self.run.round_dir(n) / "train" / "result.json"
        if left is None or not saved.exists():
            return {}
        result = json.loads(saved.read_text())
        counted = self.archive.read(run_id=self.run_id, round=n, columns=["response_tokens"]).column("response_tokens")
        tokens = pc.sum(counted).as_py() or 0
        return {"seconds_left": left * 3600, "seconds_per_token": result["train_seconds"] / tokens if tokens else None}
