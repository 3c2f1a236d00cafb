"""Main's filters and diagnostics on worked, formatted answers a round did not produce (issue 44; held-out set 12k's
repetition-filter and unpaid-as-unformatted went unnamed).

An untrained round writes prose without an ``Answer:`` line and is never right, so the constructed batches built from
it held no worked answer that restates its result (``3 + 4 = 7`` then ``Answer: 7``) and no batch whose answers are
all formatted but mostly wrong.  A filter that drops every answer repeating a word and a format diagnostic that
counts every unpaid answer as unformatted then pass every check.  The flaws here are this file's own: a trajectory
filter that drops a reply whose last line's value appears earlier in it, and a format diagnostic that calls a reply
unformatted unless it is paid.  The seed is named for nothing.  One round of rows serves every harness.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipes import loosen_filters, restore_diagnostic
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import (_diagnose_batches, _reasons, add_constructed_findings, build_groups,
                                           run_constructed_checks, worked_answers)
from meta_agent.diagnostic_checks import trusted_rates
from test_a2_constructed import round_rows as a2_round_rows
from test_recipe_agent import propose, quiet_digest

QUESTIONS = [("State the final answer to the following arithmetic problem: 5 + 2 =", "7",
              ["I'm sorry, I can't help with that.", "The sum is 8 after a 2.", "5 + 3 = 8", "Seven plus"]),
             ("Solve the following multiplication: 3 * 4. Give only the result as your final answer.", "12",
              ["13", "The product is 14.", "I'll multiply them: 3 * 5 = 15", "Three times four is"])]
"""An untrained round as the base policy writes one: no reply has an Answer: line, none is right, one is cut off."""


def round_rows() -> list[dict]:
    return a2_round_rows(QUESTIONS)


VALUE_ECHO_FILTER = '''
def keep_trajectory(traj):
    lines = (traj.get("response") or "").strip().splitlines()
    if len(lines) < 2:
        return True
    value = lines[-1].split(":")[-1].strip()
    return not value or value not in " ".join(lines[:-1]).split()


def keep_group(group):
    return True
'''
"""Drops a reply whose final value was already written above its last line: every worked answer that restates."""
_FORMAT = SEEDS_DIR / "math" / "diagnostics" / "format_failures.py"
PAID_IS_FORMATTED = _FORMAT.read_text().replace(
    '    failed = [r for r in rollouts if not _has_answer(r.get("response"))]\n',
    '    failed = [r for r in rollouts if not (r.get("reward") or 0) > 0.5]\n')
"""The seed's format diagnostic, with a reply counted as formatted only when it is paid."""


@pytest.fixture(scope="module")
def named(tmp_path_factory, docker_sandbox) -> dict[str, tuple[HarnessRepo, dict]]:
    """Each harness and its digest with the constructed checks' findings joined."""
    assert PAID_IS_FORMATTED != _FORMAT.read_text()
    sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "bench")]
    from repair_flaws import control_files

    out = {}
    for name, files in [("seed", {}), ("control", {"reward.py": control_files()["reward.py"]}),
                        ("value-echo", {"filters.py": VALUE_ECHO_FILTER}),
                        ("paid-is-formatted", {"diagnostics/format_failures.py": PAID_IS_FORMATTED})]:
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        if files:
            repo.commit_files(files, name)
        digest = quiet_digest(round=1, kept_share=1.0)
        add_constructed_findings(digest, run_constructed_checks(repo, repo.head("main"), round_rows(), MathDomain(),
                                                                docker_sandbox, BacktestSettings()))
        out[name] = (repo, digest)
    return out


def _found(digest: dict) -> dict[str, dict]:
    return {m["name"]: m for m in digest["failure_modes"] if m.get("source") == "constructed_checks"}


def test_worked_answers_are_formatted_restate_their_value_and_are_judged_by_the_verifier() -> None:
    rows, math = round_rows(), MathDomain()
    right, wrong = worked_answers(rows[0], math)
    assert right == ["5 + 2 = 7\nAnswer: 7", "7\nAnswer: 7"]
    assert wrong[:3] == ["5 + 2 = 8\nAnswer: 8", "8\nAnswer: 8", "5 + 2 = 6\nAnswer: 6"]
    assert worked_answers(dict(rows[4], prompt="Multiply the two numbers."), math)[0] == ["12\nAnswer: 12"]
    assert worked_answers(dict(rows[0], ground_truth={"answer": "seven"}), math)[1] == []
    from meta_agent.names import get_domain
    assert worked_answers(dict(rows[0], domain="code"), get_domain("code")) == ([], [])
    groups = dict(build_groups(rows, math))
    assert [r["verified"] for r in groups["worked"]] == [1.0, 0.0, 1.0, 0.0]
    assert [r["verified"] for r in groups["worked_wrong"]] == [1.0, 0.0, 0.0, 0.0]
    # each form alone as well as mixed: every member working the expression, and every one giving the value alone
    assert [r["response"].split("\n")[0] for r in groups["worked_restated"]] == ["5 + 2 = 7", "5 + 2 = 8",
                                                                                "5 + 2 = 7", "5 + 2 = 6"]
    assert [r["response"].split("\n")[0] for r in groups["worked_bare"]] == ["7", "8", "7", "6"]
    assert [r["verified"] for r in groups["worked_bare"]] == [1.0, 0.0, 1.0, 0.0]
    assert "worked_restated" not in dict(build_groups([dict(r, prompt="Multiply the two numbers.") for r in rows],
                                                      math))
    batch = _diagnose_batches(groups)["formatted_wrong"]
    band = trusted_rates([dict(r, reward=r["verified"]) for r in batch], _reasons(math, batch))
    assert band["no_final_answer"] == (0.0, 0.0, 8) and band["zero_variance_groups"][0] == 0.0


@pytest.mark.docker
@pytest.mark.parametrize("harness", ["seed", "control"])
def test_the_seed_and_the_control_are_named_for_nothing(named, harness: str) -> None:
    _, digest = named[harness]
    assert _found(digest) == {}
    assert digest["main_checks"]["constructed_signal_dropped"]["passed"]
    assert "of 11 constructed groups" in digest["main_checks"]["constructed_signal_dropped"]["detail"]


@pytest.mark.docker
def test_a_filter_that_drops_worked_answers_is_named_and_loosened(named) -> None:
    repo, digest = named["value-echo"]
    found = _found(digest)["main:constructed_signal_dropped"]
    assert found["severity"] == "error" and "worked" in found["evidence"]["kinds"], found
    dropped = [e for e in found["examples"] if e["kept"] is False]
    assert 1.0 in {e["verified"] for e in dropped}, found["examples"]  # a paid worked answer was dropped
    [p] = propose(repo, digest, rules=(loosen_filters,))
    assert p.files_changed == ["filters.py"]


@pytest.mark.docker
def test_a_format_diagnostic_that_counts_unpaid_as_unformatted_is_named_and_calibrated(named) -> None:
    repo, digest = named["paid-is-formatted"]
    found = _found(digest)["main:diagnostic_disagrees"]
    assert found["severity"] == "error", found
    assert "formatted_wrong" in found["evidence"]["disagrees"]["format_failures"]["batches"], found["evidence"]
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    assert p.files_changed == ["diagnostics/format_failures.py"]
