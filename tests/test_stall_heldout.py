"""Held-out attacks on helper a2's defences, written after the code froze (2712a06), run once: the stalled-policy
finding (``meta_agent.stall_checks``, recipe ``unstall``), task mixes compared by the kinds names draw
(``main_checks.task_mix_check``) and loosen-filters judging masking by the dropped members' truncation.
Wins stay as strict xfails with their reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_main_judged_filter import INVERTED
from test_recipe_agent import propose, quiet_digest

from domains.math import MathDomain
from harness_repo.contract import TaskSpec
from harness_repo.repo import HarnessRepo
from meta_agent.main_checks import add_main_findings, judge_main

DATA = json.loads((Path(__file__).parent / "data" / "stall_exams.json").read_text())
STALLED = DATA["stalled"]


def _stall(exam: list[dict], before: list[dict], knobs: dict | None = None) -> dict | None:
    digest: dict = {"round": 1, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], (0.0, 1.0), exam=exam, exam_before=before, knobs=knobs or STALLED["knobs"],
                      metrics=[])
    return next((m for m in digest["failure_modes"] if m["name"] == "main:policy_stalled"), None)


def _detail(exam: list[dict], before: list[dict]) -> str:
    """What the check said, named or not."""
    digest: dict = {"round": 1, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], (0.0, 1.0), exam=exam, exam_before=before, knobs=STALLED["knobs"], metrics=[])
    return digest["main_checks"]["policy_stalled"]["detail"]


@pytest.mark.xfail(strict=True, reason="held out, wins: a step just large enough to reword a few answers' tails "
                   "(6 of 48) moves no verdict, yet 0.875 unchanged is under the 0.95 line: unnamed")
def test_a_policy_that_only_rewords_a_few_answers_and_flips_no_verdict_is_still_stalled() -> None:
    before = STALLED["round0_heldout"]
    now = [dict(r, response=r["response"] + " ") if i < 6 else r for i, r in enumerate(STALLED["round1"]["heldout"])]
    found = _stall(now, before)
    assert found is not None and found["evidence"]["tasks"] == 48, found


def test_an_exam_reordered_between_rounds_is_matched_by_task_not_position() -> None:
    before = STALLED["round0_heldout"]
    found = _stall(list(reversed(STALLED["round1"]["heldout"])), before)
    assert found is not None and (found["evidence"]["tasks"], found["rate"]) == (48, 1.0), found


def test_a_moving_policy_whose_exam_shrank_to_a_few_shared_tasks_is_not_called_stalled() -> None:
    """The exam draw changed (another held-out size): only 5 tasks in both, all unchanged: too few to judge."""
    before = STALLED["round0_heldout"][:5]
    assert _stall(STALLED["round1"]["heldout"], before) is None
    assert _detail(STALLED["round1"]["heldout"], before).startswith("not measured: only 5 exam tasks")


def test_beta_at_the_maximum_with_a_tiny_rate_gets_the_anchor_off_and_says_the_rate_stays(tmp_path: Path) -> None:
    """Both restraints at once: the recipe loosens beta first; the learning rate of 1e-9 waits for the next round's
    evidence (a second stalled round then raises it)."""
    from meta_agent.agents.recipe_stall import unstall
    from meta_agent.agents.recipe_types import HarnessFiles
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(learning_rate=1e-9, beta=1.0)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "plant")
    digest: dict = {"round": 1, "domain": "math", "failure_modes": [_stall(STALLED["round1"]["heldout"],
                                                                           STALLED["round0_heldout"])]}
    change = unstall(digest, HarnessFiles.read(repo))
    new = yaml.safe_load(change.files["harness.yaml"])["grpo"]
    assert new["beta"] == 0.0 and new["learning_rate"] == 1e-9


@pytest.mark.xfail(strict=True, reason="held out, wins: task_mix compares kinds only; chain_sum trained at 5 digits "
                   "against an exam of 1-digit chain_sum is the same kind at the same share, so no gap is named")
def test_the_same_name_at_another_difficulty_is_a_different_mix() -> None:
    tasks = [{"name": "chain_sum", "weight": 1.0, "config": {"min_terms": 2, "max_terms": 2, "min_digits": 5,
                                                              "max_digits": 5}},
             {"name": "products", "weight": 1.0, "config": {"min_terms": 2, "max_terms": 2, "min_digits": 5,
                                                             "max_digits": 5}}]
    digest: dict = {"round": 0, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], (0.0, 1.0), train_tasks=tasks, exam_specs=MathDomain().eval_specs)
    assert not digest["main_checks"]["task_mix"]["passed"]


def test_an_swe_exam_naming_a_held_out_task_id_is_resolved_to_its_package() -> None:
    from domains.swe import SweDomain
    exam = SweDomain([TaskSpec(name="sqlparse-0.6.1-malformed-format-no-crash")]).eval_specs
    digest: dict = {"round": 0, "domain": "swe", "failure_modes": []}
    add_main_findings(digest, [], (-1.0, 1.0), train_tasks=[{"name": "parse", "weight": 1.0}], exam_specs=exam)
    [found] = [m for m in digest["failure_modes"] if m["name"] == "main:task_mix"]
    assert found["shares"] == {"sqlparse": {"train": 0.0, "exam": 1.0}} and found["rate"] == 1.0, found


def test_a_filter_dropping_the_cut_off_members_behind_masking_is_loosened_in_filters_py(tmp_path: Path) -> None:
    """Every dropped member was cut off, so the drops look like masking's; the filter's source does not keep all,
    and that rule rewrites filters.py (held: by the source rule, not the measured one)."""
    cuts = ("def keep_trajectory(traj):\n    return not traj.get('truncated')\n\n\n"
            "def keep_group(group):\n    return True\n")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["mask_truncated"] = True
    repo.commit_files({"filters.py": cuts, "harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "start")
    rows = [dict(r, truncated=r["kept"] is False) for r in INVERTED]
    [mode] = [m for m in judge_main(rows, (0.0, 1.0)) if m["name"] == "main:informative_dropped"]
    [p] = propose(repo, quiet_digest(kept_share=20 / 32, failure_modes=[mode]))
    assert "filters.py" in repo.changed_paths(p.branch), repo.changed_paths(p.branch)


@pytest.mark.xfail(strict=True, reason="held out, wins: a backend that records no truncation flag (null) leaves "
                   "every drop unexplained by the measure, so masking is blamed and the inverted filter stays")
def test_an_inverted_filter_behind_masking_without_truncation_flags_is_loosened_in_filters_py(tmp_path: Path) -> None:
    hidden = ("def keep_trajectory(traj):\n    return True\n\n\ndef keep_group(group):\n    return True\n\n\n"
              "def _consistent(group):\n    return len({t.get('reward') for t in group}) == 1\n\n\n"
              "keep_group = _consistent\n")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["mask_truncated"] = True
    repo.commit_files({"filters.py": hidden, "harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "start")
    rows = [dict(r, truncated=None) for r in INVERTED]
    [mode] = [m for m in judge_main(rows, (0.0, 1.0)) if m["name"] == "main:informative_dropped"]
    [p] = propose(repo, quiet_digest(kept_share=20 / 32, failure_modes=[mode]))
    assert repo.changed_paths(p.branch) == ["filters.py"], repo.changed_paths(p.branch)


@pytest.mark.xfail(strict=True, reason="held out, wins (12c's kl-anchor, real rounds): at beta 1.0, 2 steps of 4x4 "
                   "at 2e-5, round 1 left 21 of 48 exam answers unchanged (19 at beta 0) and flipped 6 verdicts up; "
                   "by what the exam shows the policy moved, so nothing is named")
def test_12c_kl_anchor_beta_at_the_maximum_is_named_from_real_rounds() -> None:
    run = DATA["beta1"]
    found = _stall(run["round1"]["heldout"], run["round0_heldout"], run["knobs"])
    assert found is not None and found["evidence"]["tasks"] == 48, found
