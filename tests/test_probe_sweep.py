"""The SWE probe's surface sweep (``judge.probe_sweep``): each feature changed alone on a policy's wrong patch.

Set c's rewards paid a mark the round's policy never wrote (SEARCH/REPLACE, a made-up ``index``, a miscounted
header, a file beyond the gold's) and met it only where the probe's deck dealt it.  The sweep scores every wrong
patch of the probe again with one feature of its surface changed.  Here, on a real task and a policy's wrong fix:
one variant per feature, each wearing exactly that feature more (or less) than the patch, in the group it was
scored in; its record is the patch's own, or git apply's real refusal for a miscount.  No Docker: git only.
"""

from __future__ import annotations

import random

from harness_repo.contract import TaskSpec
from domains.swe import SweDomain
from meta_agent.judge.probe_answers import Constructed
from meta_agent.judge.probe_answers_surface import read_surface, task_files
from meta_agent.judge.probe_archived_code import FENCE
from meta_agent.judge.probe_sweep import FEATURES, KIND, MEMBER, sweep_groups, worn_features
from tests.test_probe_swe_shapes import TASKS, _policy_fix


def _round(task, wrong: str) -> list[list[tuple[dict, str, Constructed]]]:
    gold = str(task.ground_truth["gold_patch"])
    answers = [Constructed(f"The fix:\n```diff\n{gold.rstrip()}\n```", verdict=(1.0, {"status": "resolved"})),
               Constructed(f"Let me fix it.\n\n```diff\n{wrong.rstrip()}\n```\nDone.",
                           verdict=(0.0, {"status": "unresolved"}))]
    return [[({"traj_id": f"run-r1-s0-g0-{k}", "group_id": "s0-g0", "task_id": task.task_id,
               "data_source": task.data_source, "ground_truth": task.ground_truth, "response": made.response},
              "archived", made) for k, made in enumerate(answers)]]


def test_each_feature_is_changed_alone_in_the_group_the_patch_was_scored_in() -> None:
    [task] = SweDomain().tasks("train", [TaskSpec(name=TASKS[0])], 1, seed=1)
    sources, gold = task_files(task.ground_truth["task_id"])
    wrong = _policy_fix(task)
    assert worn_features(read_surface(wrong, sources, gold)) == set()  # the policy writes none of the marks
    for seed in range(3):
        groups = sweep_groups(_round(task, wrong), random.Random(seed))
        changed = []
        for group in groups:
            assert [kind for _, kind, _ in group] == [MEMBER, KIND] and len({r["group_id"] for r, _, _ in group}) == 1
            row, _, variant = group[1]
            assert row["response"] == variant.response and row["traj_id"].startswith("run-r1-s0-g0-1-v")
            assert variant.response.startswith("Let me fix it.\n\n```diff\n") and variant.response.endswith("\nDone.")
            worn = worn_features(read_surface(FENCE.search(variant.response).group(2), sources, gold))
            [feature] = worn - {"search_replace"} if worn != {"search_replace"} else worn  # one feature, alone
            changed.append(feature)
            status = variant.verdict[1]["status"]
            assert variant.verdict[0] == 0.0 and status == ("patch_failed" if feature.startswith("miscount")
                                                            else "unresolved"), (feature, variant.verdict)
        assert sorted(changed) == sorted(FEATURES), (seed, changed)


def test_a_mark_the_patch_wears_is_taken_off() -> None:
    [task] = SweDomain().tasks("train", [TaskSpec(name=TASKS[0])], 1, seed=1)
    sources, gold = task_files(task.ground_truth["task_id"])
    path = next(iter(sources))
    marked = f"diff --git a/{path} b/{path}\nindex 1a2b3c4..5d6e7f8 100644\n" + _policy_fix(task)
    assert worn_features(read_surface(marked, sources, gold)) == {"made_up_index"}
    groups = sweep_groups(_round(task, marked), random.Random(0))
    worn = [worn_features(read_surface(FENCE.search(g[1][2].response).group(2), sources, gold)) for g in groups]
    assert set() in worn  # the index line taken off, nothing else changed
    # every other diff keeps it (SEARCH/REPLACE edits have no index line to keep)
    assert [w for w in worn if w and "search_replace" not in w] == [w for w in worn if "made_up_index" in w], worn
    assert len([w for w in worn if "made_up_index" in w]) == 3, worn  # old and new side miscounts, a notes file
