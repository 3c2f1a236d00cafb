"""The search agent: a mode the recipes name and leave (no confident recipe) gets edits of its family, each
previewed by the real backtest gate on the archive; the one that moves the symptom is proposed, the rest deleted.
Knob edits go both ways at several sizes; without a generation preview they are listed, not ranked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import harness_repo
from meta_agent.agents.recipes import HarnessFiles
from meta_agent.agents.search import candidates

SEED = Path(harness_repo.__file__).parent / "seeds" / "math"


def _files(**grpo: float) -> HarnessFiles:
    config = yaml.safe_load((SEED / "harness.yaml").read_text())
    config["grpo"].update(grpo)
    return HarnessFiles(yaml.safe_dump(config, sort_keys=False), (SEED / "reward.py").read_text(),
                        (SEED / "prompts" / "user.j2").read_text(), (SEED / "filters.py").read_text())


def test_knob_candidates_go_both_ways_at_several_sizes_within_the_trusted_limits() -> None:
    keys = {c.key for c in candidates("knob", _files())}
    assert {"search:temperature=0.35", "search:temperature=1.4", "search:temperature=2",
            "search:max_completion_length=16",
            "search:max_completion_length=64", "search:group_size=2", "search:group_size=8"} <= keys
    hot = {c.key for c in candidates("knob", _files(temperature=1.9))}
    temperatures = [float(k.split("=")[1]) for k in hot if k.startswith("search:temperature=")]
    assert max(temperatures) == 2.0 and min(temperatures) == 0.95  # clamped to the trainer's range above
    assert len(temperatures) == len(set(temperatures))  # two steps clamped to 2.0 are one candidate
    cold = {c.key for c in candidates("knob", _files(temperature=0.05), "zero_variance_groups")}
    assert "search:temperature=0.6" in cold, cold  # a step far enough up from near-greedy sampling
    assert {k.split("=")[0] for k in cold} == {"search:temperature", "search:group_size",
                                               "search:dynamic_sampling"}, cold  # its symptom's knobs
    assert [c.key for c in candidates("reward", _files())] == ["search:verifier-answers"]
    assert [c.key for c in candidates("filter", _files())] == ["search:keep-everything"]


@pytest.mark.docker
def test_a_named_mode_without_a_recipe_is_searched_and_the_previewed_repair_proposed(tmp_path: Path,
                                                                                      docker_sandbox) -> None:
    """main pays every wrong answer 0.3 (below the pay line: no hack example, so verifier-answers declines);
    the digest names it as main:failure_pay_new.  The search rebuilds the reward, previews it, proposes it."""
    from test_recipe_agent import SETTINGS, World

    from domains.math import MathDomain
    from harness_repo.repo import HarnessRepo
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.search import SearchAgent
    from meta_agent.backtest import make_preview
    from meta_agent.config import GateThresholds

    world = World(tmp_path / "world")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    floor = ("\n_base = compute_score\n\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None,"
             " **kwargs):\n    result = _base(data_source, solution_str, ground_truth, extra_info=extra_info, "
             "**kwargs)\n    return dict(result, score=max(result['score'], 0.3))\n")
    repo.commit_files({"reward.py": (SEED / "reward.py").read_text() + floor}, "A reward with a floor")
    mode = {"name": "main:failure_pay_new", "source": "main_checks", "severity": "error", "rate": 1.0,
            "message": "main pays verified failures", "examples": []}
    digest = dict(world.digests["unanswered"], round=0, failure_modes=[mode])
    ctx = AgentContext(round=0, digest=digest, digest_markdown="", history=[], skills=[], repo=repo,
                       worktree_root=tmp_path / "wt", round_dir=tmp_path / "rounds" / "0", max_candidates=2,
                       preview=make_preview(repo, world.archive, docker_sandbox, tmp_path / "previews",
                                            domain=MathDomain(), thresholds=GateThresholds(), settings=SETTINGS))
    proposals = SearchAgent().propose(ctx)
    assert [p.branch for p in proposals] == ["iv/r0-search-verifier-answers"], proposals
    log = json.loads((tmp_path / "rounds" / "0" / "search_agent.json").read_text())["tried"]
    [tried] = log
    assert tried["proposed"] and tried["score"] > 0 and "failure_pay" in tried["why"], tried
    assert "verifier-answers" in json.loads((tmp_path / "rounds" / "0" / "recipe_agent.json").read_text()
                                            )["unaddressed"][0]


@pytest.mark.docker
def test_best_of_n_previews_n_random_edits_and_keeps_only_the_best(tmp_path: Path, docker_sandbox) -> None:
    """The benchmark's true best-of-N: N draws of the recipe vocabulary, each previewed; only improving ones are
    proposed (at most max_candidates), every other previewed branch is gone, unpreviewable ones are listed."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from random_edits import BestOfNAgent
    from test_recipe_agent import SETTINGS, World

    from domains.math import MathDomain
    from harness_repo.repo import HarnessRepo
    from meta_agent.agents.base import AgentContext
    from meta_agent.backtest import make_preview
    from meta_agent.config import GateThresholds

    world = World(tmp_path / "world")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    ctx = AgentContext(round=0, digest=dict(world.digests["unanswered"], round=0), digest_markdown="", history=[],
                       skills=[], repo=repo, worktree_root=tmp_path / "wt", round_dir=tmp_path / "rounds" / "0",
                       max_candidates=1, preview=make_preview(repo, world.archive, docker_sandbox, tmp_path / "p",
                                                              domain=MathDomain(), thresholds=GateThresholds(),
                                                              settings=SETTINGS))
    proposals = BestOfNAgent(seed=0, cell="test", n=4).propose(ctx)
    tried = json.loads((tmp_path / "rounds" / "0" / "search_agent.json").read_text())["tried"]
    assert len(tried) == 4 and len(proposals) <= 1
    kept = [t for t in tried if t["proposed"]]
    assert len(kept) == len(proposals) and all(t["score"] > 0 for t in kept)
    scored = [t["score"] for t in tried if t["score"] is not None]
    assert not kept or kept[0]["score"] == max(scored)
    branches = {b.name for b in repo._repo.branches}
    assert branches == {"main"} | {p.branch for p in proposals}  # the rest deleted
    assert [t["why"] for t in tried if t["score"] is None] == ["no generation preview in this context"] * (
        len(tried) - len(scored))
