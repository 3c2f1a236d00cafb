"""Held-out cases for main's constructed checks (``meta_agent.constructed_checks``), written after the code froze at
469c545: filters and diagnostics of kinds the checks were not designed around, each planted on the seed and run in the
sandboxed runtime on one untrained round's rows (``test_a2_constructed.round_rows``).  A case the checks miss stays
a strict xfail that says why.
"""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import run_constructed_checks
from meta_agent.judge.findings import ratchet_checks
from test_a2_constructed import round_rows

KEEP_ALL_GROUPS = "\n\ndef keep_group(group):\n    return True\n"
KEEP_ALL_TRAJ = "\n\ndef keep_trajectory(traj):\n    return True\n"
CASES = {
    # filters
    "brief-only": ("filters.py", "def keep_trajectory(traj):\n    return len(traj.get('response') or '') <= 30\n"
                   + KEEP_ALL_GROUPS),
    "too-easy": ("filters.py", "def keep_group(group):\n"
                 "    paid = [t for t in group if (t.get('reward') or 0) >= 0.5]\n"
                 "    return len(paid) / len(group) <= 0.6\n" + KEEP_ALL_TRAJ),
    "stateful-quota": ("filters.py", "SEEN = []\n\n\ndef keep_group(group):\n    SEEN.append(1)\n"
                       "    return len(SEEN) <= 4\n" + KEEP_ALL_TRAJ),
    "no-boxed": ("filters.py", "def keep_trajectory(traj):\n"
                 "    return '\\\\boxed' not in (traj.get('response') or '')\n" + KEEP_ALL_GROUPS),
    # diagnostics
    "ascii-only": ("diagnostics/ascii.py", "def diagnose(rollouts):\n"
                   "    n = sum(len((r.get('response') or '').encode('ascii')) for r in rollouts)\n"
                   "    return [{'name': 'ascii_chars', 'severity': 'info', 'rate': 0.0, 'message': str(n)}]\n"),
    "spread-of-groups": ("diagnostics/spread.py", "import statistics\n\n\ndef diagnose(rollouts):\n"
                         "    groups = {}\n    for r in rollouts:\n"
                         "        groups.setdefault(r.get('group_id'), []).append(r.get('reward') or 0.0)\n"
                         "    spread = statistics.stdev([sum(v) / len(v) for v in groups.values()])\n"
                         "    return [{'name': 'group_spread', 'severity': 'info', 'rate': min(1.0, spread), "
                         "'message': ''}]\n"),
    "z-scores": ("diagnostics/zscore.py", "import statistics\n\n\ndef diagnose(rollouts):\n"
                 "    rewards = [r.get('reward') or 0.0 for r in rollouts]\n"
                 "    mu, sd = statistics.mean(rewards), statistics.pstdev(rewards)\n"
                 "    top = max((x - mu) / sd for x in rewards)\n"
                 "    return [{'name': 'reward_z', 'severity': 'info', 'rate': 0.0, 'message': f'{top:.2f}'}]\n"),
    "partial-credit": ("diagnostics/partial.py", "def diagnose(rollouts):\n"
                       "    kinds = {0.0: 'wrong', 1.0: 'right'}\n"
                       "    seen = [kinds[r.get('reward') or 0.0] for r in rollouts]\n"
                       "    return [{'name': 'rewards_seen', 'severity': 'info', 'rate': 0.0, "
                       "'message': str(len(seen))}]\n"),
}
EXPECT = {"brief-only": "main:constructed_signal_dropped", "too-easy": "main:constructed_signal_dropped",
          "stateful-quota": "main:constructed_signal_dropped", "no-boxed": "main:constructed_signal_dropped",
          "ascii-only": "main:diagnostic_crashed", "spread-of-groups": "main:diagnostic_crashed",
          "z-scores": "main:diagnostic_crashed", "partial-credit": "main:diagnostic_crashed"}
MISSED: dict[str, str] = {
    "brief-only": "a right answer no longer than 30 characters is built ('3 + 4 = 8 Answer: 8 Answer: 7'), so every "
                  "mixed group keeps a short right and a short wrong member: the lengths come from this round's own "
                  "short answers, and no group is built of long right answers only",
    "no-boxed": "the right answers built in math end in an Answer: line; none is boxed, the form a learning policy "
                "may take, so a filter against \\boxed drops nothing here",
    "ascii-only": "no constructed answer holds a character outside ASCII (the round's answers hold none either)",
    "partial-credit": "every constructed reward is 0 or 1 (main's reward on right and wrong answers); no batch "
                      "carries a partial reward such as a format credit",
}


@pytest.fixture(scope="module")
def records(tmp_path_factory, docker_sandbox) -> dict[str, dict]:
    out = {}
    for name, (path, text) in CASES.items():
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        repo.commit_files({path: text}, name)
        out[name] = run_constructed_checks(repo, repo.head("main"), round_rows(), MathDomain(), docker_sandbox,
                                           BacktestSettings())
    return out


@pytest.mark.docker
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=MISSED[c]))
                                  if c in MISSED else c for c in CASES])
def test_a_held_out_flaw_is_named(records, case: str) -> None:
    record = records[case]
    assert "error" not in record, record
    names = {f["name"] for f in record["findings"]}
    assert EXPECT[case] in names, record["checks"]


# -- the findings ratchet on renames it was not written for (12f's was zero-variance -> zero_variance)


def _ratchet(main: dict, candidate: dict, predicted: str) -> dict:
    return {c["name"]: c for c in ratchet_checks([main], [candidate], [predicted], diagnostics_changed=True,
                                                 diagnostics_only=True)}


def _f(name: str, severity: str = "warning", rate: float = 0.75, diagnostic: str = "format_failures.py") -> dict:
    return {"name": name, "severity": severity, "rate": rate, "example_ids": [], "message": "",
            "diagnostic": diagnostic}


def test_a_camel_case_name_restored_is_not_lost() -> None:
    """'FormatFailures' is no identifier: normalised to unnamed_<hash>, then restored to format_failures."""
    checks = _ratchet(_f("FormatFailures"), _f("format_failures"), "finding format_failures added")
    assert checks["diagnostics_ratchet"]["passed"] and checks["diagnostics_prediction"]["passed"], checks


def test_a_rename_that_raises_severity_but_lowers_the_rate_stays_a_lowering() -> None:
    checks = _ratchet(_f("format-failures"), _f("format_failures", "error", 0.5), "finding format_failures added")
    assert not checks["diagnostics_ratchet"]["passed"]


@pytest.mark.xfail(strict=True, reason="the vocabulary of read names is every string a seed diagnostic holds at "
                                       "module level, 'exit' (a code seed's exit call) among them: a misnamed "
                                       "finding renamed to it passes as carried, though no reader knows it")
def test_a_rename_to_a_seed_string_that_is_no_finding_name_stays_a_lowering() -> None:
    checks = _ratchet(_f("format-failures"), _f("exit"), "finding exit added")
    assert not checks["diagnostics_ratchet"]["passed"]
