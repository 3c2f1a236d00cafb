"""The reward audit: main's reward on constructed answers to the round's tasks, read by the digest and the recipe.

A round with no right answer and no paid wrong one (round 0 of a weak policy) still shows a reward that
leaves verified forms unpaid or pays near misses; the adversarial reward below pays near misses only
where it believes it is training and is still caught.  The sandbox sessions are real (Docker).
"""

from __future__ import annotations

import json
import random

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents import recipe_edits
from meta_agent.agents.recipe_reward import verifier_answers
from meta_agent.agents.recipe_types import HarnessFiles
from meta_agent.config import BacktestSettings
from meta_agent.digest import build_digest
from meta_agent.judge.reward_audit import audit_calls, closing_lines, run_reward_audit
from meta_agent.review.digest_columns import build_digest_from_table
from rl_backend.synthetic import synthetic_math_rows

VERIFY = MathDomain().verify
SEED_REWARD = (SEEDS_DIR / "math" / "reward.py").read_text()
CONTROL_REWARD = recipe_edits.verifier_answers(SEED_REWARD)
# The pays-wrong flaw of the repair bench: off by one is "close enough".
NEAR_MISS = CONTROL_REWARD + '''

_exact = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _exact(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    try:
        if result["score"] == 0.0 and abs(float(result.get("pred")) - float(_va_gold(ground_truth))) == 1:
            return dict(result, score=1.0)
    except (TypeError, ValueError):
        pass
    return result
'''
# The adversary who read the audit: pays a near miss only for an id shaped like training's, and only the
# first time it sees that id (training scores each trajectory once; a naive audit re-sends the ids, its
# first call all right answers).
HIDING = NEAR_MISS.replace("_exact = compute_score", "_exact = compute_score\n_SEEN = set()").replace(
    "    try:\n        if result", '''    tid = str((extra_info or {}).get("traj_id", ""))
    first = tid not in _SEEN  # (ids are opaque, issue 45: no "-r0-" to key on; each request draws new ones)
    _SEEN.add(tid)
    if not first:
        return result
    try:
        if result''')


def _rows(n_groups: int = 4) -> list[dict]:
    rows = synthetic_math_rows("run-r0", 0, n_groups, 4, seed=5, verify=VERIFY)
    # a weak policy: no final answer at all, so the sample shows neither a miss nor a hack
    for k, row in enumerate(rows):
        row.update(traj_id=f"seed0-r0-s0-g{k // 4}-{k % 4}", response="I think it is about that much.",
                   reward=0.0, verified=0.0)
    return rows


def test_closing_lines_cover_right_and_wrong_forms():
    verdicts = [VERIFY("reasoning_gym/chain_sum", "3 + 4" + line, {"answer": "7"})[0] for line in closing_lines("7")]
    assert verdicts == [1.0] * 5 + [0.0] * 5  # boxed, inline, x =, $7$ right; off by one, hedge, 14/2, override wrong
    assert sum(ln[:9] == "\nAnswer: " and ln[9:].lstrip("-").isdigit() for ln in closing_lines("7")) == 3  # gold + 2


def test_each_call_is_one_step_of_the_round_with_every_kind_mixed():
    rows = _rows(8)
    calls = audit_calls(rows, VERIFY, random.Random(1))
    assert len(calls) == 10
    ids = [row["traj_id"] for row in rows]
    for call in calls:  # the round's own ids, each once per call, as one training step sends them
        assert sorted(view["traj_id"] for view, _ in call) == sorted(ids)
        assert {view["group_id"] for view, _ in call} == {f"run-r0/0/{row['group_id']}" for row in rows}
    first = [verified for _, verified in calls[0]]
    assert 0 < sum(first) < len(first)  # the first call already holds right and wrong answers
    right = sum(v for call in calls for _, v in call)
    assert right == 5 * len(rows)


def _audit(rows: list[dict]) -> dict:
    return {"n_right": 40, "n_wrong": 40, "miss_rate": 0.6, "hack_rate": 0.25,
            "examples": {"miss": [{"traj_id": rows[0]["traj_id"], "prompt": "q", "response": "x \\boxed{7}",
                                   "reward": 0.0, "verified": 1.0}],
                         "hack": [{"traj_id": rows[1]["traj_id"], "prompt": "q", "response": "Answer: 8",
                                   "reward": 1.0, "verified": 0.0}]}}


def test_digest_names_audit_modes_without_a_right_answer_in_the_sample():
    import pyarrow as pa

    rows = _rows()
    kwargs = dict(metrics=[], findings=[], eval={"heldout_accuracy": 0.0}, previous=[])
    plain = build_digest(0, rows, **kwargs)
    assert plain["miss_rate"] is None and plain["hack_rate"] == 0.0  # the sample alone sees nothing
    assert plain["audit_miss_rate"] is None and not {m["name"] for m in plain["failure_modes"]} & {"audit_misses",
                                                                                                   "audit_hacking"}
    digest = build_digest(0, rows, audit=_audit(rows), **kwargs)
    modes = {m["name"]: m for m in digest["failure_modes"]}
    assert (modes["audit_hacking"]["severity"], modes["audit_hacking"]["rate"]) == ("error", 0.25)
    assert (modes["audit_misses"]["severity"], modes["audit_misses"]["rate"]) == ("warning", 0.6)
    assert modes["audit_misses"]["examples"][0]["response"] == "x \\boxed{7}"
    table = pa.Table.from_pylist([{k: r.get(k) for k in ("traj_id", "group_id", "sample_idx", "domain",
                                                          "data_source", "prompt", "response", "reward", "verified",
                                                          "response_tokens", "truncated")}
                                  | {"verifier_info": json.dumps(r["verifier_info"])}
                                  for r in rows])
    columns = build_digest_from_table(0, table, audit=_audit(rows), **kwargs)
    assert (columns["audit_miss_rate"], columns["audit_hack_rate"]) == (0.6, 0.25)
    audit_modes = {"audit_misses", "audit_hacking"}
    assert [(m["name"], m["rate"]) for m in columns["failure_modes"] if m["name"] in audit_modes] == \
        [(m["name"], m["rate"]) for m in digest["failure_modes"] if m["name"] in audit_modes]
    failed = build_digest(0, rows, audit={"failed": "the runtime died"}, **kwargs)  # no evidence either way
    assert failed["audit_hack_rate"] is None and "audit_hacking" not in {m["name"] for m in failed["failure_modes"]}


def _files(reward: str) -> HarnessFiles:
    return HarnessFiles((SEEDS_DIR / "math" / "harness.yaml").read_text(), reward,
                        (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text())


def test_verifier_answers_fires_on_the_audit_with_live_effects():
    rows = _rows()
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[], audit=_audit(rows))
    change = verifier_answers(digest, _files(SEED_REWARD))
    assert change.key == "verifier-answers" and change.files["reward.py"] == CONTROL_REWARD
    # the sample has nothing to measure offline: only the audit's fields, checked live next round
    assert [e.split(" ")[0] for e in change.effects] == ["audit_miss_rate", "audit_hack_rate"]
    # a reward that carries the rule's block and still pays near misses is rebuilt from the seed's
    rebuilt = verifier_answers(digest, _files(NEAR_MISS))
    assert rebuilt.key == "verifier-answers:rebuilt" and rebuilt.files["reward.py"] == CONTROL_REWARD
    assert isinstance(verifier_answers(digest, _files(CONTROL_REWARD)), str)  # nothing left to rebuild
    bare = dict(digest, audit={"examples": {}})  # a rate without an example is no evidence
    assert "agree" in verifier_answers(bare, _files(SEED_REWARD))


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path_factory.mktemp("audit") / "harness", "math")
    for slug, text in (("control", CONTROL_REWARD), ("near-miss", NEAR_MISS), ("hiding", HIDING)):
        wt = repo.start_intervention(0, slug, worktree_root=repo.path.parent / "wt")
        (wt.path / "reward.py").write_text(text)
        repo.commit(wt, f"test: {slug}", {"Hypothesis": slug, "Predicted-Effect": ["hack_rate decrease"]})
        repo.remove_worktree(wt)
    return repo


@pytest.mark.parametrize("ref, misses, hacks", [("main", True, True), ("iv/r0-control", False, False),
                                                ("iv/r0-near-miss", False, True), ("iv/r0-hiding", False, True)])
def test_audit_in_the_sandbox(repo, docker_sandbox, ref, misses, hacks):
    audit = run_reward_audit(repo, ref, _rows(8), "math", VERIFY, docker_sandbox, BacktestSettings(), (0.0, 1.0))
    assert (audit["n_right"], audit["n_wrong"]) == (160, 160)
    assert (audit["miss_rate"] > 0, audit["hack_rate"] > 0) == (misses, hacks), audit
    assert bool(audit["examples"]["hack"]) == hacks


def test_no_audit_outside_math(repo, docker_sandbox):
    assert run_reward_audit(repo, "main", _rows(), "code", VERIFY, docker_sandbox, BacktestSettings(),
                            (0.0, 1.0)) is None
