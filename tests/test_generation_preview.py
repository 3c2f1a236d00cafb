"""The generation preview: the real local policy (the SmolLM2 the project ships) generates under a planted
generation flaw and under candidate edits, through the sandboxed runtime's render; the search agent ranks the
repairing edit above a harmful one.  No stub of the generator: a real model, real Docker, real git."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipes import Change
from meta_agent.agents.search import SearchAgent
from meta_agent.generation_preview import GenerationPreview
from rl_backend.model import resolve_model

pytestmark = pytest.mark.docker


def _knob(repo: HarnessRepo, old: str, new: str) -> str:
    return repo.read_file("main", "harness.yaml").replace(old, new)


def _change(key: str, text: str) -> Change:
    return Change("search", key, 0.0, f"Search: {key}", "previewed", "moves the symptom", [],
                  {"harness.yaml": text})


def _ctx(tmp_path: Path, repo: HarnessRepo, preview: GenerationPreview) -> AgentContext:
    return AgentContext(round=0, digest={"failure_modes": []}, digest_markdown="", history=[], skills=[],
                        repo=repo, worktree_root=tmp_path / "wt", round_dir=tmp_path / "rounds" / "0",
                        max_candidates=1, generation_preview=preview)


@pytest.fixture
def planted(tmp_path: Path) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    return repo


def test_a_sampler_too_cold_is_repaired_by_the_warmer_edit_not_the_colder(tmp_path: Path, planted: HarnessRepo,
                                                                            docker_sandbox) -> None:
    repo = planted
    repo.commit_files({"harness.yaml": _knob(repo, "temperature: 0.7", "temperature: 0.05")}, "Sample at 0.05")
    preview = GenerationPreview(repo, MathDomain(), docker_sandbox, resolve_model(None), tmp_path / "gp", seed=0)
    pool = [("zero_variance_groups", _change("search:temperature=0.025",
                                             _knob(repo, "temperature: 0.05", "temperature: 0.025"))),
            ("zero_variance_groups", _change("search:temperature=0.6",
                                             _knob(repo, "temperature: 0.05", "temperature: 0.6")))]
    proposals = SearchAgent().best_previewed(_ctx(tmp_path, repo, preview), pool, left=1)
    tried = {t["key"]: t for t in json.loads((tmp_path / "rounds" / "0" / "search_agent.json").read_text())["tried"]}
    assert [p.branch for p in proposals] == ["iv/r0-search-temperature-0-6"], tried
    warm, cold = tried["search:temperature=0.6"], tried["search:temperature=0.025"]
    assert warm["proposed"] and not cold["proposed"] and warm["preview"] == cold["preview"] == "generation"
    assert warm["score"] > 0 >= cold["score"], tried
    record = json.loads((tmp_path / "gp" / "iv_r0-search-temperature-0-6.json").read_text())
    identical = record["rates"]["identical"]
    assert record["symptom"] == "identical" and identical["main"] >= 0.5 > identical["candidate"], record
    assert identical["interval"][1] < 0 and record["tasks"] == 4, record  # paired over the same 4 tasks
    assert record["settings"]["main"]["temperature"] == 0.05 and record["settings"]["candidate"]["temperature"] == 0.6
    assert {b.name for b in repo._repo.branches} == {"main", "iv/r0-search-temperature-0-6"}  # the rest deleted


def test_a_budget_that_truncates_is_repaired_by_the_longer_budget_and_a_no_op_moves_nothing(
        tmp_path: Path, planted: HarnessRepo, docker_sandbox) -> None:
    repo = planted
    repo.commit_files({"harness.yaml": _knob(repo, "max_completion_length: 32", "max_completion_length: 6")},
                      "A budget of 6 tokens")
    preview = GenerationPreview(repo, MathDomain(), docker_sandbox, resolve_model(None), tmp_path / "gp", seed=3)
    for name, budget in (("longer", 48), ("shorter", 4), ("same", 6)):
        wt = repo.start_intervention(0, name, worktree_root=tmp_path / "wt")
        (wt.path / "harness.yaml").write_text(_knob(repo, "max_completion_length: 6",
                                                    f"max_completion_length: {budget}"))
        if budget == 6:  # the same knobs, a comment only: the same batch, drawn from the same seed
            (wt.path / "harness.yaml").write_text((wt.path / "harness.yaml").read_text() + "# unchanged\n")
        repo.commit(wt, f"budget {budget}", {"Hypothesis": ["budget"], "Agent": ["test"]})
        repo.remove_worktree(wt)
    longer, shorter, same = (preview(f"iv/r0-{n}", "truncation") for n in ("longer", "shorter", "same"))
    assert longer["main"] >= 0.75 and longer["candidate"] < longer["main"], longer
    assert longer["interval"][1] < 0 and shorter["candidate"] >= shorter["main"], (longer, shorter)
    assert {r: v["delta"] for r, v in same["rates"].items()} == dict.fromkeys(same["rates"], 0.0), same
    assert longer["seconds"] > 0 and longer["settings"]["candidate"]["generated_budget"] == 48
    # main's batch is drawn by the first candidate's call and reused: its cost is reported apart, not as the
    # candidate's own
    assert longer["main_seconds"] > 0 and shorter["main_seconds"] == same["main_seconds"] == 0.0, (longer, shorter)


def test_a_template_that_fails_to_render_is_refused_not_ranked(tmp_path: Path, planted: HarnessRepo,
                                                              docker_sandbox) -> None:
    """The branch's template runs in the sandbox; its render error is the candidate's failure, never the host's."""
    repo = planted
    preview = GenerationPreview(repo, MathDomain(), docker_sandbox, resolve_model(None), tmp_path / "gp", seed=0)
    change = Change("search", "search:broken-prompt", 0.0, "Search: broken", "x", "y", [],
                    {"prompts/user.j2": "{{ question.nope.deeper }}{% if %}"})
    proposals = SearchAgent().best_previewed(_ctx(tmp_path, repo, preview), [("no_final_answer", change)], left=1)
    [tried] = json.loads((tmp_path / "rounds" / "0" / "search_agent.json").read_text())["tried"]
    assert proposals == [] and tried["score"] is None and tried["why"].startswith("preview refused:"), tried


def test_a_budget_raised_past_the_previews_cap_is_not_read_as_truncating(tmp_path: Path, planted: HarnessRepo,
                                                                         docker_sandbox, monkeypatch) -> None:
    """main's budget is the preview's cap (8 here, so the test stays cheap): what runs into it is main's truncation.
    The candidate's budget (48) is past the cap: a completion the cap stops was not cut by the harness's budget,
    and its verdict is unknown, not truncated."""
    from meta_agent import generation_preview
    monkeypatch.setattr(generation_preview, "MAX_NEW_TOKENS", 8)
    repo = planted
    repo.commit_files({"harness.yaml": _knob(repo, "max_completion_length: 32", "max_completion_length: 8")},
                      "A budget of 8 tokens")
    wt = repo.start_intervention(0, "longer", worktree_root=tmp_path / "wt")
    (wt.path / "harness.yaml").write_text(_knob(repo, "max_completion_length: 8", "max_completion_length: 48"))
    repo.commit(wt, "budget 48", {"Hypothesis": ["budget"], "Agent": ["test"]})
    repo.remove_worktree(wt)
    out = GenerationPreview(repo, MathDomain(), docker_sandbox, resolve_model(None), tmp_path / "gp",
                            seed=3)("iv/r0-longer", "truncation")
    truncated = out["rates"]["truncated"]
    assert truncated["main"] >= 0.5, out  # cut by main's own budget of 8
    # the same seed draws the same 8 tokens under both: what main's budget cut, the candidate's cap stopped
    assert out["settings"]["candidate"]["generated_budget"] == 8
    assert out["rates"]["capped"]["candidate"] == truncated["main"] and out["rates"]["capped"]["main"] == 0.0, out
    assert truncated["candidate"] == 0.0 and out["candidate"] == 0.0, out  # of those that ended: none truncated
