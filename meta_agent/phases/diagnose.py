"""The diagnose phase: the harness's own diagnostics on the round's rows, main's reward audit, and the probe of
main's harness on fresh tasks.  Each is a pure function of what is on disk, so a resumed phase runs it again."""

from __future__ import annotations

from pathlib import Path

from harness_repo.failpoints import failpoint
from meta_agent.backtest import probe_seed, run_diagnostics
from meta_agent.judge.diagnose_sessions import diagnose_views
from meta_agent.judge.reward_audit import AUDIT_FILE, run_reward_audit
from meta_agent.main_checks import MAIN_PROBE_FILE, run_main_probe
from meta_agent.phases.parts import RoundParts
from meta_agent.run_dir import write_json_atomic

class DiagnosePhase(RoundParts):
    def phase_diagnose(self, n: int, rdir: Path, result: dict, rows: list[dict]) -> None:
        """Write ``findings.json``, the reward audit and ``main_probe.json`` for round ``n``."""
        views = diagnose_views(rows)  # the backtest's ratchet replays this very call (judge.harness_runs)
        findings = run_diagnostics(self.repo, result["harness_commit"], views, self.sandbox, self.settings)
        write_json_atomic(rdir / "findings.json", findings)
        # main's reward on constructed answers to this round's tasks: the digest's audit_* fields
        write_json_atomic(rdir / AUDIT_FILE, run_reward_audit(
            self.repo, result["harness_commit"], rows, self.domain.name, self.domain.verify, self.sandbox,
            self.settings, self.domain.reward_range))
        # every probe check on main's harness too, on fresh tasks (issue 44): its failures are main:probe_*
        write_json_atomic(rdir / MAIN_PROBE_FILE, run_main_probe(self.repo, result["harness_commit"], rows,
                                                                 self.domain, self.sandbox, self.settings,
                                                                 self._main_probe_seed(n)))
        failpoint("diagnose.findings_written")

    def _main_probe_seed(self, n: int) -> int:
        """The probe of main's seed: from the public draw seed where the run has one (the run reproduces), else
        keyed from the run's secret as the gate's probe is (``backtest.probe_seed``)."""
        public = self._public_seed()
        return (public * 1_000_003 + n) % 2 ** 63 if public is not None else probe_seed(self.run.draw_secret(), n)

