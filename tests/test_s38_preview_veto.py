"""A recipe's right generation edit is not withheld on an inconclusive preview (issue 44: the search arm must not
repair less than the recipe arm); a preview that shows harm, or no effect at all, still withholds it.

Measured at recipe set 14 (search arm, offline, the small size): the recipe agent repairs tiny-groups and
no-final-instruction, the search arm withheld both.  no-final-instruction's final-answer-prompt was previewed at
no_final_answer 1.000 -> 0.938, difference [-0.188, +0.000] over 4 tasks (the right way, short of the sign test);
tiny-groups' larger-groups (group_size 2 -> 6) at identical 0.250 -> 0.333 and unsolved [+0.083, +0.500]: a group
size changes how many completions are drawn, not how each is, so a preview's per-completion rates differ only by
sampling noise the task bootstrap does not cover, and the identical share rises with the members by counting.

The preview outputs below are the real ones those cells recorded (``generation_previews/iv_r0-*.json``, rates cut
to what the rule reads); the preview is called with them, the rest is real: the recipe and search agents, git."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import SearchAgent
from meta_agent.generation_preview import PreviewRefused


def _rates(**intervals: list[float]) -> dict:
    return {r: {"delta": round((lo + hi) / 2, 4), "interval": [lo, hi]} for r, (lo, hi) in intervals.items()}


FINAL_PROMPT = {"branch": "iv/r0-final-answer-prompt", "mode": "format_failures", "symptom": "no_final_answer",
                "main": 1.0, "candidate": 0.9375, "interval": [-0.1875, 0.0], "tasks": 4, "seconds": 18.0,
                "main_seconds": 14.2, "rates": _rates(identical=[0.0, 0.0], truncated=[-0.1875, 0.1875],
                                                      no_final_answer=[-0.1875, 0.0], unsolved=[-0.1875, 0.0])}
"""no-final-instruction's final-answer-prompt preview (recipe set 14)."""
LARGER = {"branch": "iv/r0-larger-groups", "mode": "zero_variance", "symptom": "identical", "main": 0.25,
          "candidate": 0.3333, "interval": [-0.0833, 0.25], "tasks": 4, "seconds": 18.0, "main_seconds": 7.2,
          "rates": _rates(identical=[-0.0833, 0.25], truncated=[0.0, 0.125], no_final_answer=[0.0417, 0.2917],
                          unsolved=[0.0833, 0.5])}
"""tiny-groups' larger-groups preview (group_size 2 -> 6)."""
SAME = {"branch": "iv/r0-dynamic-sampling", "mode": "zero_variance", "symptom": "identical", "main": 0.25,
        "candidate": 0.25, "interval": [0.0, 0.0], "tasks": 4, "seconds": 7.2, "main_seconds": 0.0,
        "rates": _rates(identical=[0.0, 0.0], truncated=[0.0, 0.0], no_final_answer=[0.0, 0.0],
                        unsolved=[0.0, 0.0])}
"""tiny-groups' dynamic-sampling preview: the same batch as main's (12d's live-loss kind: a prediction alone)."""


class Recorded:
    """The generation preview, answering from recorded outputs; a branch it has none for is refused."""

    def __init__(self, outs: dict[str, dict]) -> None:
        self.outs, self.asked = outs, []

    def __call__(self, branch: str, mode: str | None = None) -> dict:
        self.asked.append(branch)
        if branch not in self.outs:
            raise PreviewRefused(f"{branch}: no recorded preview")
        return dict(self.outs[branch], mode=mode)


def _run(tmp_path: Path, files: dict, digest: dict, outs: dict[str, dict], name: str = "r0"):
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    if files:
        repo.commit_files({k: v(repo.read_file("main", k)) if callable(v) else v for k, v in files.items()},
                          "the planted flaw")
    preview = Recorded(outs)
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / name, max_candidates=2,
                       generation_preview=preview)
    proposals = SearchAgent().propose(ctx)
    recipes = {e["rule"]: e for e in json.loads((tmp_path / name / "recipe_agent.json").read_text())["rules"]}
    return repo, [p.branch for p in proposals], recipes, preview


NO_FINAL = {"prompts/system.j2": "You are a careful math assistant. Work it out in one line.\n",
            "prompts/user.j2": "{{ question }}\n"}
NO_FINAL_DIGEST = {"round": 0, "domain": "math", "no_final_answer_rate": 1.0, "truncation_rate": 0.25,
                   "evidence": {}, "failure_modes": [
                       {"name": "format_failures", "severity": "warning", "rate": 1.0},
                       {"name": "no_final_answer", "severity": "warning", "rate": 1.0}]}
TINY = {"harness.yaml": lambda t: t.replace("group_size: 4", "group_size: 2").replace(
    "prompts_per_step: 4", "prompts_per_step: 8")}
TINY_DIGEST = {"round": 0, "domain": "math", "zero_variance_share": 0.75, "evidence": {"verified_rate": 0.125},
               "failure_modes": [{"name": "zero_variance_groups", "severity": "warning", "rate": 0.75},
                                 {"name": "zero_variance", "severity": "warning", "rate": 0.75}]}


def test_no_final_instruction_s_right_edit_is_proposed_on_an_inconclusive_preview(tmp_path: Path) -> None:
    _, proposed, recipes, preview = _run(tmp_path, NO_FINAL, NO_FINAL_DIGEST,
                                         {"iv/r0-final-answer-prompt": FINAL_PROMPT})
    assert "iv/r0-final-answer-prompt" in preview.asked
    assert "iv/r0-final-answer-prompt" in proposed, recipes["final-answer-prompt"]
    [seen] = [p for p in json.loads((tmp_path / "r0" / "search_agent.json").read_text())["recipe_previews"]
              if p["key"] == "final-answer-prompt"]
    assert seen["proposed"] and seen["withheld"] == "" and "does not lie below zero" in seen["short_of"], seen


def test_tiny_groups_right_edit_is_proposed(tmp_path: Path) -> None:
    repo, proposed, recipes, preview = _run(tmp_path, TINY, TINY_DIGEST, {"iv/r0-larger-groups": LARGER})
    assert "iv/r0-larger-groups" in proposed, recipes["larger-groups"]
    grpo = yaml.safe_load(repo.read_file("iv/r0-larger-groups", "harness.yaml"))["grpo"]
    assert grpo["group_size"] >= 4, grpo
    assert "iv/r0-larger-groups" not in preview.asked, preview.asked  # judged on the round, not a preview
    [seen] = json.loads((tmp_path / "r0" / "search_agent.json").read_text())["recipe_previews"]
    assert seen["mode"] == "archive" and seen["score"] == pytest.approx(0.781 - 0.449, abs=1e-3), seen


def test_dynamic_sampling_on_a_preview_that_saw_no_change_stays_withheld(tmp_path: Path) -> None:
    """12d's live-loss kind: the preview's batch is main's, so the prediction would be the only evidence.  (Groups
    of 4 at solve rate 0.5 already mix verdicts: larger-groups does not fire, dynamic-sampling does.)"""
    digest = dict(TINY_DIGEST, evidence={"verified_rate": 0.5})
    repo, proposed, recipes, preview = _run(tmp_path, {}, digest, {"iv/r0-dynamic-sampling": SAME})
    assert preview.asked[:1] == ["iv/r0-dynamic-sampling"], preview.asked
    assert "iv/r0-dynamic-sampling" not in proposed, proposed
    reason = recipes["dynamic-sampling"]["reason"]
    assert reason.startswith("withheld: no preview evidence: identical difference [+0.000, +0.000]"), reason
    assert "iv/r0-dynamic-sampling" not in {b.name for b in repo._repo.branches}


def _harmed(**changes) -> dict:
    out = json.loads(json.dumps(FINAL_PROMPT))
    for rate, interval in changes.items():
        out["rates"][rate]["interval"] = interval
        if rate == out["symptom"]:
            out["interval"], out["candidate"] = interval, out["main"] + (interval[0] + interval[1]) / 2
    return out


@pytest.mark.parametrize("harm, said", [
    (_harmed(no_final_answer=[0.0625, 0.25]), "[+0.062, +0.250] over 4 tasks lies above zero"),
    (_harmed(unsolved=[0.0625, 0.3125]), "the solve rate fell beyond noise (unsolved difference [+0.062, +0.312])"),
    (_harmed(no_final_answer=[0.0, 0.0]), "[+0.000, +0.000] over 4 tasks: the preview saw the edit move nothing"),
])
def test_a_preview_showing_harm_or_no_effect_still_withholds(tmp_path: Path, harm: dict, said: str) -> None:
    _, proposed, recipes, preview = _run(tmp_path, NO_FINAL, NO_FINAL_DIGEST, {"iv/r0-final-answer-prompt": harm})
    assert "iv/r0-final-answer-prompt" in preview.asked
    assert "iv/r0-final-answer-prompt" not in proposed, recipes["final-answer-prompt"]
    reason = recipes["final-answer-prompt"]["reason"]
    assert reason.startswith("withheld: no preview evidence") and said in reason, reason
