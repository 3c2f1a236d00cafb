"""The real gate on recipes of issue 44 (``test_recipe_agent``'s synthetic world and archive, a seed
harness with the flaw planted): ``whole-question`` prints a sliced question whole, ``unmask-truncation`` trains the
cut completions a masked round lost, ``answer-cue`` ends a base-model prompt on a request for the Answer: line
instead of its cue.  Each branch renders, fits and leaks nothing; its benefit is live, so it merges on probation.
Real git, real Docker."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness_repo.repo import SEEDS_DIR, HarnessRepo

SLICED = "{{ question[:12] }}\n\nEnd with the line \"Answer: <number>\".\n"


def _judged(docker_sandbox, tmp: Path, rule, planted: dict, mode: dict, path: str):
    """``rule``'s branch on a seed harness with ``planted`` committed, its digest naming ``mode``, judged by the
    real gate over the world's archive."""
    from test_recipe_agent import SETTINGS, World, propose

    from meta_agent.backtest import backtest_branch

    world = World(tmp / "world")
    repo = HarnessRepo.create(tmp / "harness", "math")
    repo.commit_files(planted, "the planted flaw")
    digest = dict(world.digests["unanswered"], failure_modes=[mode], truncation_rate=0.125)
    [proposal] = propose(repo, digest, rules=(rule,))
    assert proposal.files_changed == [path], proposal
    return backtest_branch(repo, world.archive, proposal.branch, docker_sandbox, tmp / "backtests",
                           settings=SETTINGS, run_id="unanswered")


def _merged_on_probation(outcome) -> None:
    from test_recipe_agent import gate_view

    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert set(gate_view(outcome)[1].values()) == {"live"}, gate_view(outcome)
    checks = {c["name"]: c["passed"] for c in outcome.report["gate"]["checks"]}
    assert checks["prompt_render"] and checks["prompt_leak"], checks


@pytest.mark.docker
def test_gate_merges_whole_question_on_probation(docker_sandbox, tmp_path: Path) -> None:
    from meta_agent.agents.recipe_question import whole_question

    cut = {"name": "main:question_cut", "source": "main_checks", "severity": "error", "rate": 1.0, "message": "",
           "examples": [], "evidence": {"cut": [{"question": "What is 3 + 4?", "lost": "4"}], "rows": 8}}
    _merged_on_probation(_judged(docker_sandbox, tmp_path, whole_question, {"prompts/user.j2": SLICED}, cut,
                                 "prompts/user.j2"))


@pytest.mark.docker
def test_gate_merges_unmask_truncation_on_probation(docker_sandbox, tmp_path: Path) -> None:
    from meta_agent.agents.recipe_mask import unmask_truncation

    config = yaml.safe_load((SEEDS_DIR / "math" / "harness.yaml").read_text())
    config["grpo"]["mask_truncated"] = True
    unfinished = {"name": "no_final_answer", "source": "digest", "severity": "warning", "rate": 0.75,
                  "message": "", "examples": []}
    _merged_on_probation(_judged(docker_sandbox, tmp_path, unmask_truncation,
                                 {"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, unfinished,
                                 "harness.yaml"))


@pytest.mark.docker
def test_gate_merges_answer_cue_on_probation(docker_sandbox, tmp_path: Path) -> None:
    """12h's base-model template ending on 'Answer:': the cue removed, the line asked for last; the gate merges."""
    from meta_agent.agents.recipe_cue import answer_cue

    cued = {"name": "main:answer_cue", "source": "main_checks", "severity": "error", "rate": 1.0, "message": "",
            "examples": [], "evidence": {"cause": "trailing_cue", "cue": "Answer:", "label": "Answer", "shots": [],
                                         "form": None, "rows": 8, "missing": 1.0, "right_unread": 0.25}}
    _merged_on_probation(_judged(docker_sandbox, tmp_path, answer_cue,
                                 {"prompts/user.j2": "Question: {{ question }}\nAnswer:"}, cued, "prompts/user.j2"))
