"""The findings ratchet and a diagnostic calibrated to the trusted rate (issues 44/45: diagnostics on a short leash).

Main's truncation diagnostic here over-reports: one warning per truncated response, each at rate 1.0, where the
trusted digest measures 1 of 8 (0.125).  restore-diagnostic proposes main's own diagnostic calibrated to the trusted
definition (info 0.125).  A lowering of a finding is harm (margin 0) except this narrow case: for a mode the trusted
side measures on the same batch, the branch's finding lands on the trusted band (and main's was outside it), its
severity no lower than the trusted rate implies.  The attacks at the end must stay harm.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness_repo
from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipes import restore_diagnostic
from meta_agent.backtest import backtest_branch
from meta_agent.diagnostic_checks import disagree_finding, disagreements, trusted_rates
from meta_agent.judge.diagnose_sessions import diagnose_views, run_diagnostics
from meta_agent.judge.findings import probe_diagnostics_check, ratchet_checks_over
from rl_backend.archive import Archive
from test_recipe_agent import SETTINGS, load_path, propose, quiet_digest, scenario_rows

PER_RESPONSE = '''"""Diagnostic: responses cut off."""


def diagnose(rollouts):
    return [{"name": "truncation", "severity": "warning", "rate": 1.0, "example_ids": [r.get("traj_id")],
             "message": "a truncated response"} for r in rollouts if r.get("truncated")]
'''
PLAN = [("R", "T", "W", "N"), ("R", "W", "W", "N")] * 16  # 1 of 8 responses cut off: the trusted rate is 0.125
RUN = "cut"


class Planted:
    """One archived round, main with the per-response diagnostic, and restore-diagnostic's calibrating branch."""

    def __init__(self, root: Path) -> None:
        self.archive = Archive(root / "archive")
        seed_reward = load_path(Path(harness_repo.__file__).parent / "seeds" / "math" / "reward.py")
        self.rows = scenario_rows(RUN, 0, PLAN, seed_reward)
        self.archive.append_round(RUN, 0, self.rows)
        self.repo = HarnessRepo.create(root / "harness", "math")
        self.repo.commit_files({"diagnostics/truncation.py": PER_RESPONSE}, "a truncation diagnostic of our own")
        self.views = diagnose_views(self.rows)
        self.bands = trusted_rates(self.views)
        said = [{"name": "truncation", "rate": 1.0, "diagnostic": "truncation.py"}]
        found = disagree_finding(disagreements("round", said, self.bands), 1, "constructed")
        [self.proposal] = propose(self.repo, quiet_digest(round=1, failure_modes=[found]), rules=(restore_diagnostic,))


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Planted:
    return Planted(tmp_path_factory.mktemp("f1-planted"))


def test_the_planted_main_over_reports_and_the_recipe_calibrates_it(planted: Planted) -> None:
    assert planted.bands["truncation"] == (0.125, 0.125, 128), planted.bands
    assert planted.repo.changed_paths(planted.proposal.branch) == ["diagnostics/truncation.py"]
    assert planted.proposal.predicted_effects[0].startswith("finding truncation calibrated"), planted.proposal


@pytest.fixture(scope="module")
def findings(planted: Planted, docker_sandbox) -> tuple[list[dict], list[dict]]:
    """Main's and the branch's diagnostics over the archived round's views, each in its own sandbox."""
    repo = planted.repo
    views = [v | {"keep": True} for v in planted.views]
    return tuple(run_diagnostics(repo, repo.head(ref), views, docker_sandbox, SETTINGS)
                 for ref in ("main", planted.proposal.branch))


@pytest.mark.docker
def test_calibrating_onto_the_trusted_rate_is_no_lowering_on_real_diagnostics(planted: Planted, findings) -> None:
    main, branch = findings
    cut = [(f["severity"], f["rate"]) for f in main if f["name"] == "truncation"]
    assert cut == [("warning", 1.0)] * 16, main
    assert {(f["severity"], f["rate"]) for f in branch if f["name"] == "truncation"} == {("info", 0.125)}, branch
    assert [f for f in main if f["name"] != "truncation"] == [f for f in branch if f["name"] != "truncation"]
    predicted = list(planted.proposal.predicted_effects)
    bare = {c["name"]: c for c in ratchet_checks_over([("round 0 of cut", main, branch)], predicted,
                                                      diagnostics_changed=True, diagnostics_only=True)}
    # without the trusted band of the batch, any lowering stays harm
    assert not bare["diagnostics_ratchet"]["passed"]
    assert "truncation: warning 1.0000 -> info 0.1250" in bare["diagnostics_ratchet"]["detail"]
    checks = {c["name"]: c for c in ratchet_checks_over([("round 0 of cut", main, branch, planted.bands)], predicted,
                                                        diagnostics_changed=True, diagnostics_only=True)}
    assert checks["diagnostics_ratchet"]["passed"], checks
    assert "calibrated to the trusted rate: truncation" in checks["diagnostics_ratchet"]["detail"], checks
    assert checks["diagnostics_prediction"]["passed"], checks
    probe = probe_diagnostics_check("the probe's round 1", main, branch, predicted, bands=planted.bands)
    assert probe["passed"] and "calibrated" in probe["detail"], probe


@pytest.mark.docker
def test_the_real_gate_merges_the_calibrating_branch(planted: Planted, docker_sandbox, tmp_path: Path) -> None:
    outcome = backtest_branch(planted.repo, planted.archive, planted.proposal.branch, docker_sandbox, tmp_path,
                              settings=SETTINGS, run_id=RUN, apply=False)
    checks = {c["name"]: c for c in outcome.report["gate"]["checks"]}
    assert checks["diagnostics_ratchet"]["passed"], checks["diagnostics_ratchet"]
    assert checks["probe_diagnostics"]["passed"], checks["probe_diagnostics"]
    assert outcome.decision == "merge", outcome.reasons
