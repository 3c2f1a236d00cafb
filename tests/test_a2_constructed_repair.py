"""The recipes repair what main's constructed checks name, judged by behaviour: the branch's own harness, run on the
same constructed batches in the sandbox, is named for nothing (``meta_agent.constructed_checks``).

Flaws of this file's own: the seed's zero-variance diagnostic rewritten to quote the first flat group's reward
(``[0]`` of an empty list when no group is flat), and a group filter that drops a group whose right answers are
not all the same text.  The round's own batch meets neither (its groups are flat and nothing is right).
"""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipes import loosen_filters, restore_diagnostic
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from test_a2_constructed import round_rows
from meta_agent.backtest import backtest_branch
from test_recipe_agent import SETTINGS, propose, quiet_digest, world  # noqa: F401 - world is a fixture

pytestmark = pytest.mark.docker

_ZV = SEEDS_DIR / "math" / "diagnostics" / "zero_variance.py"
FIRST_FLAT = _ZV.read_text().replace(
    '    rate = len(flat) / len(groups)\n',
    '    rate = len(flat) / len(groups)\n    first = [members[0]["reward"] for members in flat.values()][0]\n')
Z_SCORES = """import statistics


def diagnose(rollouts):
    rewards = [r.get("reward") or 0.0 for r in rollouts]
    mu, sd = statistics.mean(rewards), statistics.pstdev(rewards)
    top = max((x - mu) / sd for x in rewards)
    return [{"name": "reward_z", "severity": "info", "rate": 0.0, "message": f"{top:.2f}"}]
"""
"""A diagnostic of the harness's own, which the seed has not: it divides by zero on a batch of equal rewards."""
ONE_RIGHT_TEXT = '''
def keep_trajectory(traj):
    return True


def keep_group(group):
    paid = {t.get("response") for t in group if (t.get("reward") or 0) >= 0.5}
    return len(paid) <= 1
'''


def _named(repo: HarnessRepo, ref: str, sandbox) -> dict:
    digest = quiet_digest(round=1, kept_share=1.0)
    record = run_constructed_checks(repo, repo.head(ref), round_rows(), MathDomain(), sandbox, BacktestSettings())
    add_constructed_findings(digest, record)
    return digest


@pytest.mark.parametrize(("files", "rule", "name", "changed"), [
    ({"diagnostics/zero_variance.py": FIRST_FLAT}, restore_diagnostic, "main:diagnostic_crashed",
     ["diagnostics/zero_variance.py"]),
    ({"diagnostics/zscore.py": Z_SCORES}, restore_diagnostic, "main:diagnostic_crashed", ["diagnostics/zscore.py"]),
    ({"filters.py": ONE_RIGHT_TEXT}, loosen_filters, "main:constructed_signal_dropped", ["filters.py"])])
def test_the_recipe_repairs_what_the_constructed_batches_name(tmp_path, docker_sandbox, files, rule, name,
                                                             changed) -> None:
    assert FIRST_FLAT != _ZV.read_text()
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files(files, "planted")
    digest = _named(repo, "main", docker_sandbox)
    assert name in [m["name"] for m in digest["failure_modes"]], digest["main_checks"]
    [p] = propose(repo, digest, rules=(rule,))
    assert repo.changed_paths(p.branch) == changed == p.files_changed
    after = _named(repo, p.branch, docker_sandbox)
    assert [m["name"] for m in after["failure_modes"] if m.get("source") == "constructed_checks"] == []
    assert after["main_checks"]["diagnostic_crashed"]["passed"] and after["main_checks"][
        "constructed_signal_dropped"]["passed"]
    if rule is restore_diagnostic:  # the gate asks a diagnostics-only branch to predict; a guard it can keep
        stem = changed[0].removeprefix("diagnostics/").removesuffix(".py")
        assert p.predicted_effects == [f"finding {stem}:crashed guard: the guarded diagnostic no longer crashes"]
        # main's own code is kept (a guard appended), never swapped for another version
        assert repo.read_file(p.branch, changed[0]).startswith(files[changed[0]].rstrip("\n"))
    else:  # the round's archive cannot show it: a live benefit, never a kept_share the backtest would not see
        assert [e.split(":")[0] for e in p.predicted_effects] == ["heldout_accuracy increase"]


@pytest.mark.parametrize(("files", "rule", "probation"), [
    ({"diagnostics/zero_variance.py": FIRST_FLAT}, restore_diagnostic, False),
    ({"filters.py": ONE_RIGHT_TEXT}, loosen_filters, True)])
def test_the_gate_merges_the_repair_over_the_archive(world, docker_sandbox, tmp_path, files, rule,
                                                     probation) -> None:
    """The real gate on the recipe world's "long" archive (every group mixed, so main's restored diagnostic crashed
    there too: the ratchet must read the repaired crash as no lowering; main's filter keeps those groups, so the
    loosened filter's benefit is live and it merges on probation)."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files(files, "planted")
    digest = dict(world.digests["long"])
    add_constructed_findings(digest, run_constructed_checks(repo, repo.head("main"), round_rows(), MathDomain(),
                                                            docker_sandbox, BacktestSettings()))
    [p] = propose(repo, digest, rules=(rule,))
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="long")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", probation), outcome.reasons
