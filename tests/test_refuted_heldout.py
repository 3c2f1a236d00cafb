"""Held-out cases for the refuted-move rule, written after it froze (``meta_agent.agents.refuted``): the same move by
another agent, another knob of the same merge, a move the other way, history given as objects, and a harness.yaml
that spells the number as a string (or as 91e-2, an alias, a flow mapping)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipes import Change
from meta_agent.agents.refuted import declined
from meta_agent.agents.search import SearchAgent, candidates
from meta_agent.agents.recipes import HarnessFiles


def _refuted(tmp_path: Path, old: str, new: str) -> HarnessRepo:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    wt = repo.start_intervention(0, "move", worktree_root=tmp_path / "wt")
    text = (wt.path / "harness.yaml").read_text()
    if old == "grpo:\n":  # the block form becomes the flow form: everything from grpo: on is replaced
        text = text[:text.index(old)] + new
    for a, b in zip(old.split("|"), new.split("|")):
        text = text.replace(a, b)
    (wt.path / "harness.yaml").write_text(text)
    repo.commit(wt, "A move", {"Hypothesis": "h", "Agent": "llm",
                               "Predicted-Effect": ["zero_variance_share decrease: x"]})
    repo.remove_worktree(wt)
    merge = repo.merge("iv/r0-move", {"Verdict": "merge (probation)"}, "Merge iv/r0-move")
    repo.revert_merge_cascade(merge, "Revert iv/r0-move: refuted in round 1", {"Live-Check": "contradicted"})
    return repo


def _ctx(tmp_path: Path, repo: HarnessRepo, history=None) -> AgentContext:
    (tmp_path / "rounds" / "0").mkdir(parents=True, exist_ok=True)
    (tmp_path / "rounds" / "0" / "digest.json").write_text(json.dumps({"round": 0, "zero_variance_share": 0.5}))
    return AgentContext(round=1, digest={"round": 1, "zero_variance_share": 0.5, "failure_modes": []},
                        digest_markdown="", repo=repo, skills=[], worktree_root=tmp_path / "wt",
                        history=history if history is not None else [iv.__dict__ for iv in repo.interventions()],
                        round_dir=tmp_path / "rounds" / "1", max_candidates=1)


def _knob_change(repo: HarnessRepo, old: str, new: str) -> Change:
    return Change("search", f"search:{new}", 0.0, "s", "e", "h", [],
                  {"harness.yaml": repo.read_file("main", "harness.yaml").replace(old, new)})


def test_the_search_agent_declines_the_refuted_move_and_says_so(tmp_path: Path) -> None:
    repo = _refuted(tmp_path, "temperature: 0.7", "temperature: 0.91")
    ctx = _ctx(tmp_path, repo)
    pool = [("zero_variance_groups", c) for c in candidates("knob", HarnessFiles.read(repo), "zero_variance_groups")]
    SearchAgent().best_previewed(ctx, pool, left=1)
    tried = {t["key"]: t for t in json.loads((ctx.round_dir / "search_agent.json").read_text())["tried"]}
    assert tried["search:temperature=1.4"]["why"].startswith("declined: temperature up"), tried
    assert not tried["search:temperature=0.35"]["why"].startswith("declined"), tried  # the other way is open


def test_each_knob_of_a_two_knob_move_is_held_in_its_own_direction(tmp_path: Path) -> None:
    repo = _refuted(tmp_path, "temperature: 0.7|max_completion_length: 32",
                    "temperature: 0.91|max_completion_length: 64")
    ctx = _ctx(tmp_path, repo)
    assert declined(_knob_change(repo, "max_completion_length: 32", "max_completion_length: 48"), ctx)
    assert declined(_knob_change(repo, "max_completion_length: 32", "max_completion_length: 16"), ctx) is None
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.5"), ctx) is None


def test_history_given_as_intervention_objects_is_read_the_same(tmp_path: Path) -> None:
    repo = _refuted(tmp_path, "temperature: 0.7", "temperature: 0.91")
    ctx = _ctx(tmp_path, repo, history=list(repo.interventions()))
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.88"), ctx)


def test_a_refuted_move_written_as_a_quoted_number_is_still_the_same_move(tmp_path: Path) -> None:
    """harness.yaml's schema accepts "0.91" for a float (pydantic's lax mode): the move is the same."""
    repo = _refuted(tmp_path, "temperature: 0.7", 'temperature: "0.91"')
    ctx = _ctx(tmp_path, repo)
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.88"), ctx)


# Other spellings of the same 0.7 -> 0.91 move, each valid in harness.yaml as training reads it (yaml.safe_load, then
# HarnessConfig): the refuted rule must read the knob as training does, not as the YAML scanner types the scalar.
_SPELLINGS = {
    "exponent": ("temperature: 0.7", "temperature: 9.1e-1"),
    "exponent without a dot": ("temperature: 0.7", "temperature: 91e-2"),  # a str to PyYAML, 0.91 to pydantic
    # an alias must follow its anchor: notes (any string) moves above grpo and carries the anchor
    "alias of a quoted anchor": ("domain: math|temperature: 0.7|notes: Seed",
                                 'notes: &t "0.91"\ndomain: math|temperature: *t|# Seed'),
    # the whole grpo block as one flow mapping (its comments dropped), the value quoted
    "flow mapping": ("grpo:\n", "grpo: {group_size: 4, prompts_per_step: 4, steps_per_round: 3, learning_rate: 2.0e-5, "
                     "temperature: \"0.91\", max_completion_length: 32}\nnotes: x\n"),
}


@pytest.mark.parametrize("spelling", ["exponent", "exponent without a dot", "alias of a quoted anchor", "flow mapping"])
def test_a_refuted_move_in_any_spelling_training_accepts_is_the_same_move(tmp_path: Path, spelling: str) -> None:
    old, new = _SPELLINGS[spelling]
    repo = _refuted(tmp_path, old, new)
    from rl_backend.base import parse_harness_yaml  # what training reads
    head = [iv for iv in repo.interventions() if iv.status == "reverted"][0].head
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "harness.yaml").write_text(repo.read_file(head, "harness.yaml"))
    assert parse_harness_yaml(tmp_path / "h").grpo.temperature == 0.91  # the planted text is valid and means 0.91
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.88"), _ctx(tmp_path, repo))


def test_a_harness_training_refuses_moved_no_knob(tmp_path: Path) -> None:
    """A reverted merge whose harness.yaml training refuses (temperature 9.1, over the trainer's bound) never ran the
    move: it holds back nothing, and a move up that training accepts stays open."""
    repo = _refuted(tmp_path, "temperature: 0.7", "temperature: 9.1")
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.88"), _ctx(tmp_path, repo)) is None
