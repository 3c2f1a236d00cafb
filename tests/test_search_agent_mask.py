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


def _search(tmp: Path, config: str, rate: float) -> tuple[list, dict]:
    repo = HarnessRepo.create(tmp / "harness", "math")
    repo.commit_files({"harness.yaml": config}, "knobs")
    ctx = AgentContext(round=0, digest=_digest(rate), digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp / "wt", round_dir=tmp / "r0", max_candidates=2)
    proposals = SearchAgent().propose(ctx)
    tried = {t["key"]: t for t in json.loads((tmp / "r0" / "search_agent.json").read_text())["tried"]}
    return proposals, tried


def test_a_masked_truncation_is_unmasked_on_the_rounds_own_evidence(tmp_path: Path) -> None:
    proposals, tried = _search(tmp_path, _config(mask_truncated=True, max_completion_length=24), 0.375)
    assert [p.branch for p in proposals] == ["iv/r0-search-mask-truncated-false"], (proposals, tried)
    assert proposals[0].predicted_effects == ["truncation_rate decrease: mask_truncated false"], proposals
    unmask = tried["search:mask_truncated=false"]
    assert unmask["score"] == 0.375 and unmask["preview"] == "archive" and "0.375 -> 0.000" in unmask["why"], unmask
    # the budget edits still wait for a generation preview this context does not offer
    assert tried["search:max_completion_length=48"]["why"] == "no generation preview in this context", tried


def test_masking_an_unmasked_harness_is_never_proposed(tmp_path: Path) -> None:
    proposals, tried = _search(tmp_path, _config(max_completion_length=24), 0.375)
    assert proposals == [], proposals
    mask = tried["search:mask_truncated=true"]
    assert mask["score"] == -0.375 and not mask["proposed"], mask
