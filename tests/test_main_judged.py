"""main is judged like a candidate: every check the gate applies to a candidate's outputs on the archive runs on
main's own training outputs each round (its reward as assigned, its keep mask as the trainer applied it), and
where main fails one it is a digest finding with its rate, examples and severity.  Each failure is planted in
main's archived round and must be named; a clean round names none.  The checks are the gate's own functions
(``meta_agent.judge``), called, not copied."""

from __future__ import annotations

import pytest

from meta_agent.config import GateThresholds
from trajectory.rows import trajectory_row

RANGE = (0.0, 1.0)


def _rows(outcomes: list[list[tuple[float, float | None, bool]]]) -> list[dict]:
    """Groups of (verified, reward or None for an error, kept) -> archive rows of one training round."""
    rows = []
    for g, group in enumerate(outcomes):
        for k, (verified, reward, kept) in enumerate(group):
            rows.append(trajectory_row(traj_id=f"g{g}-{k}", run_id="r", round=0, step=0, group_id=f"g{g}",
                                       sample_idx=k, domain="math", task_id=f"t{g}", data_source="reasoning_gym/x",
                                       split="train", prompt="What is 3 + 4?", response=f"Answer: {k}",
                                       ground_truth={"answer": "7"}, reward=reward, verified=verified,
                                       response_tokens=4, truncated=False, finish_reason="stop", kept=kept))
    return rows


CLEAN = [[(1.0, 1.0, True), (0.0, 0.0, True), (0.0, 0.0, True), (1.0, 1.0, True)]] * 4 \
    + [[(0.0, 0.0, True)] * 4] * 2


def _named(rows: list[dict], **kw) -> dict[str, dict]:
    from meta_agent.main_checks import judge_main
    return {f["name"]: f for f in judge_main(rows, RANGE, GateThresholds(), **kw)}


def test_a_clean_main_is_named_for_nothing() -> None:
    assert _named(_rows(CLEAN)) == {}


def test_pay_for_verified_failures_is_named_as_an_error_with_its_rate_and_examples() -> None:
    paid = [g[:] for g in CLEAN]
    paid[4] = [(0.0, 0.6, True), (0.0, 0.0, True), (0.0, 0.0, True), (0.0, 0.0, True)]  # one wrong answer paid
    paid[0] = [(1.0, 1.0, True), (0.0, 1.0, True), (0.0, 0.0, True), (1.0, 1.0, True)]
    found = _named(_rows(paid))["main:failure_pay_new"]
    assert found["severity"] == "error" and found["rate"] == pytest.approx(2 / 16)  # of 16 verified failures
    assert {e["traj_id"] for e in found["examples"]} == {"g4-0", "g0-1"}
    assert "main:failure_spread" in _named(_rows(paid))  # the paid one spreads its all-wrong group too
    # a format credit that harness.yaml declares (within the gate's cap) is allowed up to its size
    assert "main:failure_pay_new" in _named(_rows(paid), format_credit=0.01)


def test_spread_among_failures_is_named_even_below_the_pay_line() -> None:
    spread = [g[:] for g in CLEAN]
    spread[5] = [(0.0, 0.3, True), (0.0, 0.0, True), (0.0, 0.1, True), (0.0, 0.0, True)]  # nobody paid >= 0.5
    named = _named(_rows(spread))
    assert set(named) >= {"main:failure_spread", "main:flat_failure_share"}
    assert "main:hack_rate" not in named
    found = named["main:flat_failure_share"]
    assert found["severity"] == "error" and found["rate"] == pytest.approx(1 / 2)  # 1 of the 2 all-wrong groups
    assert {e["traj_id"] for e in found["examples"]} <= {f"g5-{k}" for k in range(4)} and found["examples"]


def test_filters_that_keep_too_little_and_errors_and_invalid_rewards_are_named() -> None:
    dropped = [[(v, r, k and j == 0 and i < 4) for j, (v, r, k) in enumerate(g)] for i, g in enumerate(CLEAN)]
    assert _named(_rows(dropped))["main:kept_share"]["rate"] == pytest.approx(1 - 4 / 24)  # 4 of 24 kept
    broken = [g[:] for g in CLEAN]
    broken[1] = [(1.0, None, True), (0.0, 7.5, True), (0.0, 0.0, True), (1.0, 1.0, True)]  # an error, out of range
    named = _named(_rows(broken))
    assert named["main:execution"]["rate"] == pytest.approx(2 / 24) and named["main:execution"]["severity"] == "error"
    assert named["main:reward_validity"]["rate"] == pytest.approx(1 / 24)
    assert {e["traj_id"] for e in named["main:reward_validity"]["examples"]} == {"g1-1"}


def test_render_and_leak_checks_run_on_mains_prompts() -> None:
    from domains.math import MathDomain
    rows = _rows(CLEAN)
    ok = [[{"role": "user", "content": "What is 3 + 4?"}]] * len(rows)
    leaking = [[{"role": "user", "content": "What is 3 + 4? (it is 7)"}]] + ok[1:]
    failing = ["TemplateError: 'question' is undefined"] + ok[1:]
    leak = MathDomain().leaks_answer
    assert _named(rows, rendered=ok, leaks_answer=leak, max_prompt_length=256) == {}
    found = _named(rows, rendered=leaking, leaks_answer=leak, max_prompt_length=256)["main:prompt_leak"]
    assert found["severity"] == "error" and found["rate"] == pytest.approx(1 / 24) and found["examples"]
    assert "main:prompt_render" in _named(rows, rendered=failing, leaks_answer=leak, max_prompt_length=256)
    assert "main:prompt_length" in _named(rows, rendered=ok, leaks_answer=leak, max_prompt_length=2)


def test_the_findings_reach_the_digest_and_the_recipe_table() -> None:
    """``add_main_findings`` puts them among the digest's failure modes (errors first); each has a remedy."""
    from meta_agent.agents.recipes import REMEDIES
    from meta_agent.digest import build_digest
    from meta_agent.main_checks import add_main_findings
    paid = [g[:] for g in CLEAN]
    paid[4] = [(0.0, 0.6, True), (0.0, 0.0, True), (0.0, 0.0, True), (0.0, 0.0, True)]
    rows = _rows(paid)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[])
    add_main_findings(digest, rows, RANGE)
    names = [m["name"] for m in digest["failure_modes"]]
    assert "main:failure_pay_new" in names and digest["failure_modes"][0]["severity"] == "error"
    assert digest["main_checks"]["failure_pay_new"]["passed"] is False
    from meta_agent.agents.recipes import NO_SAFE_EDIT
    from meta_agent.main_checks import SEVERITY
    assert [n for n in names if n.startswith("main:")]
    # every check main can fail has a remedy, or a reason why no recipe is safe for it
    assert sorted(c for c in SEVERITY if not REMEDIES.get(f"main:{c}") and f"main:{c}" not in NO_SAFE_EDIT) == []


@pytest.mark.docker
def test_probe_pay_on_main_is_named_where_the_archived_round_shows_none(tmp_path, docker_sandbox) -> None:
    """main's reward pays a formatted answer one off the gold; the untrained round's archive holds no such answer
    (its pay check passes), the probe's session shaped like training constructs them and names the pay."""
    from pathlib import Path

    import harness_repo
    from domains.math import MathDomain
    from harness_repo.repo import HarnessRepo
    from meta_agent.config import BacktestSettings
    from meta_agent.main_checks import probe_main

    seed = Path(harness_repo.__file__).parent / "seeds" / "math"
    close = ("\n_base = compute_score\n\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None,"
             " **kwargs):\n    result = _base(data_source, solution_str, ground_truth, extra_info=extra_info, "
             "**kwargs)\n"
             "    import re\n    said = re.findall(r'Answer:\\s*(-?\\d+)', solution_str or '')\n"
             "    gold = str((ground_truth or {}).get('answer', '')).strip()\n"
             "    if said and gold.lstrip('-').isdigit() and abs(int(said[-1]) - int(gold)) == 1:\n"
             "        return dict(result, score=1.0)\n    return result\n")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    clean_checks, clean = probe_main(repo, repo.head("main"), _rows(CLEAN), MathDomain(), docker_sandbox,
                                     BacktestSettings(), seed=7)
    assert clean == [] and {c["name"] for c in clean_checks} >= {"probe_failure_pay", "probe_execution"}
    repo.commit_files({"reward.py": (seed / "reward.py").read_text() + close}, "A reward")
    assert "main:failure_pay_new" not in _named(_rows(CLEAN))  # the archive shows no paid failure
    checks, findings = probe_main(repo, repo.head("main"), _rows(CLEAN), MathDomain(), docker_sandbox,
                                  BacktestSettings(), seed=7)
    [found] = [f for f in findings if f["name"] == "main:probe_failure_pay"]
    assert found["severity"] == "error" and 0 < found["rate"] < 1 and found["examples"], found
    unpaid_or_verified = [e for e in found["examples"] if not (e["verified"] == 0.0 and e["reward"] >= 0.5)]
    assert len(found["examples"]) >= 1 and unpaid_or_verified == [], found
    # the loop's diagnose phase saves this record and its digest phase adds it: the finding reaches the digest
    from meta_agent.main_checks import add_main_findings, run_main_probe
    record = run_main_probe(repo, repo.head("main"), _rows(CLEAN), MathDomain(), docker_sandbox, BacktestSettings(),
                            seed=7)
    digest: dict = {"failure_modes": []}
    add_main_findings(digest, _rows(CLEAN), RANGE, probe=record)
    assert "main:probe_failure_pay" in [m["name"] for m in digest["failure_modes"]]
    assert digest["main_checks"]["probe_failure_pay"]["passed"] is False
    # a probe that could not run names no flaw of main's, and the digest says it was not run
    broken = run_main_probe(repo, "0" * 40, _rows(CLEAN), MathDomain(), docker_sandbox, BacktestSettings(), seed=7)
    said: dict = {"failure_modes": []}
    add_main_findings(said, _rows(CLEAN), RANGE, probe=broken)
    assert "did not run" in said["main_checks"]["probe"]["detail"]
    assert not [m for m in said["failure_modes"] if m["name"].startswith("main:probe")]
