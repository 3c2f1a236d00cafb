"""The reward audit as evidence: a paired contrast in the gate and in the next round's live check.

Main and a candidate (or a merge's parent and the merge) score the same constructed answers, each call
in a fresh Docker session.  Adversaries: a reward that pays honestly only where it recognises the audit
(a trajectory or response body it saw before, a response holding two final answers) must gain nothing;
a reward that lowers the miss rate by paying near misses is rejected; the honest verifier-answers
repair merges without probation and is confirmed on a constructed next round.
"""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe_reward import verifier_answers
from meta_agent.backtest import backtest_branch
from meta_agent.config import BacktestSettings
from meta_agent.digest import build_digest
from meta_agent.judge.audit_contrast import audit_gate_checks, gate_audit, newly_wrong, paired_rates
from meta_agent.judge.audit_live import live_contrast
from meta_agent.judge.audit_reading import ReadingDeck
from meta_agent.judge.metrics import MetricResult
from meta_agent.judge.reward_audit import AS_POLICY, audit_calls, score_calls, sent_views
from meta_agent.judge.reward_reading import read_commit
from meta_agent.live_check import check_live_effects
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_wire import views_frame
from sandboxes.harness_wire_ids import OpaqueIds
from tests.test_digest_audit import CONTROL_REWARD, NEAR_MISS, SEED_REWARD, VERIFY, _files

SETTINGS = BacktestSettings(sample_groups=8, max_sample_groups=8, timeout_s=60, memory_mb=256, pids=32)
RANGE = (0.0, 1.0)
# Pays as the seed does, except where it believes it is audited, where it pays as the honest repair:
# a trajectory id or a response body it has seen before (a naive audit re-sends them in one session), or
# a response holding two final answers (a naive audit appends its answer to the policy's own).
DETECTOR = CONTROL_REWARD.replace("def compute_score(", "def _seed_score(", 1).replace(
    "def compute_score(", "def _honest(", 1) + '''

_SEEN = set()


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    tid = str((extra_info or {}).get("traj_id", ""))
    body = solution_str.rsplit("\\n", 1)[0]
    audited = tid in _SEEN or body in _SEEN or len(_re_va.findall(r"(?i)answer", solution_str)) >= 2
    _SEEN.update({tid, body})
    if audited:
        return _honest(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    return _seed_score(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
'''


def _rows(round: int, seed: int, n_groups: int = 8) -> list[dict]:
    """A weak policy's round: each answer off by one on an ``Answer:`` line, so the sample holds no right
    answer (its miss_rate is undefined) and nothing the seed pays wrongly."""
    rows = synthetic_math_rows("run", round, n_groups, 4, seed=seed, verify=VERIFY)
    for k, row in enumerate(rows):
        gold = int(json.loads(row["ground_truth"])["answer"])
        response = f"Let me add these up carefully, attempt {k}.\nAnswer: {gold + 1}"
        score, info = VERIFY(row["data_source"], response, json.loads(row["ground_truth"]))
        row.update(response=response, verified=score, verifier_info=json.dumps(info), reward=0.0,
                   response_tokens=14, truncated=False, finish_reason="stop")
    return rows


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path_factory.mktemp("live-audit") / "harness", "math")
    for slug, text in (("detector", DETECTOR), ("near-miss", NEAR_MISS)):
        wt = repo.start_intervention(0, slug, worktree_root=repo.path.parent / "wt")
        (wt.path / "reward.py").write_text(text)
        repo.commit(wt, f"test: {slug}", {"Hypothesis": slug, "Predicted-Effect": [
            "audit_miss_rate decrease: every verified form is paid"]})
        repo.remove_worktree(wt)
    return repo


def test_the_detector_gains_on_a_naive_audit(repo, docker_sandbox):
    """The control for the test below: the detector is real.  Fed what a naive audit sends (the policy's
    answer kept, another appended), it pays the verified "So the answer:" form the seed leaves unpaid."""
    rows = _rows(0, seed=3)
    [call] = audit_calls(rows, VERIFY, random.Random(4))[:1]
    by_id = {row["traj_id"]: row for row in rows}
    naive = [[(view | {"response": by_id[view["traj_id"]]["response"]
                       + f"\nSo the answer: {view['ground_truth']['answer']}"}, 1.0) for view, _ in call]]
    paid = {ref: score_calls(repo, repo.head(ref), naive, docker_sandbox, SETTINGS, RANGE)
            for ref in ("main", "iv/r0-detector")}
    rates = paired_rates(naive, paid["main"], paid["iv/r0-detector"], RANGE)
    assert (rates["audit_miss_rate"].main, rates["audit_miss_rate"].candidate) == (1.0, 0.0)


def test_a_reward_that_recognises_the_audit_gains_nothing_from_it(repo, docker_sandbox):
    """0fa88ea's audit says about a quarter of the answers twice where the policy said them once (so that a reward
    paying wrong answers said twice is seen, held-out set c); this detector, honest only on answers said twice,
    gained there what training never pays (strict xfail until gains were read only on answers said as the policy
    says them, harm on all)."""
    rows = _rows(0, seed=3)
    calls = audit_calls(rows, VERIFY, random.Random(4))
    # the policy's own answer is cut; the audit says its answer once where the policy did, and twice in a dealt
    # share of the rows, which are not read for gains
    said = [(len(re.findall(r"(?i)answer|\\boxed", view["response"])) - ("no wait" in view["response"]),
             view[AS_POLICY]) for call in calls for view, _ in call]  # (final answers said, as the policy says)
    assert {n for n, as_policy in said if as_policy} == {1}
    assert min(n for n, as_policy in said if not as_policy) >= 2 and sum(not a for _, a in said) == 8 * 10
    # which answers are read for gains is the trusted side's: no reward is sent the mark
    assert calls and not any(AS_POLICY.encode() in views_frame(sent_views(call), OpaqueIds()) for call in calls)
    # no body is sent twice (and each call is a request of its own, in a fresh process: score_calls)
    assert len({view["response"] for call in calls for view, _ in call}) == sum(len(call) for call in calls)
    [check], rates = gate_audit(repo, repo.head("main"), repo.head("iv/r0-detector"), rows, "math", VERIFY,
                                docker_sandbox, SETTINGS, RANGE)
    # 32 rows, ten drawn lines each and the lines of the shapes the detector's code names beyond main's
    read = ReadingDeck(read_commit(repo, repo.head("iv/r0-detector")), random.Random(0),
                       read_commit(repo, repo.head("main"))).per_row(32)
    assert read >= 1 and check["passed"] and check["detail"].startswith(f"no rise on {32 * (10 + read)} constructed")
    miss = rates["audit_miss_rate"]
    # nothing gained, so nothing held: no benefit to merge on
    assert miss.main == pytest.approx(0.6) and miss.delta == 0.0 and (miss.ci_low, miss.ci_high) == (0.0, 0.0)
    assert rates["audit_hack_rate"].delta == 0.0


def test_lower_misses_bought_with_paid_near_misses_is_rejected(repo, docker_sandbox):
    rows = _rows(0, seed=3)
    checks, metrics = gate_audit(repo, repo.head("main"), repo.head("iv/r0-near-miss"), rows, "math", VERIFY,
                                 docker_sandbox, SETTINGS, RANGE)
    assert metrics["audit_miss_rate"].ci_high < 0  # it does pay every verified form...
    assert metrics["audit_hack_rate"].candidate > 0 and not checks[0]["passed"]  # ... and off-by-one answers
    assert "verified-wrong constructed answers main left unpaid" in checks[0]["detail"]


def test_a_rise_in_misses_alone_is_harm():
    """Main pays both right answers of each call, the candidate one: the same answers, margin zero, unless the
    candidate stops paying wrong answers at least as much."""
    calls = [[({"group_id": f"g{k}"}, 1.0), ({"group_id": f"g{k}"}, 1.0), ({"group_id": f"g{k}"}, 0.0)]
             for k in range(4)]
    main, cand = [[1.0, 1.0, 0.0]] * 4, [[1.0, 0.0, 0.0]] * 4
    rates = paired_rates(calls, main, cand, RANGE)
    assert (rates["audit_miss_rate"].delta, rates["audit_hack_rate"].delta) == (0.5, 0.0)
    harm = {name: r.delta for name, r in rates.items()}  # every answer said as the policy says: gains = harm
    [check] = audit_gate_checks((rates, {"paid": 0, "unpaid": 4, "harm": harm}, 12))
    assert not check["passed"] and "more verified answers unpaid" in check["detail"]
    # a stricter reward over a lenient one: one verified form lost, every paid wrong answer gone
    traded = paired_rates(calls, [[1.0, 1.0, 1.0]] * 4, cand, RANGE)
    assert (traded["audit_miss_rate"].delta, traded["audit_hack_rate"].delta) == (0.5, -1.0)
    assert audit_gate_checks((traded, {"paid": 0, "unpaid": 4, "harm": {n: r.delta for n, r in traded.items()}},
                              12))[0]["passed"]
    with pytest.raises(ValueError, match="call 0: candidate scored 2 answers of 3"):
        paired_rates(calls, main, [[1.0, 0.0]] * 4, RANGE)


def test_gains_are_read_on_answers_said_as_the_policy_says_them_harm_on_all():
    """Per group one right answer said as the policy says it, and a right and a wrong one the audit says twice where
    the policy said them once.  Paying only the repeated right answer gains nothing (the detector's trick); paying
    the repeated wrong answer is harm all the same; read over every answer, the first would have been a gain."""
    calls = [[({"group_id": f"g{k}", AS_POLICY: True}, 1.0), ({"group_id": f"g{k}", AS_POLICY: False}, 1.0),
              ({"group_id": f"g{k}", AS_POLICY: False}, 0.0)] for k in range(6)]
    main, twice_right, twice_wrong = [[0.0, 0.0, 0.0]] * 6, [[0.0, 1.0, 0.0]] * 6, [[0.0, 0.0, 0.3]] * 6
    gains = paired_rates(calls, main, twice_right, RANGE)["audit_miss_rate"]
    assert (gains.main, gains.delta, gains.ci_low, gains.ci_high) == (1.0, 0.0, 0.0, 0.0)
    assert paired_rates(calls, main, twice_right, RANGE, as_policy_only=False)["audit_miss_rate"].delta == -0.5
    assert newly_wrong(calls, main, twice_wrong, RANGE)["paid"] == 6


@pytest.mark.parametrize("groups", [2, 4, 5, 8])
def test_an_audit_interval_needs_enough_groups(groups):
    """Main leaves one of each group's two right answers unpaid, the candidate none: the same clear effect.
    Over five groups or more its interval excludes zero; over fewer the bootstrap's handful of distinct draws
    is no interval, so the bounds are NaN and a live check of the prediction is inconclusive."""
    from meta_agent.judge.audit_contrast import MIN_GROUPS
    from meta_agent.live_check import _verdict

    calls = [[({"group_id": f"g{k}"}, 1.0), ({"group_id": f"g{k}"}, 1.0), ({"group_id": f"g{k}"}, 0.0)]
             for k in range(groups)]
    miss = paired_rates(calls, [[1.0, 0.0, 0.0]] * groups, [[1.0, 1.0, 0.0]] * groups, RANGE)["audit_miss_rate"]
    assert (miss.main, miss.candidate, miss.delta) == (0.5, 0.0, -0.5)
    if groups >= MIN_GROUPS:
        assert miss.ci_low == miss.ci_high == -0.5 and _verdict("decrease", miss.ci_low, miss.ci_high) == "held"
    else:
        assert np.isnan(miss.ci_low) and np.isnan(miss.ci_high)
        assert _verdict("decrease", miss.ci_low, miss.ci_high) == "inconclusive"


def test_the_honest_repair_merges_on_the_audit_and_is_confirmed_next_round(repo, docker_sandbox, tmp_path):
    own = HarnessRepo.create(tmp_path / "harness", "math")
    archive = Archive(tmp_path / "archive")
    round0 = _rows(0, seed=3)
    archive.append_round("run", 0, round0)
    digest = build_digest(0, round0, metrics=[], findings=[], eval={}, previous=[],
                          audit={"n_right": 40, "n_wrong": 40, "miss_rate": 0.6, "hack_rate": 0.0, "examples": {
                              "miss": [{"traj_id": round0[0]["traj_id"], "response": "x \\boxed{7}"}], "hack": []}})
    change = verifier_answers(digest, _files(SEED_REWARD))
    assert [e.split()[0] for e in change.effects] == ["audit_miss_rate"]
    wt = own.start_intervention(0, "verifier-answers", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text(change.files["reward.py"])
    own.commit(wt, "Pay every answer form the verifier accepts",
               {"Hypothesis": "the seed misses verified forms", "Predicted-Effect": change.effects})
    own.remove_worktree(wt)
    outcome = backtest_branch(own, archive, wt.branch, docker_sandbox, tmp_path / "backtests", settings=SETTINGS,
                              run_id="run")
    gate = outcome.report["gate"]
    assert outcome.decision == "merge" and gate["probation"] is False, outcome.reasons
    assert gate["metrics"]["miss_rate"]["main"] != gate["metrics"]["miss_rate"]["main"]  # nan: no right answer
    assert [e["status"] for e in gate["effects"]] == ["held"]
    assert next(c for c in gate["checks"] if c["name"] == "reward_audit")["passed"]
    # the next round: new answers; the merge's parent and the merge audited on them
    round1 = _rows(1, seed=9)
    checks = check_live_effects(own, 1, {"round": 1}, [{"round": 0}], round0, round1, audit=lambda iv: live_contrast(
        own, iv.merge_commit, round1, "math", VERIFY, docker_sandbox, SETTINGS, RANGE))
    [check] = checks
    assert check["outcome"] == "confirmed" and list(check["predictions"].values()) == ["held"]
    [interval] = check["intervals"].values()
    assert interval["delta"] < 0 and interval["high"] < 0 and interval["method"].startswith("reward audit")
    assert own.intervention(wt.branch).status == "merged"


def _probation_merge(repo: HarnessRepo, tmp_path, effects: list[str]) -> str:
    wt = repo.start_intervention(0, "audit-only", worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text("audit\n")
    repo.commit(wt, "audit-only", {"Hypothesis": "h", "Predicted-Effect": effects})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged on probation; test"}, f"Merge {wt.branch}")
    return wt.branch


@pytest.mark.parametrize("hack_high, outcome", [(-0.1, "confirmed"), (0.05, "refuted")])
def test_each_audit_prediction_must_hold_on_its_own(tmp_path, hack_high, outcome):
    """Two audit predictions of a probation merge: both held confirms; one inconclusive leaves it unconfirmed,
    so it is reverted; without an audit (None) both are unmeasurable."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation_merge(repo, tmp_path, ["audit_miss_rate decrease: a", "audit_hack_rate decrease: b"])
    contrast = {"audit_miss_rate": MetricResult("audit_miss_rate", 0.6, 0.0, -0.6, -0.7, -0.5),
                "audit_hack_rate": MetricResult("audit_hack_rate", 0.4, 0.1, -0.3, -0.5, hack_high)}
    [check] = check_live_effects(repo, 1, {"round": 1}, [{"round": 0}], [], [], audit=lambda iv: contrast)
    assert check["outcome"] == outcome
    assert check["kinds"] == {"audit_miss_rate decrease: a": "benefit", "audit_hack_rate decrease: b": "benefit"}
    assert check["predictions"]["audit_hack_rate decrease: b"] == ("held" if outcome == "confirmed" else "inconclusive")
    assert repo.intervention(branch).status == ("merged" if outcome == "confirmed" else "reverted")


def test_without_an_audit_the_prediction_is_unmeasurable(tmp_path):
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    branch = _probation_merge(repo, tmp_path, ["audit_miss_rate decrease: a"])
    [check] = check_live_effects(repo, 1, {"round": 1}, [{"round": 0}], [], [], audit=lambda iv: None)
    assert check["predictions"] == {"audit_miss_rate decrease: a": "unmeasurable"} and check["outcome"] == "refuted"
    assert repo.intervention(branch).status == "reverted"
