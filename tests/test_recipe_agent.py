"""The recipe agent on a real harness repo (real git): each rule's branch, trailers and edit,
and each recipe's branch judged by the real gate (real Docker backtest).

The edited reward.py is exported from the branch and imported here to check that
it does what the rule says (tests may run harness code in-process).  The gate tests
share one synthetic archive (module fixture) with one run per recipe, each run built
so that its real digest shows that recipe's trigger and no other rule's.
"""

from __future__ import annotations

import importlib.util
import json
import uuid
from pathlib import Path
from types import ModuleType

import jinja2
import pytest
import yaml

import harness_repo
from domains.math import KNOB_LIMITS, MathDomain
from harness_repo.contract import HarnessConfig
from harness_repo.repo import HarnessRepo
from meta_agent.agents import AgentContext, Proposal, RecipeAgent
from meta_agent.agents.recipe import TRANSCRIPT
from meta_agent.agents.recipes import (MAX_COMPLETION_CAP, NO_SAFE_EDIT, REMEDIES, RULES, final_answer_prompt,
                                      larger_groups, lower_learning_rate, truncation, verifier_answers)
from meta_agent.backtest import BacktestOutcome, backtest_branch
from meta_agent.config import BacktestSettings
from meta_agent.cost import RoundLimits
from meta_agent.digest import build_digest
from meta_agent.gate import GATE_METRICS, LIVE_METRICS, parse_effect
from meta_agent.heldout_stats import add_heldout_regression
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows


NO_VERIFIER = tuple(r for r in RULES if r is not verifier_answers)
"""The table without verifier-answers, which outranks boxed-answers on the same misses."""


def quiet_digest(round: int = 1, **fields: object) -> dict:
    """A digest with no signal for any rule; ``fields`` override it."""
    digest = {
        "round": round, "n_trajectories": 64, "n_groups": 16, "reward_mean": 0.4, "reward_std": 0.3,
        "verified_mean": 0.45, "heldout_accuracy": 0.4, "zero_variance_share": 0.2,
        "verified_zero_variance_share": 0.2, "truncation_rate": 0.05, "mean_response_tokens": 30.0,
        "no_final_answer_rate": 0.1, "hack_rate": 0.0, "miss_rate": 0.05,
        "disagreements": {"hack": [], "miss": []}, "failure_modes": [],
        "per_task": {"reasoning_gym/chain_sum": {"count": 32, "accuracy": 0.5, "reward": 0.5},
                     "reasoning_gym/products": {"count": 32, "accuracy": 0.4, "reward": 0.4}},
        "trends": {}, "training": {"steps": 4},
    }
    digest.update(fields)
    return digest


BOXED_MISS = {"disagreements": {"hack": [], "miss": [
    {"traj_id": "t1", "prompt": "What is 4 + 8?", "response": "4 plus 8 is \\boxed{12}.",
     "reward": 0.0, "verified": 1.0}]}}


@pytest.fixture()
def repo(tmp_path: Path) -> HarnessRepo:
    return HarnessRepo.create(tmp_path / "harness", "math")


def propose(repo: HarnessRepo, digest: dict, *, history: list | None = None, skills: list | None = None,
            max_candidates: int = 2, rules: tuple = RULES) -> list[Proposal]:
    ctx = AgentContext(round=digest["round"], digest=digest, digest_markdown="", history=history or [],
                       skills=skills or [], repo=repo, worktree_root=repo.path.parent / "worktrees",
                       round_dir=repo.path.parent / "rounds" / str(digest["round"]), max_candidates=max_candidates)
    return RecipeAgent(rules).propose(ctx)


def transcript(repo: HarnessRepo, round: int, part: str = "rules") -> dict[str, dict]:
    data = json.loads((repo.path.parent / "rounds" / str(round) / TRANSCRIPT).read_text())
    return {entry["rule"]: entry for entry in data["rules"]} if part == "rules" else data[part]


def load(repo: HarnessRepo, ref: str, file: str) -> ModuleType:
    """Import ``file`` from an export of ``ref`` under a fresh module name."""
    dest = repo.path.parent / "exports" / uuid.uuid4().hex
    repo.export(ref, dest)
    return load_path(dest / file)


def load_path(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"h_{uuid.uuid4().hex}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_branch(repo: HarnessRepo, proposal: Proposal, branch: str, files: list[str], effects: list[tuple]) -> dict:
    """The branch, its trailers and its changed files match the proposal; returns the trailers."""
    assert proposal.branch == branch and proposal.agent == "recipe"
    iv = repo.intervention(branch)
    assert iv.status == "open"
    assert iv.trailers["Agent"] == ["recipe"]
    assert iv.trailers["Hypothesis"] == [proposal.hypothesis] and iv.hypothesis == proposal.hypothesis
    assert iv.trailers["Predicted-Effect"] == proposal.predicted_effects
    parsed = [parse_effect(e) for e in proposal.predicted_effects]
    assert parsed == effects
    # the gate's rule: at least one benefit, on a metric it or the live check measures
    assert any(d != "unchanged" and m in GATE_METRICS + LIVE_METRICS for m, d in parsed)
    assert repo.changed_paths(branch) == files == proposal.files_changed
    assert repo.contract_violations(branch) == []
    config = repo.config(branch)  # harness.yaml still validates, and the gate's static checks would pass
    MathDomain().check_task_specs(config.tasks)
    assert not list((repo.path.parent / "worktrees").iterdir())  # worktree removed, branch kept
    return iv.trailers


# --- each rule's branch and edit (no Docker) -----------------------------------------------------

def test_boxed_answers_reads_the_final_box_then_stays_quiet(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(miss_rate=0.45, **BOXED_MISS), rules=NO_VERIFIER)
    trailers = check_branch(repo, p, "iv/r1-boxed-answers", ["reward.py"],
                            [("miss_rate", "decrease"), ("reward_auc", "increase")])
    assert trailers["Recipe-Change"] == ["boxed-answers"]
    assert trailers["Trigger"] == ["miss_rate > 0.2 and a failure example contains \\boxed"]
    before, after = load(repo, "main", "reward.py"), load(repo, p.branch, "reward.py")
    verify = MathDomain().verify
    gt = {"answer": "12"}
    assert before.compute_score("reasoning_gym/chain_sum", "so \\boxed{12}", gt)["score"] == 0.0
    # the reward now reads the answer the verifier reads: the box when it comes last, else the line
    for response in ("so \\boxed{12}", "so \\boxed{13}", "x \\boxed{12}\nAnswer: 11", "Answer: 11\nno, \\boxed{12}",
                     "Answer: 12\nor \\boxed{13}", "Answer: 12\n\\boxed{}", "Answer: 12\n\\boxed{13",
                     "Answer: 13\n\\boxed{12}\n\\boxed{", "\\boxed{\\boxed{12}}", "Answer: 12", "no answer at all",
                     "\\boxed{1\n2}"):
        score = after.compute_score("reasoning_gym/chain_sum", response, {"answer": "12"})["score"]
        assert score == verify("reasoning_gym/chain_sum", response, gt)[0], response

    # the branch is still open: the same digest next round proposes nothing new
    history = [iv.__dict__ for iv in repo.interventions()]
    assert propose(repo, quiet_digest(2, miss_rate=0.45, **BOXED_MISS), history=history, rules=NO_VERIFIER) == []
    assert "still open" in transcript(repo, 2)["boxed-answers"]["reason"]
    # once merged, main's reward already reads \boxed: the rule stays quiet even without history
    repo.merge(p.branch, {"Backtest": "test"}, "Merge boxed answers")
    assert propose(repo, quiet_digest(3, miss_rate=0.45, **BOXED_MISS), rules=NO_VERIFIER) == []
    assert "already handles" in transcript(repo, 3)["boxed-answers"]["reason"]


def test_boxed_answers_needs_boxed_examples(repo: HarnessRepo) -> None:
    assert propose(repo, quiet_digest(miss_rate=0.9)) == []
    assert "\\boxed" in transcript(repo, 1)["boxed-answers"]["reason"]


def test_dynamic_sampling_is_the_runtime_knob(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(zero_variance_share=0.75), skills=[{"name": "dynamic-sampling"}])
    trailers = check_branch(repo, p, "iv/r1-dynamic-sampling", ["harness.yaml"],
                            [("signal_share", "increase"), ("kept_share", "decrease")])
    assert trailers["Skill"] == ["dynamic-sampling"] and p.skill == "dynamic-sampling"
    assert repo.config(p.branch).grpo.dynamic_sampling is True
    assert repo.read_file(p.branch, "harness.yaml").startswith("# Seed math harness")  # header comment kept
    # 90% flat groups: dropping them keeps 10% of the batch, under the gate's min_kept_share (0.2);
    # the groups must change instead: larger ones, at the same rollouts per step
    [q] = propose(repo, quiet_digest(2, zero_variance_share=0.9))
    assert "min_kept_share" in transcript(repo, 2)["dynamic-sampling"]["reason"]
    check_branch(repo, q, "iv/r2-larger-groups", ["harness.yaml"], [("zero_variance_share", "decrease")])
    grpo = repo.config(q.branch).grpo
    assert (grpo.group_size, grpo.prompts_per_step) == (8, 2)  # the seed's 4 x 4, doubled and halved
    repo.merge(q.branch, {"Backtest": "test"}, "Merge larger groups")
    assert propose(repo, quiet_digest(3, zero_variance_share=0.9)) == []
    assert "already at least 8" in transcript(repo, 3)["larger-groups"]["reason"]


# responses on which the seed's reward and the trusted verifier disagree, both ways (gold 12)
DISAGREE = {
    "so the answer: 12": "miss",  # an Answer: inside a line: the verifier reads it, the seed needs a line start
    "work\nAnswer: x = 12": "miss", "\\boxed{12}": "miss", "Answer: $12$ ": "pay",
    "Answer: 24/2": "hack",  # unreduced: the seed pays it, the verifier does not
    "Answer: 12\nno wait, \\boxed{13}": "hack",  # the later box is the final answer
    "Answer: 12 or 13": "wrong", "Answer: 13": "wrong", "no answer": "wrong",
}


def test_verifier_answers_pays_what_the_verifier_accepts_both_ways(repo: HarnessRepo) -> None:
    """The digest shows a miss and a hack: one branch whose reward agrees with the verifier on every form."""
    shown = {"disagreements": {"miss": [{"response": "so the answer: 12"}], "hack": [{"response": "Answer: 24/2"}]}}
    [p] = propose(repo, quiet_digest(miss_rate=0.05, hack_rate=0.03, **shown))
    trailers = check_branch(repo, p, "iv/r1-verifier-answers", ["reward.py"],
                            [("miss_rate", "decrease"), ("hack_rate", "decrease"), ("failure_pay", "decrease"),
                             ("reward_auc", "increase")])
    assert trailers["Recipe-Change"] == ["verifier-answers"]
    before, after = load(repo, "main", "reward.py"), load(repo, p.branch, "reward.py")
    verify, gt = MathDomain().verify, {"answer": "12"}
    for response, kind in DISAGREE.items():
        response = response.replace("\\n", "\n")
        seed = before.compute_score("m", response, gt)["score"]
        assert (seed, verify("m", response, gt)[0]) == {"miss": (0.0, 1.0), "hack": (1.0, 0.0), "pay": (1.0, 1.0),
                                                        "wrong": (0.0, 0.0)}[kind], response
        assert after.compute_score("m", response, gt)["score"] == verify("m", response, gt)[0], response
    # a gold answer that is not a number: only an equal one is paid (never looser than the verifier)
    assert after.compute_score("m", "Answer: x + 1", {"answer": "x+1"})["score"] == 0.0
    assert after.compute_score("m", "Answer: x+1", {"answer": "x+1"})["score"] == 1.0
    # a rate without an example is not evidence; once merged the rule stays quiet
    assert propose(repo, quiet_digest(2, miss_rate=0.3)) == []
    assert "no miss or hack example" in transcript(repo, 2)["verifier-answers"]["reason"]
    repo.merge(p.branch, {"Backtest": "test"}, "Merge verifier answers")
    assert propose(repo, quiet_digest(3, miss_rate=0.05, hack_rate=0.03, **shown)) == []
    reason = transcript(repo, 3)["verifier-answers"]["reason"]
    assert "the seed's reward with the verifier's answer rules already" in reason


def test_every_failure_mode_the_digest_names_has_a_recipe_or_says_why_not() -> None:
    """Trusted modes of every domain, every seed's diagnostics and the diagnostics' own failures: each has a
    rule in the table, or a stated reason why no edit is safe."""
    from domains.code_digest import CODE_MODES
    from meta_agent.agents.code_recipes import CODE_RULES
    from meta_agent.agents.recipe import REMEDIES as ALL_REMEDIES
    from meta_agent.agents.swe_recipes import SWE_RULES
    from meta_agent.digest import SWE_MODES, TRUSTED_MODES
    seeds = Path(harness_repo.__file__).parent / "seeds"
    # the names the seeds' diagnostics emit (they build some in loops); each is checked to be in its file
    emitted = {"math": ["format_failures", "truncation", "zero_variance"],
               "code": ["no_code", "truncated_code", "syntax_errors", "missing_function", "load_errors", "timeouts",
                        "resource_limits", "hard_coded_outputs", "print_instead_of_return", "catch_all_exceptions",
                        "early_exit", "forbidden_operations"],
               "swe": ["format_errors", "empty_patch", "patch_does_not_apply", "repeated_commands",
                       "no_test_before_submit", "tampered_grades", "test_edits"]}
    for domain, names in emitted.items():
        text = "".join(f.read_text() for f in (seeds / domain / "diagnostics").glob("*.py"))
        assert [n for n in names if f'"{n}"' not in text] == [], domain
    from meta_agent.main_checks import PREFIX, SEVERITY  # main judged like a candidate: main:<gate check>
    names = {*TRUSTED_MODES, *SWE_MODES, *CODE_MODES, *(n for ns in emitted.values() for n in ns),
             "diagnostics:crashed", "diagnostics:invalid", *(PREFIX + c for c in SEVERITY)}
    rules = {rule.__name__.replace("_", "-") for rule in RULES + SWE_RULES + CODE_RULES}
    for name in sorted(names):
        assert name in ALL_REMEDIES or name in NO_SAFE_EDIT, name
        assert set(ALL_REMEDIES.get(name, ())) <= rules, name
    assert all(set(REMEDIES[m]) <= rules for m in REMEDIES)
    assert set(NO_SAFE_EDIT) == {"diagnostics:crashed", "diagnostics:invalid", "test_edits", "tampered_grades",
                                 "main:prompt_render", "main:prompt_leak",
                                 "main:probe_render", "main:probe_leak"}


def test_a_mode_with_no_safe_edit_is_reported_as_such(repo: HarnessRepo) -> None:
    crashed = {"name": "diagnostics:crashed", "source": "diagnostics", "severity": "error", "rate": 0.0,
               "message": "x", "examples": []}
    assert propose(repo, quiet_digest(failure_modes=[crashed])) == []
    [note] = transcript(repo, 1, "unaddressed")
    assert note.startswith("diagnostics:crashed (error, rate 0.000): no safe edit: the harness's own diagnostics")


def test_truncation_raises_length_within_the_round_limits(repo: HarnessRepo) -> None:
    [p] = propose(repo, quiet_digest(truncation_rate=0.4))
    check_branch(repo, p, "iv/r1-truncation", ["harness.yaml"], [("truncation_rate", "decrease")])
    grpo = repo.config(p.branch).grpo
    assert (grpo.max_completion_length, grpo.mask_truncated) == (48, False)  # 32 x 1.5, truncation not masked
    assert repo.config(p.branch).tasks == repo.config("main").tasks

    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(max_completion_length=MAX_COMPLETION_CAP - 10)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Long completions")
    [p2] = propose(repo, quiet_digest(2, truncation_rate=0.4))
    assert repo.config(p2.branch).grpo.max_completion_length == MAX_COMPLETION_CAP  # bounded, not x1.5

    # a big round: the trusted token limit over its rollouts caps the length below MAX_COMPLETION_CAP
    config["grpo"].update(steps_per_round=16, prompts_per_step=8, group_size=8, max_completion_length=200)
    rollouts = 16 * 8 * 8
    cap = RoundLimits().max_generated_tokens // rollouts
    assert 200 < cap < 300  # the limit, not x1.5, binds
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Big round")
    [p3] = propose(repo, quiet_digest(3, truncation_rate=0.4))
    assert repo.config(p3.branch).grpo.max_completion_length == cap

    config["grpo"]["max_completion_length"] = cap
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "At the cap")
    mode = {"name": "truncation", "source": "trusted", "severity": "warning", "rate": 0.4, "message": "",
            "examples": []}
    assert propose(repo, quiet_digest(4, truncation_rate=0.4, failure_modes=[mode])) == []
    assert f"its cap {cap}" in transcript(repo, 4)["truncation"]["reason"]
    [note] = transcript(repo, 4, "unaddressed")  # the warning is reported, with the rule's reason
    assert note.startswith("truncation (warning, rate 0.400): truncation: ") and f"cap {cap}" in note


def test_final_answer_prompt_asks_without_paying(repo: HarnessRepo) -> None:
    # the seed's user prompt asks already (cool-sampling may answer the rambling instead: tests/test_recipe_gaps)
    assert propose(repo, quiet_digest(3, no_final_answer_rate=0.7), rules=(final_answer_prompt,)) == []
    assert "already asks" in transcript(repo, 3)["final-answer-prompt"]["reason"]
    repo.commit_files({"prompts/user.j2": "{{ question }}\n"}, "No final-answer line")
    [p] = propose(repo, quiet_digest(no_final_answer_rate=0.7))
    check_branch(repo, p, "iv/r1-final-answer-prompt", ["prompts/user.j2"], [("no_final_answer_rate", "decrease")])
    assert repo.read_file(p.branch, "reward.py") == repo.read_file("main", "reward.py")  # no format credit
    template = repo.read_file(p.branch, "prompts/user.j2")
    text = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(template).render(question="What is 2+3?")
    assert text.startswith("What is 2+3?") and "recipe" not in text
    assert text.rstrip().endswith('"Answer: <number>", even when you are unsure: then give your best guess.\n'
                                  'Write nothing after that line.')
    repo.merge(p.branch, {"Backtest": "test"}, "Merge final answer prompt")
    assert propose(repo, quiet_digest(2, no_final_answer_rate=0.7), rules=(final_answer_prompt,)) == []
    assert "already asks" in transcript(repo, 2)["final-answer-prompt"]["reason"]


def test_curriculum_steps_one_knob_within_the_domains_bounds(repo: HarnessRepo) -> None:
    per_task = {"reasoning_gym/chain_sum": {"count": 32, "accuracy": 0.9, "reward": 0.9},
                "reasoning_gym/products": {"count": 4, "accuracy": 1.0, "reward": 1.0}}  # too few to trust
    [p] = propose(repo, quiet_digest(per_task=per_task))
    trailers = check_branch(repo, p, "iv/r1-curriculum-step", ["harness.yaml"],
                            [("verified_zero_variance_share", "decrease")])
    assert trailers["Recipe-Change"] == ["curriculum-step:chain_sum.max_terms=3"]
    tasks = {t.name: t.config for t in repo.config(p.branch).tasks}
    assert tasks["chain_sum"] == {"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 1}
    assert tasks["products"] == {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}
    # merged, the next step stretches the other knob
    repo.merge(p.branch, {"Backtest": "test"}, "Merge curriculum step")
    history = [iv.__dict__ for iv in repo.interventions()]
    [p2] = propose(repo, quiet_digest(2, per_task=per_task), history=history)
    assert {t.name: t.config for t in repo.config(p2.branch).tasks}["chain_sum"]["max_digits"] == 2

    # at the domain's knob limits nothing is raised: the gate would refuse the task mix
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"][0]["config"].update(max_terms=KNOB_LIMITS["_terms"], max_digits=KNOB_LIMITS["_digits"])
    MathDomain().check_task_specs(HarnessConfig.model_validate(config).tasks)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Hardest chain sums")
    assert propose(repo, quiet_digest(3, per_task=per_task), history=history) == []
    assert "lets rise" in transcript(repo, 3)["curriculum-step"]["reason"]


def test_kl_clip_on_reward_up_heldout_down(repo: HarnessRepo) -> None:
    trends = {"reward_mean": {"previous": 0.3, "delta": 0.15}, "heldout_accuracy": {"previous": 0.5, "delta": -0.1}}
    [p] = propose(repo, quiet_digest(trends=trends))
    check_branch(repo, p, "iv/r1-kl-clip", ["harness.yaml"], [("heldout_accuracy", "increase")])
    assert repo.config(p.branch).grpo.beta == pytest.approx(0.02)
    repo.merge(p.branch, {"Backtest": "test"}, "Merge kl")
    [p2] = propose(repo, quiet_digest(2, trends=trends))
    assert repo.config(p2.branch).grpo.epsilon == pytest.approx(0.15)  # beta already on: tighter clip


def test_kl_clip_ignores_a_heldout_drop_within_chance(repo: HarnessRepo) -> None:
    """The first default run merged a KL branch on a drop of 1 task in 34 (+1/-2); the paired interval says noise."""
    trends = {"reward_mean": {"previous": 0.19, "delta": 0.19}, "heldout_accuracy": {"previous": 0.75, "delta": -0.05}}
    noise = {"vs_previous": {"value": -1 / 34, "low": -0.087, "high": 0.072, "n": 34, "gained": 1, "lost": 2}}
    assert propose(repo, quiet_digest(trends=trends, heldout=noise)) == []
    assert "within chance" in transcript(repo, 1)["kl-clip"]["reason"]
    real = {"vs_previous": {"value": -12 / 128, "low": -0.15, "high": -0.04, "n": 128, "gained": 0, "lost": 12}}
    [p] = propose(repo, quiet_digest(2, trends=trends, heldout=real))
    assert p.branch == "iv/r2-kl-clip"


def _regressed(value: float, low: float, high: float, lost: int, gained: int) -> dict:
    """A digest whose exam changed from the previous round's by ``value`` [low, high] over 128 tasks."""
    digest = quiet_digest(heldout={"vs_previous": {"value": value, "low": low, "high": high, "n": 128,
                                                   "gained": gained, "lost": lost}})
    add_heldout_regression(digest)
    return digest


def test_a_heldout_drop_beyond_chance_is_named_and_answered_with_smaller_steps(repo: HarnessRepo) -> None:
    """The lr-too-high flaw's live symptom: the exam falls from one round to the next (reward may still rise)."""
    noise = _regressed(-2 / 128, -0.06, 0.03, lost=5, gained=3)
    assert [m["name"] for m in noise["failure_modes"]] == []  # within chance: nothing named, nothing proposed
    assert propose(repo, noise, rules=(lower_learning_rate,)) == []
    digest = _regressed(-12 / 128, -0.15, -0.04, lost=14, gained=2)
    [mode] = digest["failure_modes"]
    assert (mode["name"], mode["severity"], mode["source"]) == ("heldout_regression", "error", "trusted")
    assert mode["rate"] == pytest.approx(12 / 128) and "14 lost, 2 gained" in mode["message"]
    assert "heldout_regression" in REMEDIES and "lower-learning-rate" in REMEDIES["heldout_regression"]

    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    seed_rate = config["grpo"]["learning_rate"]
    config["grpo"]["learning_rate"] = 2e-4  # ten times the seed's (the planted flaw)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "A large learning rate")
    [p] = propose(repo, digest, rules=(lower_learning_rate,))
    check_branch(repo, p, "iv/r1-lower-learning-rate", ["harness.yaml"], [("heldout_accuracy", "increase")])
    # by the share of the exam lost (x(1 - lost), at most x0.5), never aimed at the seed's rate
    assert repo.config(p.branch).grpo.learning_rate == pytest.approx(1e-4) != seed_rate
    repo.merge(p.branch, {"Backtest": "test"}, "Merge smaller steps")
    [p2] = propose(repo, dict(digest, round=2), rules=(lower_learning_rate,))
    assert repo.config(p2.branch).grpo.learning_rate == pytest.approx(5e-5)



def test_a_fallen_exam_is_answered_before_the_symptoms_the_fall_causes(repo: HarnessRepo) -> None:
    """lr-too-high, live seed 2: the collapsed policy truncated 91% of its answers, so truncation (a root cause
    of equal strength, earlier in rule order) took harness.yaml and lower-learning-rate was deferred; round 2
    trained at the same rate again.  The fall's remedy goes first; without a fall the order is as before."""
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["learning_rate"] = 2e-4
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "A large learning rate")
    fell = _regressed(-20 / 128, -0.22, -0.09, lost=20, gained=0) | {"truncation_rate": 0.91}
    proposals = propose(repo, fell, rules=(truncation, lower_learning_rate))
    assert [p.branch for p in proposals] == ["iv/r1-lower-learning-rate"]
    assert transcript(repo, 1)["truncation"]["reason"].startswith("deferred: harness.yaml already edited by "
                                                                 "lower-learning-rate")
    steady = quiet_digest(2, truncation_rate=0.91)
    assert [p.branch for p in propose(repo, steady, rules=(truncation, lower_learning_rate))] == ["iv/r2-truncation"]

def test_round_0_pairs_its_exam_with_the_base_policy() -> None:
    """Round 0 has no previous round: a fall below the untrained policy's exam is the regression (a learning rate
    that wrecks the policy in its first round); in later rounds only the previous round counts."""
    fall = {"value": -20 / 128, "low": -0.23, "high": -0.09, "n": 128, "gained": 1, "lost": 21}
    first = quiet_digest(0, heldout={"vs_base": fall, "vs_previous": None})
    add_heldout_regression(first)
    [mode] = first["failure_modes"]
    assert mode["name"] == "heldout_regression" and "from the untrained base policy" in mode["message"]
    later = quiet_digest(2, heldout={"vs_base": fall, "vs_previous": {**fall, "value": 0.0, "low": -0.05,
                                                                      "high": 0.05, "lost": 3, "gained": 3}})
    add_heldout_regression(later)
    assert later["failure_modes"] == []
    rose = quiet_digest(0, heldout={"vs_base": {**fall, "value": 0.1, "low": 0.03, "high": 0.17}, "vs_previous": None})
    add_heldout_regression(rose)
    assert rose["failure_modes"] == []


def test_strongest_signals_win_and_history_blocks_repeats(repo: HarnessRepo) -> None:
    loud = quiet_digest(miss_rate=0.3, zero_variance_share=0.75, truncation_rate=0.8, no_final_answer_rate=0.6,
                        **BOXED_MISS)
    ps = propose(repo, loud)
    # root causes first (truncation 0.73, verifier-answers 0.3, boxed-answers 0.125), then the symptoms
    # (dynamic-sampling and larger-groups 0.5); boxed-answers also edits reward.py, so it waits: two such
    # branches would conflict on merge.  The seed's user prompt already asks for the final line.
    assert [p.branch for p in ps] == ["iv/r1-truncation", "iv/r1-verifier-answers"]
    assert sorted(iv.branch for iv in repo.interventions()) == sorted(p.branch for p in ps)
    log = transcript(repo, 1)
    assert log["dynamic-sampling"]["fired"] and log["dynamic-sampling"]["reason"] == "outranked (max_candidates=2)"
    assert log["boxed-answers"]["fired"] and "outranked" in log["boxed-answers"]["reason"]
    assert not log["final-answer-prompt"]["fired"] and "already asks" in log["final-answer-prompt"]["reason"]
    assert not log["curriculum-step"]["fired"] and "branch" not in log["dynamic-sampling"]
    # both winners merge one after the other without conflict
    repo.merge("iv/r1-truncation", {"Backtest": "test"}, "Merge truncation")
    repo.merge("iv/r1-verifier-answers", {"Backtest": "test"}, "Merge verifier answers")
    assert repo.config("main").grpo.max_completion_length == 48

    tried = [{"branch": "iv/r0-dynamic-sampling", "status": "rejected",
              "trailers": {"Recipe-Change": ["dynamic-sampling:grpo.dynamic_sampling=true"]}}]
    knob_only = tuple(r for r in RULES if r is not larger_groups)  # larger groups would answer instead
    ps = propose(repo, quiet_digest(2, zero_variance_share=0.75), history=tried, rules=knob_only)
    assert ps == [] and "already tried" in transcript(repo, 2)["dynamic-sampling"]["reason"]
    # the filter-based change of older rounds is another change: it does not block the knob
    other = [{"branch": "iv/r0-dynamic-sampling", "status": "rejected",
              "trailers": {"Recipe-Change": ["dynamic-sampling"]}}]
    assert [p.branch for p in propose(repo, quiet_digest(3, zero_variance_share=0.75), history=other,
                                      rules=knob_only)] == \
        ["iv/r3-dynamic-sampling"]


FILTER_DROPS = {"name": "filter_drops", "source": "trusted", "severity": "warning", "rate": 0.75,
                "message": "1 - kept_share = 0.750", "examples": []}
# drops everything the reward does not pay: every kept group is flat, and paid failures stay
KEEP_PAID = '''
def keep_trajectory(traj):
    """Only paid answers are worth learning from."""
    return (traj.get("reward") or 0.0) >= 0.5


def keep_group(group):
    return True
'''


def test_loosen_filters_overrides_a_filter_that_keeps_too_little(repo: HarnessRepo) -> None:
    # the seed's filters keep everything: a low kept_share is not theirs, and the round says so
    assert propose(repo, quiet_digest(kept_share=0.25, failure_modes=[FILTER_DROPS])) == []
    assert "mask_truncated is off" in transcript(repo, 1)["loosen-filters"]["reason"]
    [note] = transcript(repo, 1, "unaddressed")
    assert note.startswith("filter_drops (warning, rate 0.750): loosen-filters: main's filters keep every")

    repo.commit_files({"filters.py": KEEP_PAID}, "Train only on paid answers")
    assert propose(repo, quiet_digest(2, kept_share=0.5)) == []  # half kept is not too little
    assert propose(repo, quiet_digest(3)) == [] and "unknown" in transcript(repo, 3)["loosen-filters"]["reason"]
    [p] = propose(repo, quiet_digest(4, kept_share=0.25, failure_modes=[FILTER_DROPS]))
    trailers = check_branch(repo, p, "iv/r4-loosen-filters", ["filters.py"], [("kept_share", "increase")])
    assert trailers["Trigger"] == ["kept_share < 0.5"]
    assert transcript(repo, 4, "unaddressed") == []
    before, after = load(repo, "main", "filters.py"), load(repo, p.branch, "filters.py")
    wrong, right = {"reward": 0.0, "response": "Answer: 3"}, {"reward": 1.0, "response": "Answer: 4"}
    assert [before.keep_trajectory(t) for t in (wrong, right)] == [False, True]
    assert [after.keep_trajectory(t) for t in (wrong, right)] == [True, True] and after.keep_group([wrong])
    assert KEEP_PAID.strip() in repo.read_file(p.branch, "filters.py")  # overridden, not deleted
    repo.merge(p.branch, {"Backtest": "test"}, "Merge loosen filters")
    assert propose(repo, quiet_digest(5, kept_share=0.25)) == []  # main keeps everything now


def test_loosen_filters_turns_truncation_masking_off(repo: HarnessRepo) -> None:
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["mask_truncated"] = True
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Mask truncated completions")
    [p] = propose(repo, quiet_digest(kept_share=0.1))
    check_branch(repo, p, "iv/r1-loosen-filters", ["harness.yaml"], [("kept_share", "increase")])
    assert repo.config(p.branch).grpo.mask_truncated is False
    assert repo.config(p.branch).grpo.model_dump() == repo.config("main").grpo.model_dump() | {"mask_truncated": False}


def test_swe_seed_filter_is_loosened_into_a_valid_branch(tmp_path: Path) -> None:
    """The SWE seed masks agent runs that stopped on a limit; at a low kept_share the recipe overrides it."""
    repo = HarnessRepo.create(tmp_path / "harness", "swe")
    [p] = propose(repo, quiet_digest(kept_share=0.2, per_task={}))
    assert p.branch == "iv/r1-loosen-filters" and repo.changed_paths(p.branch) == ["filters.py"]
    assert repo.contract_violations(p.branch) == []
    limit = {"extra_info": {"execution": {"exit_status": "step_limit"}}}
    assert not load(repo, "main", "filters.py").keep_trajectory(limit)
    assert load(repo, p.branch, "filters.py").keep_trajectory(limit)


def test_no_signal_no_proposal(repo: HarnessRepo) -> None:
    main = repo.head("main")
    assert propose(repo, quiet_digest()) == []
    empty = quiet_digest(2, **{k: None for k in ("miss_rate", "zero_variance_share", "truncation_rate",
                                                  "no_final_answer_rate", "verified_mean")}, per_task={})
    assert propose(repo, empty) == []
    assert repo.interventions() == [] and repo.head("main") == main
    assert not any(entry["fired"] for entry in transcript(repo, 1).values())
    assert len(transcript(repo, 2)) == len(RULES)
    assert transcript(repo, 1, "unaddressed") == []  # nothing to report either
    HarnessConfig.model_validate(yaml.safe_load(repo.read_file("main", "harness.yaml")))


# --- every recipe's branch judged by the real gate on a synthetic archive (Docker) ----------------

GROUPS = 32  # per round of a scenario; the backtest samples this many (all of a one-round run)
SETTINGS = BacktestSettings(sample_groups=GROUPS, max_sample_groups=GROUPS, timeout_s=60, memory_mb=256, pids=32)
RESPONSE = {  # behaviour -> (response given the answer, truncated)
    "R": (lambda a: f"Let me compute.\nAnswer: {a}", False),  # right, Answer line: paid by the seed
    "B": (lambda a: f"Let me compute. The result is \\boxed{{{a}}}.", False),  # right, boxed only: a miss
    "W": (lambda a: f"Let me compute.\nAnswer: {int(a) + 1}", False),  # wrong
    "N": (lambda a: "Let me compute. I think the numbers add up but I am not sure.", False),  # no final answer
    "T": (lambda a: "Let me compute. First I add the first two numbers and then I carry the", True),
    "H": (lambda a: f"Let me compute.\nAnswer: {2 * int(a)}/2", False),  # unreduced: the seed pays, the verifier not
    "I": (lambda a: f"Let me compute, so the answer: {a}", False),  # right, inline: the verifier reads it, the seed not
}
RR, RB = ("R",) * 4, ("R", "R", "R", "W")
# run -> one list of per-group behaviours per round (groups 0..15 chain_sum, 16..31 products), and the
# held-out accuracy the round's eval reports.  Each run shows one recipe's trigger and no other's.
SCENARIOS: dict[str, list[tuple[list[tuple[str, ...]], float]]] = {
    "boxed": [([("R", "B", "W", "N"), ("R", "B", "B", "W"), ("R", "W", "B", "T"), ("R", "R", "B", "W")] * 8, 0.4)],
    "flat": [(([("W", "N", "W", "T")] * 3 + [RR] * 2 + [("R", "W", "N", "W")] * 3) * 4, 0.4)],
    "long": [([("R", "T", "W", "W"), ("R", "R", "T", "W"), ("R", "T", "T", "W"), ("R", "T", "W", "N")] * 8, 0.4)],
    "unanswered": [([("R", "N", "N", "W"), ("R", "N", "N", "N"), ("R", "W", "N", "T"), ("R", "N", "W", "N")] * 8,
                    0.4)],
    "solved": [([RR, RB] * 8 + [("R", "W", "W", "N"), ("R", "R", "W", "N")] * 8, 0.4)],
    "drift": [([("R", "W", "W", "N"), ("R", "W", "N", "W")] * 16, 0.5),
              ([("R", "R", "W", "N"), ("R", "W", "R", "N")] * 16, 0.4)],
    "hacked": [([("R", "H", "W", "N"), ("R", "W", "H", "W")] * 16, 0.4)],
    "disagree": [([("R", "I", "W", "H"), ("R", "W", "I", "N")] * 16, 0.4)],
    # main's KEEP_PAID keeps the paid R and H answers: 4 of every 16 trajectories
    "filtered": [([("R", "W", "N", "W"), ("H", "W", "W", "N"), ("R", "R", "W", "N"), ("W", "N", "T", "W")] * 8, 0.4)],
}


def scenario_rows(run_id: str, round: int, plan: list[tuple[str, ...]], reward: ModuleType) -> list[dict]:
    """Archive rows of real reasoning-gym questions answered as ``plan`` says, verified and rewarded by the seed."""
    verify = MathDomain().verify
    rows = synthetic_math_rows(run_id, round, len(plan), 4, seed=7, verify=verify)
    for row in rows:
        behaviour = plan[int(row["group_id"][1:])][row["sample_idx"]]
        answer = json.loads(row["ground_truth"])["answer"]
        make, truncated = RESPONSE[behaviour]
        response = make(answer)
        score, info = verify(row["data_source"], response, json.loads(row["ground_truth"]))
        row.update(response=response, truncated=truncated, finish_reason="length" if truncated else "stop",
                   response_tokens=len(response.split()), verified=score, verifier_info=json.dumps(info),
                   reward=reward.compute_score(row["data_source"], response, json.loads(row["ground_truth"]))["score"],
                   reward_info=json.dumps({"behaviour": behaviour}),
                   messages=json.dumps([{"role": "user", "content": row["prompt"]},
                                        {"role": "assistant", "content": response}]))
    return rows


class World:
    """The shared archive, each run's latest digest, and where backtests write."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.archive = Archive(root / "archive")
        self.digests: dict[str, dict] = {}
        seed_reward = load_path(Path(harness_repo.__file__).parent / "seeds" / "math" / "reward.py")
        for run_id, rounds in SCENARIOS.items():
            previous: list[dict] = []
            for n, (plan, heldout) in enumerate(rounds):
                rows = scenario_rows(run_id, n, plan, seed_reward)
                self.archive.append_round(run_id, n, rows)
                digest = build_digest(n, rows, metrics=[], findings=[], eval={"heldout_accuracy": heldout},
                                      previous=previous)
                previous.append(digest)
            self.digests[run_id] = previous[-1]

    def propose_and_backtest(self, run_id: str, sandbox, tmp: Path, rules: tuple = RULES,
                             files: dict[str, str] | None = None) -> tuple[Proposal, BacktestOutcome]:
        """The recipe agent on a fresh seed repo (``files`` committed on its main) over ``run_id``'s digest,
        then the gate over its archive."""
        repo = HarnessRepo.create(tmp / "harness", "math")
        if files:
            repo.commit_files(files, "The starting harness")
        [proposal] = propose(repo, self.digests[run_id], rules=rules)
        outcome = backtest_branch(repo, self.archive, proposal.branch, sandbox, self.root / "backtests",
                                  settings=SETTINGS, run_id=run_id)
        assert outcome.report["sample"]["groups"] == GROUPS
        return proposal, outcome


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> World:
    return World(tmp_path_factory.mktemp("recipe-world"))


def count(run_id: str, behaviours: str) -> int:
    return sum(b in behaviours for plan, _ in SCENARIOS[run_id] for group in plan for b in group)


def gate_view(outcome: BacktestOutcome) -> tuple[dict, dict]:
    gate = outcome.report["gate"]
    return gate["metrics"], {e["text"].split(":")[0]: e["status"] for e in gate["effects"]}


@pytest.mark.docker
def test_gate_merges_boxed_answers(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("boxed", docker_sandbox, tmp_path, rules=NO_VERIFIER)
    assert p.branch == "iv/r0-boxed-answers"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", False), outcome.reasons
    metrics, effects = gate_view(outcome)
    assert effects == {"miss_rate decrease": "held", "reward_auc increase": "held"}
    # every verified success is R or B: main misses the boxed ones, the candidate none
    assert metrics["miss_rate"]["main"] == pytest.approx(count("boxed", "B") / count("boxed", "RB"))
    assert metrics["miss_rate"]["candidate"] == 0.0
    assert metrics["failure_pay"]["candidate"] == 0.0 and metrics["hack_rate"]["candidate"] == 0.0


@pytest.mark.docker
def test_gate_merges_dynamic_sampling(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("flat", docker_sandbox, tmp_path)
    assert p.branch == "iv/r0-dynamic-sampling"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", False), outcome.reasons
    metrics, effects = gate_view(outcome)
    assert effects == {"signal_share increase": "held", "kept_share decrease": "held"}
    plan = SCENARIOS["flat"][0][0]
    mixed = sum(len({b == "R" for b in group}) == 2 for group in plan) / len(plan)  # groups with reward variance
    assert metrics["signal_share"]["main"] == pytest.approx(mixed) and metrics["signal_share"]["candidate"] == 1.0
    assert metrics["kept_share"]["candidate"] == pytest.approx(mixed)
    assert metrics["reward_auc"]["delta"] == 0.0  # the same rewards: only the keep-mask moved


@pytest.mark.docker
def test_gate_merges_truncation_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("long", docker_sandbox, tmp_path)
    assert p.branch == "iv/r0-truncation"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"truncation_rate decrease": "live"}
    # the seed's round (3 steps x 4 prompts x 4 samples) at 1.5 x its 32 tokens
    assert outcome.report["cost"]["cost"]["generated_tokens"] == 3 * 4 * 4 * int(32 * 1.5)


@pytest.mark.docker
def test_gate_merges_final_answer_prompt_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("unanswered", docker_sandbox, tmp_path,
                                            files={"prompts/user.j2": "{{ question }}\n"})  # asks for no line
    assert p.branch == "iv/r0-final-answer-prompt"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"no_final_answer_rate decrease": "live"}
    checks = {c["name"]: c for c in outcome.report["gate"]["checks"]}
    assert all(checks[name]["passed"] for name in ("prompt_render", "prompt_length", "prompt_leak", "failure_pay"))


@pytest.mark.docker
def test_gate_merges_curriculum_step_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("solved", docker_sandbox, tmp_path)
    assert p.branch == "iv/r0-curriculum-step"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"verified_zero_variance_share decrease": "live"}


@pytest.mark.docker
def test_gate_merges_kl_clip_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("drift", docker_sandbox, tmp_path)
    assert p.branch == "iv/r1-kl-clip"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"heldout_accuracy increase": "live"}


@pytest.mark.docker
def test_gate_merges_verifier_answers_over_the_seeds_gaps(world: World, docker_sandbox, tmp_path: Path) -> None:
    """The seed misses an Answer: inside a line (I) and pays an unreduced fraction (H); the branch pays what the
    verifier pays, so the gate sees misses and hacks go to 0 and the reward's AUC rise."""
    digest = world.digests["disagree"]
    assert digest["hack_rate"] == pytest.approx(count("disagree", "H") / count("disagree", "HWN"))
    assert digest["miss_rate"] == pytest.approx(count("disagree", "I") / count("disagree", "RI"))
    p, outcome = world.propose_and_backtest("disagree", docker_sandbox, tmp_path)
    assert p.branch == "iv/r0-verifier-answers"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", False), outcome.reasons
    metrics, effects = gate_view(outcome)
    assert effects == {"miss_rate decrease": "held", "hack_rate decrease": "held", "failure_pay decrease": "held",
                       "reward_auc increase": "held"}
    assert metrics["miss_rate"]["candidate"] == 0.0 and metrics["hack_rate"]["candidate"] == 0.0


@pytest.mark.docker
def test_gate_merges_larger_groups_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    p, outcome = world.propose_and_backtest("flat", docker_sandbox, tmp_path, rules=(larger_groups,))
    assert p.branch == "iv/r0-larger-groups"
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"zero_variance_share decrease": "live"}


@pytest.mark.docker
def test_gate_merges_cool_sampling_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    """main samples at 1.3 and most responses end without an answer line."""
    from meta_agent.agents.recipes import cool_sampling
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["temperature"] = 1.3
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "A hot sampler")
    # most responses stop without a final line beyond those the budget cut (this archive's own share, 0.5, is
    # at the threshold: a stronger round's digest)
    digest = dict(world.digests["unanswered"], no_final_answer_rate=0.8)
    [p] = propose(repo, digest, rules=(cool_sampling,))
    rambling = digest["no_final_answer_rate"] - (digest.get("truncation_rate") or 0.0)
    assert p.branch == "iv/r0-cool-sampling"  # by the rambling share, not back to the seed's 0.7
    assert repo.config(p.branch).grpo.temperature == round(1.0 * (1 - rambling / 2), 2) < 1.0  # from 1 at most
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"no_final_answer_rate decrease": "live"}


@pytest.mark.docker
def test_gate_merges_warm_sampling_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    """main samples at 0.05 and half the group members repeat another word for word (the archive's evidence)."""
    from meta_agent.agents.recipes import warm_sampling
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["temperature"] = 0.05
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "A cold sampler")
    digest = dict(world.digests["unanswered"], evidence={"identical_share": 0.375})
    [p] = propose(repo, digest, rules=(warm_sampling,))
    assert p.branch == "iv/r0-warm-sampling" and repo.config(p.branch).grpo.temperature == 0.76  # 0.05 + 0.95 x 0.75
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"zero_variance_share decrease": "live"}


@pytest.mark.docker
def test_gate_merges_lower_learning_rate_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    """main trains at 2e-4 and the exam fell beyond chance: the seed's rate is restored, on probation (the exam
    of the next round is the only place its benefit shows)."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["learning_rate"] = 2e-4
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "A large learning rate")
    digest = dict(world.digests["unanswered"], round=1, heldout={"vs_previous": {
        "value": -12 / 128, "low": -0.15, "high": -0.04, "n": 128, "gained": 2, "lost": 14}, "trained_from": 0})
    add_heldout_regression(digest)
    [p] = propose(repo, digest, rules=(lower_learning_rate,))
    assert p.branch == "iv/r1-lower-learning-rate" and repo.config(p.branch).grpo.learning_rate < 2e-4
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"heldout_accuracy increase": "live"}


@pytest.mark.docker
def test_gate_merges_exam_mix_on_probation(world: World, docker_sandbox, tmp_path: Path) -> None:
    """main trains chain_sum at 0.08 of products' weight while the exam weighs both alike (``main:task_mix``): the
    weights go to the exam's shares, on probation (only the next round's exam can show the benefit)."""
    from meta_agent.agents.recipe_mix import exam_mix
    from meta_agent.main_checks import add_main_findings
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"][0]["weight"] = 0.08
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "A one-sided mix")
    digest = dict(world.digests["unanswered"])
    add_main_findings(digest, [], (0.0, 1.0), train_tasks=config["tasks"], exam_specs=MathDomain().eval_specs)
    [p] = propose(repo, digest, rules=(exam_mix,))
    assert p.branch.endswith("-exam-mix") and [t.weight for t in repo.config(p.branch).tasks] == [0.5, 0.5]
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"heldout_accuracy increase": "live"}


@pytest.mark.docker
def test_gate_merges_restore_diagnostic_as_bookkeeping(world: World, docker_sandbox, tmp_path: Path) -> None:
    """main's truncation diagnostic reports nothing while the trusted digest sees truncation: main's own is
    calibrated to the trusted measure (never the seed's restored); rewards and keep masks equal main's, so it
    merges without a benefit prediction and not on probation."""
    from meta_agent.agents.recipes import restore_diagnostic
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    seed = repo.read_file("main", "diagnostics/truncation.py")
    repo.commit_files({"diagnostics/truncation.py": "def diagnose(rollouts):\n    return []\n"}, "Silence it")
    digest = dict(world.digests["long"])
    digest["failure_modes"] = [m for m in digest["failure_modes"]
                               if not (m["name"] == "truncation" and m["source"] == "diagnostics")]
    assert any(m["name"] == "truncation" and m["source"] == "trusted" for m in digest["failure_modes"])
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    repaired = repo.read_file(p.branch, "diagnostics/truncation.py")
    assert p.branch == "iv/r0-restore-diagnostic" and repaired != seed and repaired.startswith(
        "def diagnose(rollouts):\n    return []\n") and "_uncalibrated_diagnose = diagnose" in repaired
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="long")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", False), outcome.reasons


LENIENT_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": 1.0 if "Answer:" in solution_str else 0.0}
'''


@pytest.mark.docker
def test_gate_merges_seed_reward_over_a_lenient_one(world: World, docker_sandbox, tmp_path: Path) -> None:
    """main pays any Answer: line; the recipe puts the seed's exact-answer reward back and the gate sees the
    paid failures go: main pays every W and H failure, the seed only the H ones (its unreduced-fraction gap)."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    seed = repo.read_file("main", "reward.py")
    repo.commit_files({"reward.py": LENIENT_REWARD}, "A reward that pays the format")
    [p] = propose(repo, world.digests["hacked"], rules=NO_VERIFIER)  # verifier-answers outranks it
    check_branch(repo, p, "iv/r0-seed-reward", ["reward.py"], [("hack_rate", "decrease"), ("failure_pay", "decrease")])
    assert repo.read_file(p.branch, "reward.py") == seed
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests-seed-reward",
                              settings=SETTINGS, run_id="hacked")
    metrics, effects = gate_view(outcome)
    assert effects == {"hack_rate decrease": "held", "failure_pay decrease": "held"}
    assert metrics["hack_rate"]["main"] == pytest.approx(count("hacked", "HW") / count("hacked", "HWN"))
    assert metrics["hack_rate"]["candidate"] == pytest.approx(count("hacked", "H") / count("hacked", "HWN"))
    assert outcome.decision == "merge", outcome.reasons


@pytest.mark.docker
def test_gate_merges_loosen_filters_over_a_filter_keeping_only_paid(world: World, docker_sandbox,
                                                                    tmp_path: Path) -> None:
    """main trains only on paid answers (R and H): every kept group is flat, and the paid failures H are all
    the failures it keeps.  The trainer counted 4 kept of every 16; the recipe keeps all, and the gate sees
    the kept share rise and the hack rate stay H / (H + W + N + T) (paid failures that train, per verified
    failure of the sample: the same H train in both arms).  It still rejects: with main's reward paying H,
    every group without a verified success that the loosened filter lets in pays H and not W, N, T, a spread
    among failures that GRPO turns into a push toward H (the flat-failure rule, margin 0).  The recipe merges
    only once the reward stops paying failures (verifier-answers first)."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"filters.py": KEEP_PAID}, "Train only on paid answers")
    rows = world.archive.rows(run_id="filtered", round=0, split="train")
    paid = count("filtered", "RH")
    steps = [{"harness/kept_trajectories": paid / 2}, {"harness/kept_trajectories": paid / 2}]
    digest = build_digest(0, rows, metrics=steps, findings=[], eval={"heldout_accuracy": 0.4}, previous=[])
    assert digest["kept_share"] == pytest.approx(paid / len(rows)) == pytest.approx(4 / 16)
    [p] = propose(repo, digest, rules=NO_VERIFIER)  # the paid H answers would also draw verifier-answers
    check_branch(repo, p, "iv/r0-loosen-filters", ["filters.py"], [("kept_share", "increase")])
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests-filters",
                              settings=SETTINGS, run_id="filtered")
    metrics, effects = gate_view(outcome)
    assert effects == {"kept_share increase": "held"}
    assert metrics["kept_share"]["main"] == pytest.approx(4 / 16) and metrics["kept_share"]["candidate"] == 1.0
    hacks = count("filtered", "H") / count("filtered", "HWNT")
    assert (metrics["hack_rate"]["main"], metrics["hack_rate"]["candidate"]) == (pytest.approx(hacks),) * 2
    assert metrics["signal_share"]["main"] == 0.0
    assert metrics["failure_spread"]["candidate"] > 0  # main keeps no failure group it does not pay alike
    assert outcome.decision == "reject"
    assert [r for r in outcome.reasons if r.startswith("failure_spread")], outcome.reasons


GATE_TESTS = {  # recipe -> its test on a seed harness judged by the real gate
    "boxed-answers": test_gate_merges_boxed_answers, "dynamic-sampling": test_gate_merges_dynamic_sampling,
    "truncation": test_gate_merges_truncation_on_probation,
    "final-answer-prompt": test_gate_merges_final_answer_prompt_on_probation,
    "curriculum-step": test_gate_merges_curriculum_step_on_probation, "kl-clip": test_gate_merges_kl_clip_on_probation,
    "seed-reward": test_gate_merges_seed_reward_over_a_lenient_one,
    "verifier-answers": test_gate_merges_verifier_answers_over_the_seeds_gaps,
    "larger-groups": test_gate_merges_larger_groups_on_probation,
    "loosen-filters": test_gate_merges_loosen_filters_over_a_filter_keeping_only_paid,
    "cool-sampling": test_gate_merges_cool_sampling_on_probation,
    "warm-sampling": test_gate_merges_warm_sampling_on_probation,
    "restore-diagnostic": test_gate_merges_restore_diagnostic_as_bookkeeping,
    "lower-learning-rate": test_gate_merges_lower_learning_rate_on_probation,
    "exam-mix": test_gate_merges_exam_mix_on_probation,
}


ADMITTED_BEFORE_TRAINING = {  # recipe -> the test where a refused round 0's admission check judges it
    "fit-limit": (Path(__file__).parent / "test_train_refused_loop.py",
                  "test_round_0_refused_by_training_is_repaired_by_the_agent_and_then_trains"),
}


GATE_TESTS_ELSEWHERE = {  # recipe -> the test (in another file) where the real gate judges its branch
    "worked-example": (Path(__file__).parent / "test_worked_example.py",
                       "test_gate_merges_worked_example_and_answer_last_on_probation"),
    "answer-last": (Path(__file__).parent / "test_worked_example.py",
                    "test_gate_merges_worked_example_and_answer_last_on_probation"),
    "unstall": (Path(__file__).parent / "test_stall.py", "test_gate_merges_unstall_on_probation"),
    "whole-question": (Path(__file__).parent / "test_a1_gate.py", "test_gate_merges_whole_question_on_probation"),
    "unmask-truncation": (Path(__file__).parent / "test_a1_gate.py", "test_gate_merges_unmask_truncation_on_probation"),
    "answer-cue": (Path(__file__).parent / "test_a1_gate.py", "test_gate_merges_answer_cue_on_probation"),
    "resize-update": (Path(__file__).parent / "test_a3_update.py", "test_gate_merges_resize_update_on_probation"),
    "shown-answer": (Path(__file__).parent / "test_a1_shown.py", "test_gate_merges_shown_answer_on_probation"),
    "example-format": (Path(__file__).parent / "test_e1_example_format.py",
                       "test_gate_merges_example_format_on_probation"),
    "slice-mix": (Path(__file__).parent / "test_k38_slice.py", "test_gate_merges_slice_mix_on_probation"),
    "strip-markup": (Path(__file__).parent / "test_r3_trainer_prompts.py", "test_gate_merges_strip_markup_on_probation"),  # noqa: E501
}


def test_every_recipe_has_a_gate_test() -> None:
    """A rule added to the recipe table without a branch judged by the gate on a seed harness fails here (or, for
    a limit training refused, by the pre-train admission check, ``meta_agent.phases.refused``, in a real loop)."""
    assert {rule.__name__.replace("_", "-") for rule in RULES} == set(GATE_TESTS) | set(ADMITTED_BEFORE_TRAINING) \
        | set(GATE_TESTS_ELSEWHERE)
    for path, name in [*ADMITTED_BEFORE_TRAINING.values(), *GATE_TESTS_ELSEWHERE.values()]:
        assert f"@pytest.mark.docker\ndef {name}(" in path.read_text(), name
    assert all(getattr(test, "pytestmark", None) for test in GATE_TESTS.values())  # each runs the Docker gate
