"""Main's filters and diagnostics meet batches the round did not happen to produce (issue 44; held-out set 12g's
duplicate-group-filter and crash-on-clean-batch went unnamed).

An untrained policy rarely answers right and never writes two answers alike, so a filter that drops a group a
learning policy produces, or a diagnostic that crashes on a batch with nothing truncated, passes every check on the
round's own outputs.  The flaws planted here are this file's own, unlike 12g's: a group filter that drops groups
whose answers open alike, one that drops groups mostly right, a diagnostic that takes [0] of the wrong answers (it
crashes on an all-right batch), one that takes max() over the truncated ones, one that reads the last word of every
answer (it crashes on an empty one).  Each runs in the sandboxed runtime on batches built from a round's archived
responses; the seed harness is named for nothing.  One harness repo and one round of rows serve every test.
"""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from trajectory.rows import trajectory_row

QUESTIONS = [("What is 3 + 4?", "7", ["3 + 4 = 8\nAnswer: 8", "I add them: 3 + 4 = 6\nAnswer: 6",
                                      "I add them: 3 and 4 make 9\nAnswer: 9", "Three plus four"]),
             ("What is 6 * 7?", "42", ["6 * 7 = 48\nAnswer: 48", "I multiply: 6 * 7 = 36\nAnswer: 36",
                                       "I multiply: 6 * 7 = 43\nAnswer: 43", "Six times seven is"])]
"""An untrained round: two groups of four, none right, one cut off, every text different."""


def round_rows(questions: list[tuple[str, str, list[str]]] | None = None) -> list[dict]:
    """A round's training rows, a group per (question, gold, four replies) of ``questions`` (default ``QUESTIONS``):
    none paid or right, the last reply of each cut off."""
    rows = []
    for g, (question, gold, answers) in enumerate(QUESTIONS if questions is None else questions):
        for k, response in enumerate(answers):
            cut = k == 3
            rows.append(trajectory_row(
                traj_id=f"g{g}-{k}", run_id="r", round=0, step=0, group_id=f"g{g}", sample_idx=k, domain="math",
                task_id=f"t{g}", data_source="reasoning_gym/basic_arithmetic", split="train", prompt=question,
                response=response, ground_truth={"answer": gold}, reward=0.0, verified=0.0,
                response_tokens=32 if cut else 8, truncated=cut, finish_reason="length" if cut else "stop",
                kept=True))
    return rows


PREFIX_FILTER = '''
def keep_trajectory(traj):
    return True


def keep_group(group):
    heads = [(t.get("response") or "")[:6] for t in group]
    return len(set(heads)) == len(heads)
'''
MOSTLY_RIGHT_FILTER = '''
def keep_trajectory(traj):
    return True


def keep_group(group):
    paid = [t for t in group if (t.get("reward") or 0) >= 0.5]
    return len(paid) * 2 <= len(group)
'''
FIRST_WRONG = '''
def diagnose(rollouts):
    if not rollouts:
        return []
    wrong = [r for r in rollouts if (r.get("reward") or 0) < 0.5]
    first = wrong[0]
    return [{"name": "wrong_answers", "severity": "info", "rate": len(wrong) / len(rollouts),
             "example_ids": [first.get("traj_id")], "message": "wrong answers"}]
'''
LONGEST_CUT = '''
def diagnose(rollouts):
    if not rollouts:
        return []
    cut = [r for r in rollouts if r.get("truncated")]
    longest = max(r.get("response_tokens") or 0 for r in cut)
    return [{"name": "cut_length", "severity": "info", "rate": len(cut) / len(rollouts),
             "example_ids": [], "message": f"longest cut answer {longest} tokens"}]
'''
LAST_WORD = '''
def diagnose(rollouts):
    words = [(r.get("response") or "").split()[-1] for r in rollouts]
    bare = [w for w in words if w.isdigit()]
    return [{"name": "bare_numbers", "severity": "info", "rate": len(bare) / max(1, len(words)),
             "example_ids": [], "message": "answers ending in a bare number"}]
'''


@pytest.fixture(scope="module")
def planted(tmp_path_factory, docker_sandbox) -> dict[str, dict]:
    """Each harness's constructed-check record: the seed's, then each planted flaw on its own commit."""
    rows, records = round_rows(), {}
    for name, files in [("seed", {}), ("prefix", {"filters.py": PREFIX_FILTER}),
                        ("mostly-right", {"filters.py": MOSTLY_RIGHT_FILTER}),
                        ("first-wrong", {"diagnostics/wrong_answers.py": FIRST_WRONG}),
                        ("longest-cut", {"diagnostics/cut_length.py": LONGEST_CUT}),
                        ("last-word", {"diagnostics/bare_numbers.py": LAST_WORD})]:
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        if files:
            repo.commit_files(files, name)
        records[name] = run_constructed_checks(repo, repo.head("main"), rows, MathDomain(), docker_sandbox,
                                               BacktestSettings())
    return records


def _found(record: dict) -> dict[str, dict]:
    return {f["name"]: f for f in record["findings"]}


@pytest.mark.docker
def test_the_seed_harness_is_named_for_nothing_on_constructed_batches(planted) -> None:
    assert "error" not in planted["seed"], planted["seed"]
    assert _found(planted["seed"]) == {}
    checks = {c["name"]: c for c in planted["seed"]["checks"]}
    assert checks["constructed_signal_dropped"]["passed"] and checks["diagnostic_crashed"]["passed"]


@pytest.mark.docker
@pytest.mark.parametrize("flaw", ["prefix", "mostly-right"])
def test_a_filter_that_drops_mixed_groups_a_learning_policy_writes_is_named(planted, flaw: str) -> None:
    found = _found(planted[flaw])["main:constructed_signal_dropped"]
    assert found["severity"] == "error" and 0 < found["rate"] <= 1, found
    dropped = [e for e in found["examples"] if e["kept"] is False]
    assert dropped and {e["verified"] for e in found["examples"]} == {0.0, 1.0}, found["examples"]
    assert found["evidence"]["lost"] >= 1 and found["evidence"]["groups"] >= found["evidence"]["lost"]


@pytest.mark.docker
@pytest.mark.parametrize(("flaw", "stem", "batch"), [("first-wrong", "wrong_answers", "all_right"),
                                                      ("longest-cut", "cut_length", "clean"),
                                                      ("last-word", "bare_numbers", "empty_answers")])
def test_a_diagnostic_that_crashes_on_a_plausible_batch_is_named(planted, flaw: str, stem: str, batch: str) -> None:
    found = _found(planted[flaw])["main:diagnostic_crashed"]
    assert found["severity"] == "error" and 0 < found["rate"] < 1, found
    assert batch in found["evidence"]["crashed"][stem], found["evidence"]
    assert {e["batch"] for e in found["examples"]} <= set(found["evidence"]["crashed"][stem])


@pytest.mark.docker
def test_the_findings_join_the_digest_errors_first(planted) -> None:
    digest = {"failure_modes": [{"name": "truncation", "source": "diagnostics", "severity": "info", "rate": 0.25}],
              "main_checks": {}}
    add_constructed_findings(digest, planted["first-wrong"])
    assert digest["failure_modes"][0]["name"] == "main:diagnostic_crashed"
    assert digest["main_checks"]["diagnostic_crashed"]["passed"] is False
    assert digest["main_checks"]["constructed_signal_dropped"]["passed"] is True


def test_outside_math_only_the_rounds_own_verdicts_build_groups() -> None:
    """A code round: its answers are programs, never rewritten; the groups are built from its own verified ones, and
    a round without two right answers is not measured (said), never guessed."""
    from meta_agent.constructed_checks import build_groups
    from meta_agent.names import get_domain

    code = get_domain("code")
    rows = [dict(r, domain="code", verified=1.0 if k < 2 else 0.0, response=f"def f():\n    return {k}\n")
            for k, r in enumerate(round_rows()[:4])]
    built = dict(build_groups(rows, code))
    assert [r["response"] for r in built["mixed"]] == [rows[0]["response"], rows[2]["response"],
                                                       rows[1]["response"], rows[3]["response"]]
    assert [r["verified"] for r in built["twin_right"]] == [1.0, 1.0, 0.0, 0.0]
    assert build_groups([dict(r, verified=0.0) for r in rows], code) == []
    record = run_constructed_checks(None, "", [dict(r, verified=0.0) for r in rows], code, None, BacktestSettings())
    assert record["findings"] == [] and "not measured" in record["checks"][0]["detail"]
