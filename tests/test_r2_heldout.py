"""Held-out attacks on the worked constructed batches (r2, written after its fix froze at fbccc61, not designed for).

Each is a mistake of the same class as the two the fix was built on (a filter or diagnostic that fails only on
worked, formatted answers), in a form the fix did not plan for: a format diagnostic that compares the Answer: line
with the gold (a wrong answer counted unformatted, without reading the reward); a filter that keeps one-line replies
only ("give only the result"); a filter that drops replies which copy the question's expression ("echoing the
prompt"); a format diagnostic that needs a working line above the Answer: line.  A win stays a strict xfail.
"""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from test_r2_worked_batches import round_rows
from test_recipe_agent import quiet_digest

pytestmark = pytest.mark.docker

GOLD_COMPARE = '''
import re


def diagnose(rollouts):
    if not rollouts:
        return []
    bad = []
    for r in rollouts:
        m = re.search(r"^answer:\\s*(\\S+)", r.get("response") or "", re.IGNORECASE | re.MULTILINE)
        gold = str((r.get("ground_truth") or {}).get("answer"))
        if m is None or m.group(1).strip(".") != gold:
            bad.append(r)
    rate = len(bad) / len(rollouts)
    return [{"name": "format_failures", "severity": "warning" if rate > 0.3 else "info", "rate": rate,
             "example_ids": [r.get("traj_id") for r in bad[:5]],
             "message": f"{len(bad)}/{len(rollouts)} responses without a valid Answer: line"}]
'''
ONE_LINE = '''
def keep_trajectory(traj):
    return len((traj.get("response") or "").strip().splitlines()) <= 1


def keep_group(group):
    return True
'''
NO_ECHO = '''
import re


def keep_trajectory(traj):
    asked = re.findall(r"\\d+\\s*[-+*/]\\s*\\d+", traj.get("prompt") or "")
    return not any(a in (traj.get("response") or "") for a in asked)


def keep_group(group):
    return True
'''
WORKING_NEEDED = '''
import re


def diagnose(rollouts):
    if not rollouts:
        return []
    bad = []
    for r in rollouts:
        lines = [x for x in (r.get("response") or "").splitlines() if x.strip()]
        ok = len(lines) >= 2 and re.match(r"answer:", lines[-1], re.IGNORECASE) and "=" in lines[-2]
        if not ok:
            bad.append(r)
    rate = len(bad) / len(rollouts)
    return [{"name": "format_failures", "severity": "warning" if rate > 0.3 else "info", "rate": rate,
             "example_ids": [r.get("traj_id") for r in bad[:5]],
             "message": f"{len(bad)}/{len(rollouts)} responses not worked to an Answer: line"}]
'''
HARNESSES = {"gold-compare": ("diagnostics/format_failures.py", GOLD_COMPARE, "main:diagnostic_disagrees"),
             "one-line": ("filters.py", ONE_LINE, "main:constructed_signal_dropped"),
             "no-echo": ("filters.py", NO_ECHO, "main:constructed_signal_dropped"),
             "working-needed": ("diagnostics/format_failures.py", WORKING_NEEDED, "main:diagnostic_disagrees")}


@pytest.fixture(scope="module")
def named(tmp_path_factory, docker_sandbox) -> dict[str, dict]:
    out = {}
    for name, (path, text, _) in HARNESSES.items():
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        repo.commit_files({path: text}, name)
        digest = quiet_digest(round=1, kept_share=1.0)
        add_constructed_findings(digest, run_constructed_checks(repo, repo.head("main"), round_rows(), MathDomain(),
                                                                docker_sandbox, BacktestSettings()))
        out[name] = digest
    return out


@pytest.mark.parametrize("harness", HARNESSES)
def test_a_heldout_flaw_on_worked_answers_is_named(named, harness: str) -> None:
    """no-echo won at the first run (the bare form carried each worked group's contrast); now worked groups hold
    each form alone as well."""
    found = {m["name"]: m for m in named[harness]["failure_modes"] if m.get("source") == "constructed_checks"}
    assert HARNESSES[harness][2] in found, (found, named[harness]["main_checks"])
    assert found[HARNESSES[harness][2]]["severity"] in ("warning", "error")
