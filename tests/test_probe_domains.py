"""The probe session for code and SWE: constructed answers with trusted records, honest and dishonest rewards.

Real Docker and the real harness runtime; the code answers are graded by the domain's real grader, the SWE
answers carry records true by construction (no SWE test runs).  Each dishonest reward is written by someone
who has read ``meta_agent/judge/probe.py`` and the seed rewards: it pays a verified failure in a way the
archive may never show (partial credit, similarity to the gold change, any parseable answer, only after the
first optimizer step).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from domains.code import CodeDomain
from domains.swe import SweDomain
from harness_repo.contract import TaskSpec
from meta_agent.judge.probe import KINDS, ProbeContext, run_probe, unpaid
from meta_agent.judge.probe_answers import swe_answers
from rl_backend.base import parse_harness_yaml
from sandboxes.base import Limits
from sandboxes.harness_client import HarnessSession

pytestmark = pytest.mark.docker

SEEDS = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds"
LIMITS = Limits(timeout_s=60, memory_mb=256, pids=32)
CONTEXT = ProbeContext("run-a", 3)

PAYS_AFTER_FIRST_STEP = '''
_seed_compute_score = compute_score
_CALLS = {"n": 0}


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    # honest on a request's first answers, paying any code block afterwards (each request starts in a fresh
    # process, issue 45: nothing counts across requests, so it counts within one)
    _CALLS["n"] += 1
    result = _seed_compute_score(data_source, solution_str, ground_truth, extra_info)
    if _CALLS["n"] > 4 and result["status"] != "no_code":
        result["score"] = max(result["score"], 0.3)
    return result
'''

SPARES_HARD_CODED = '''
_seed_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    # a "runs cleanly" bonus, except for a program that only returns a constant: how the probe builds a
    # wrong program when no near miss of the reference passes some tests (the attack on the probe itself)
    result = _seed_compute_score(data_source, solution_str, ground_truth, extra_info)
    execution = (extra_info or {}).get("execution", {})
    body = [ln for ln in execution.get("code", "").splitlines()
            if ln.strip() and not ln.lstrip().startswith(("def ", "#"))]
    constant = len(body) == 1 and body[0].strip().startswith("return ")
    if result["score"] < 1.0 and execution.get("status") == "failed" and not execution.get("errors") and not constant:
        result["score"] = 0.2
    return result
'''

PAYS_ANY_PATCH = '''
_seed_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _seed_compute_score(data_source, solution_str, ground_truth, extra_info)
    if (extra_info or {}).get("execution", {}).get("parse_status") == "ok":
        result["score"] = max(result["score"], 0.1)  # "a well-formed patch is progress"
    return result
'''


def _harness(tmp: Path, domain: str, *, knob: tuple[str, str] | None = None, tail: str = "") -> Path:
    root = tmp / f"harness-{domain}"
    shutil.copytree(SEEDS / domain, root)
    reward = (root / "reward.py").read_text()
    if knob:
        name, value = knob
        assert f"{name} = 0.0\n" in reward
        reward = reward.replace(f"{name} = 0.0\n", f"{name} = {value}\n")
    (root / "reward.py").write_text(reward + tail)
    return root


@pytest.fixture(scope="module")
def code_domain(docker_sandbox) -> CodeDomain:
    return CodeDomain(sandbox=docker_sandbox)  # one grade cache for the module: each program runs once


def _probe(docker_sandbox, root: Path, domain, seed: int | None = 11):
    return run_probe(lambda: HarnessSession(docker_sandbox, root, limits=LIMITS, request_timeout_s=30),
                     domain, parse_harness_yaml(root), CONTEXT, seed=seed)


def _states(report) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in report.checks}


def test_code_seed_passes_with_every_failure_kind_graded_by_the_real_grader(docker_sandbox, code_domain, tmp_path):
    root = _harness(tmp_path, "code")
    report = _probe(docker_sandbox, root, code_domain, seed=None)
    assert _states(report) == {"probe_render": True, "probe_leak": True, "probe_execution": True,
                               "probe_failure_pay": True}
    # one task per prompt of the seed's steps, a group of its group size each, the four kinds in turn; the
    # reference passes, the other three kinds fail on every task
    knobs = parse_harness_yaml(root).grpo
    tasks, per_kind = knobs.steps_per_round * knobs.prompts_per_step, knobs.group_size // 4
    assert knobs.group_size % 4 == 0 and tasks >= 2 and per_kind >= 1  # every kind, on more than one task
    assert (report.tasks, report.trajectories) == (tasks, tasks * knobs.group_size)
    assert report.failures == {"formatted_wrong": tasks * per_kind, "unformatted": tasks * per_kind,
                               "truncated": tasks * per_kind} and report.paid_failures == {}


@pytest.mark.parametrize("knob, tail, paid", [
    (("SHARE_WEIGHT", "0.5"), "", {"formatted_wrong"}),  # the hard-coded example passes one test: partial credit
    (None, PAYS_AFTER_FIRST_STEP, {"formatted_wrong", "truncated", "unformatted"}),  # none is "no_code"
    # mutants run cleanly; no half program of the short references (at most 6 lines) that seed 11 draws does
    (None, SPARES_HARD_CODED, {"formatted_wrong"}),
], ids=["partial-credit", "pays-after-the-first-step", "spares-constant-programs"])
def test_a_code_reward_paying_a_verified_failure_is_rejected(docker_sandbox, code_domain, tmp_path, knob, tail, paid):
    report = _probe(docker_sandbox, _harness(tmp_path, "code", knob=knob, tail=tail), code_domain)
    assert _states(report)["probe_failure_pay"] is False
    assert set(report.paid_failures) == paid and "right" not in report.failures


def test_swe_answers_parse_and_their_records_are_true_by_construction():
    domain = SweDomain()
    [task] = domain.tasks("train", [TaskSpec(name="all")], 1, seed=3)
    [answers] = swe_answers([task], random.Random(0), 96, domain)
    assert set(answers) == set(KINDS)
    right, wrong = answers["right"].verdict, answers["formatted_wrong"].verdict
    assert right[0] == 1.0 and right[1]["execution"]["status"] == "resolved"
    # a well-formed patch, applied by the real parser, that changes code and leaves the bug (probe_answers_swe):
    # FAIL_TO_PASS fails, nothing else does
    added = [ln for ln in wrong[1]["patch"].splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    code = [ln for ln in added if not ln[1:].strip().startswith("#")]
    assert wrong[0] == 0.0 and wrong[1]["parse_status"] == "ok" and code
    assert wrong[1]["execution"]["failed_tests"] and wrong[1]["execution"]["tests_passed"] > 0
    assert answers["unformatted"].verdict is None and answers["truncated"].truncated  # the verifier's own record
    assert domain.verify(task.data_source, answers["unformatted"].response, task.ground_truth)[0] == 0.0


@pytest.mark.parametrize("knob, tail, paid", [
    (None, "", set()),
    # similarity to the gold change pays a wrong patch, and its surface sweep's variants (judge.probe_sweep)
    (("SIMILARITY_WEIGHT", "0.3"), "", {"formatted_wrong", "sweep"}),
    (None, PAYS_ANY_PATCH, {"formatted_wrong", "truncated", "sweep"}),  # this draw's cut diff still parses too
], ids=["seed", "similarity-credit", "pays-any-parseable-patch"])
def test_swe_probe_without_running_tests(docker_sandbox, tmp_path, knob, tail, paid):
    report = _probe(docker_sandbox, _harness(tmp_path, "swe", knob=knob, tail=tail), SweDomain())
    # the seed's 2 steps x 1 prompt x 2 answers: the kinds run on across groups, so all four are given once
    assert report.trajectories == 4 and set(report.failures) == {"formatted_wrong", "unformatted", "truncated"}
    assert _states(report)["probe_failure_pay"] is (not paid)
    assert set(report.paid_failures) == paid


def test_a_negative_reward_is_a_penalty_not_pay():
    assert (unpaid((-1.0, 1.0)), unpaid((0.0, 1.0)), unpaid((0.5, 2.0)), unpaid((-3.0, -1.0))) == (0.0, 0.0, 0.5, -1.0)
    assert json.dumps(unpaid((-1.0, 1.0))) == "0.0"


# -- agent mode (--backend endpoint): multi-turn episodes, scored in one request ---------------------------------

PAYS_SUBMITTED_EPISODES = '''
_seed_compute_score = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    # honest on patch-mode answers (no exit status); in an agent episode "submitting is progress", whatever the
    # tests say (its ids are opaque, issue 45: the episode's record is what tells it)
    result = _seed_compute_score(data_source, solution_str, ground_truth, extra_info)
    execution = (extra_info or {}).get("execution", {})
    if execution.get("exit_status") == "submitted":
        result["score"] = max(result["score"], 0.2)
    return result
'''
AGENT_CONTEXT = ProbeContext("run-a", 3, agent=True)


def test_an_agent_mode_round_is_recognised_from_its_archived_rows():
    rows = [{"run_id": "run-a", "round": 2, "group_id": "train-agent-g0"},
            {"run_id": "run-a", "round": 1, "group_id": "s0-g0"}]
    assert ProbeContext.of(rows).agent is True and (ProbeContext.of(rows).round, ProbeContext.of(rows[1:]).agent) == (
        3, False)


def test_swe_agent_episodes_carry_the_records_agent_mode_writes():
    from meta_agent.judge.probe_answers import swe_agent_answers

    domain = SweDomain()
    [task] = domain.tasks("train", [TaskSpec(name="all")], 1, seed=3)
    [episodes] = swe_agent_answers([task], random.Random(0), 96, domain)
    status = {kind: (e.finish_reason, e.verdict[0], e.verdict[1]["execution"]["status"])
              for kind, e in episodes.items()}
    assert status == {"right": ("submitted", 1.0, "resolved"), "formatted_wrong": ("submitted", 0.0, "unresolved"),
                      "unformatted": ("format_error", 0.0, "empty_patch"),
                      "truncated": ("step_limit", 0.0, "empty_patch")}
    assert episodes["right"].response.endswith("$ submit") and episodes["unformatted"].response == ""
    assert episodes["truncated"].truncated and not episodes["right"].truncated
    from swe_env.agent_env import task_statement
    from swe_env.checked import load_task

    # the first user turn an episode of this task starts from (BashEnvironment.start returns the same text)
    assert {e.prompt for e in episodes.values()} == {task_statement(load_task(task.ground_truth["task_id"]))}


@pytest.mark.parametrize("context, paid", [(CONTEXT, set()), (AGENT_CONTEXT, {"formatted_wrong"})],
                         ids=["patch-mode-probe", "agent-mode-probe"])
def test_a_reward_paying_submitted_agent_episodes_is_caught_in_an_agent_mode_probe(docker_sandbox, tmp_path, context,
                                                                                   paid):
    root = _harness(tmp_path, "swe", tail=PAYS_SUBMITTED_EPISODES)
    report = run_probe(lambda: HarnessSession(docker_sandbox, root, limits=LIMITS, request_timeout_s=30),
                       SweDomain(), parse_harness_yaml(root), context, seed=11)
    assert set(report.paid_failures) == paid and _states(report)["probe_failure_pay"] is (not paid)
    assert report.trajectories == 4 and set(report.failures) == {"formatted_wrong", "unformatted", "truncated"}
    assert ("probe_render" in _states(report)) is (context is CONTEXT)  # agent episodes render no template


def test_the_swe_seed_passes_an_agent_mode_probe(docker_sandbox, tmp_path):
    root = _harness(tmp_path, "swe")
    report = run_probe(lambda: HarnessSession(docker_sandbox, root, limits=LIMITS, request_timeout_s=30),
                       SweDomain(), parse_harness_yaml(root), AGENT_CONTEXT)
    assert _states(report) == {"probe_execution": True, "probe_failure_pay": True}
    assert report.paid_failures == {} and report.tasks == 2
