"""Merges checked against the round they trained: the tripwire on trusted safety figures (a regression reverts
the round's merges), the live checks of earlier merges' predicted effects, and the rollback after a fallen exam."""

from __future__ import annotations

from meta_agent.judge.audit_live import live_contrast, paid_anew
from meta_agent.judge.cpu_cost import training_cost_alarm
from meta_agent.judge.live_control import control_rows
from meta_agent.live_check import check_live_effects
from meta_agent.tripwire_revert import revert_on_tripwire
from meta_agent.phases.parts import RoundParts
from meta_agent.run.lineage import parent
from meta_agent.tripwire import compare_rounds, safety_figures


class LivePhase(RoundParts):
    def _tripwire(self, n: int, digest: dict, previous: list[dict]) -> None:
        """Trusted safety figures of this round into the digest; vs the last round, revert on a regression."""
        rows = self.archive.rows(run_id=self.run_id, round=n)
        figures = safety_figures(rows, self.domain.reward_range, self.tripwire.high_reward)
        digest["safety"] = {k: (None if v != v else v) for k, v in figures.items()}  # nan (undefined) -> null
        digest.update({k: v for k, v in digest["safety"].items() if k not in digest})  # live-checkable fields
        if n == 0 or not any(d.get("round") == n - 1 for d in previous):
            digest["tripwire"] = []
            return
        before = self.archive.rows(run_id=self.run_id, round=n - 1)
        saved = [self._saved_result(k) for k in (n - 1, n)]
        # round n's harness may declare a bounded pay for verified failures; the tripwire checks that bound
        credit = self.repo.config(saved[1]["harness_commit"]).format_credit if saved[1] else 0.0
        alarms = compare_rounds(before, rows, reward_range=self.domain.reward_range, thresholds=self.tripwire,
                                seed=n, format_credit=credit)
        # training is metered too: a harness that burns CPU only where it trains shows here, not in the backtest
        alarms.append(training_cost_alarm(*((r or {}).get("eval", {}).get("harness_cost") for r in saved)))
        digest["tripwire"] = [{k: (None if v != v else v) for k, v in a.__dict__.items()} for a in alarms]
        # a merge of an earlier round that pays this round's failures anew goes too (it may have paid nothing until a
        # later merge made the policy write what it pays)
        digest["tripwire_reverted"] = revert_on_tripwire(
            self.repo, n, alarms, self.events.message,
            pays=lambda iv: paid_anew(self.repo, iv.merge_commit, rows, self.sandbox, self.settings,
                                      self.domain.reward_range))

    def _live_checks(self, n: int, digest: dict, previous: list[dict], rows: list[dict], state: dict) -> None:
        """Each earlier merge's predicted effects against this round, beside a control round where one exists."""
        control, control_kind = control_rows(self.run.path, self.archive, self.run_id, n,
                                             lambda k: parent(state["rounds"], k))
        digest["live_checks"] = check_live_effects(
            self.repo, n, digest, previous, self.archive.rows(run_id=self.run_id, round=n - 1) if n else [],
            self.archive.rows(run_id=self.run_id, round=n), self.events.message,
            control_rows=control, control=control_kind,
            audit=lambda iv: live_contrast(self.repo, iv.merge_commit, rows, self.domain.name, self.domain.verify,
                                           self.sandbox, self.settings, self.domain.reward_range))

    def _roll_back(self, digest: dict, state: dict, info: dict) -> None:
        """After a fallen exam the next round trains from the fallen round's starting policy."""
        if plan := digest["rollback"]:
            state.update(policy_ref=plan["policy"], policy_round=plan["round"], policy_commit=plan["commit"])
            info["rolled_back_to"] = plan["round"]
            self.events.message(f"rollback: {plan['message']}")
