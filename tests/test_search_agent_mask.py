"""The search's knob family covers every knob the trainer accepts that bears on the named mode: booleans both ways
(``mask_truncated`` for a cut or unfinished answer, ``dynamic_sampling`` for flat groups), numbers both ways within
the trainer's ranges.  A mask flaw of our own (truncated completions masked under a 24-token budget, truncation
named at 0.375): masking moves no generated token, so no generation preview can see it; what it costs is signal, the
masked share of main's batch, read exactly from the round.  Real git; no model (no generation preview offered)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

import harness_repo
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipes import HarnessFiles
from meta_agent.agents.search import SearchAgent, candidates

SEED = Path(harness_repo.__file__).parent / "seeds" / "math"


def _config(**grpo) -> str:
    config = yaml.safe_load((SEED / "harness.yaml").read_text())
    config["grpo"].update(grpo)
    return yaml.safe_dump(config, sort_keys=False)


def _files(**grpo) -> HarnessFiles:
    return HarnessFiles(_config(**grpo), (SEED / "reward.py").read_text(), (SEED / "prompts" / "user.j2").read_text(),
                        (SEED / "filters.py").read_text())


def test_booleans_bearing_on_the_mode_are_flipped_both_ways() -> None:
    masked = {c.key for c in candidates("knob", _files(mask_truncated=True), "truncation")}
    assert "search:mask_truncated=false" in masked, masked
    assert "search:mask_truncated=true" in {c.key for c in candidates("knob", _files(), "truncation")}
    unfinished = {c.key for c in candidates("prompt", _files(mask_truncated=True), "no_final_answer")}
    assert "search:mask_truncated=false" in unfinished, unfinished
    flat = {c.key for c in candidates("knob", _files(), "zero_variance_groups")}
    assert "search:dynamic_sampling=true" in flat and "search:mask_truncated=true" not in flat, flat


def _digest(rate: float) -> dict:
    mode = {"name": "truncation", "source": "digest", "severity": "warning", "rate": rate,
            "message": f"{rate:.0%} of completions hit max_completion_length", "examples": []}
    return {"round": 0, "domain": "math", "failure_modes": [mode], "truncation_rate": rate,
            "no_final_answer_rate": rate, "evidence": {}}


def _ctx(tmp: Path, config: str, rate: float) -> AgentContext:
    repo = HarnessRepo.create(tmp / "harness", "math")
    repo.commit_files({"harness.yaml": config}, "knobs")
    return AgentContext(round=0, digest=_digest(rate), digest_markdown="", history=[], skills=[], repo=repo,
                        worktree_root=tmp / "wt", round_dir=tmp / "r0", max_candidates=2)


def _search(tmp: Path, config: str, rate: float) -> tuple[list, dict, list]:
    proposals = SearchAgent().propose(_ctx(tmp, config, rate))
    log = json.loads((tmp / "r0" / "search_agent.json").read_text())
    return proposals, {t["key"]: t for t in log["tried"]}, log["recipe_previews"]


def test_a_masked_truncation_is_unmasked_on_the_rounds_own_evidence(tmp_path: Path) -> None:
    """The recipe's unmask (``recipe_mask``) is proposed by the search on the batch's masked share, where a
    generation preview could only have seen the same batch twice."""
    proposals, _, previews = _search(tmp_path, _config(mask_truncated=True, max_completion_length=24), 0.375)
    assert [p.branch for p in proposals] == ["iv/r0-unmask-truncation"], (proposals, previews)
    [unmask] = [p for p in previews if p["key"] == "unmask-truncation:mask_truncated=false"]
    assert unmask["score"] == 0.375 and unmask["mode"] == "archive" and unmask["proposed"], unmask
    assert "0.375 -> 0.000" in unmask["why"], unmask


def test_the_searchs_own_flip_is_judged_on_the_batch(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, _config(mask_truncated=True, max_completion_length=24), 0.375)
    pool = [("truncation", c) for c in candidates("knob", HarnessFiles.read(ctx.repo), "truncation")]
    proposals = SearchAgent().best_previewed(ctx, pool, left=1)
    assert [p.branch for p in proposals] == ["iv/r0-search-mask-truncated-false"], proposals
    assert proposals[0].predicted_effects == ["truncation_rate decrease: mask_truncated false"], proposals
    tried = {t["key"]: t for t in json.loads((tmp_path / "r0" / "search_agent.json").read_text())["tried"]}
    unmask = tried["search:mask_truncated=false"]
    assert unmask["score"] == 0.375 and unmask["preview"] == "archive" and "0.375 -> 0.000" in unmask["why"], unmask
    # the budget edits would each cost a generated batch: the proposal left is taken by what the batch measured
    assert tried["search:max_completion_length=48"]["why"].startswith("not previewed: 1 edit(s)"), tried


def test_masking_an_unmasked_harness_is_never_proposed(tmp_path: Path) -> None:
    proposals, tried, _ = _search(tmp_path, _config(max_completion_length=24), 0.375)
    assert proposals == [], proposals
    mask = tried["search:mask_truncated=true"]
    assert mask["score"] == -0.375 and not mask["proposed"], mask


def test_the_recipe_agent_unmasks_a_masked_truncation(tmp_path: Path) -> None:
    """12g's shape with our own numbers: unfinished answers named, 1 in 8 cut and masked: the recipe arm (no search)
    trains the cut answers; main that does not mask gets no such change."""
    from meta_agent.agents.recipe import RecipeAgent

    digest = dict(_digest(0.125), failure_modes=[{"name": "no_final_answer", "source": "digest",
                                                  "severity": "warning", "rate": 0.75, "message": "", "examples": []}],
                  no_final_answer_rate=0.75)
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"harness.yaml": _config(mask_truncated=True)}, "knobs")
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "r0", max_candidates=2)
    proposals = RecipeAgent().propose(ctx)
    assert [p.branch for p in proposals] == ["iv/r0-unmask-truncation"], proposals
    assert yaml.safe_load(repo.read_file(proposals[0].branch, "harness.yaml"))["grpo"]["mask_truncated"] is False
    from meta_agent.agents.recipe_mask import unmask_truncation
    assert unmask_truncation(digest, _files()) == "main does not mask truncated completions"
