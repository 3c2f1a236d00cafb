"""bench/random_edits.py: the random-edit baseline draws its own edits per benchmark cell, reproducibly.

Its draw was keyed by run seed and round only, so every flaw of the repair bench got the same two random
edits (``dynamic-sampling`` and ``final-answer-prompt`` in every cell of the last table).  Real math seed
repos and the real recipe vocabulary; the draw is read back from the agent's transcript.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import TRANSCRIPT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ scripts import each other so

from random_edits import RandomEditAgent  # noqa: E402
from repair_flaws import CONTROL, FLAWS  # noqa: E402

CELLS = [*FLAWS, CONTROL]


def _draw(root: Path, cell: str, seed: int, round: int = 0) -> tuple[str, ...]:
    """The edits the agent commits for ``cell`` on a fresh math seed repo (branch names: round and rule)."""
    repo = HarnessRepo.create(root / "harness", "math")
    round_dir = root / "rounds" / str(round)
    ctx = AgentContext(round=round, digest={"round": round, "domain": "math"}, digest_markdown="", history=[],
                       skills=[], repo=repo, worktree_root=root / "worktrees", round_dir=round_dir,
                       max_candidates=2)
    proposals = RandomEditAgent(seed, cell=cell).propose(ctx)
    transcript = json.loads((round_dir / TRANSCRIPT).read_text())
    assert transcript["drawn"] == [p.branch for p in proposals]
    return tuple(transcript["drawn"])


@pytest.fixture(scope="module")
def draws(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], tuple[str, ...]]:
    root = tmp_path_factory.mktemp("draws")
    return {(cell, seed): _draw(root / f"{cell}-{seed}", cell, seed) for cell in CELLS for seed in (0, 1)}


def test_each_flaw_draws_its_own_edits(draws: dict) -> None:
    per_flaw = {draws[(cell, 0)] for cell in CELLS}
    assert [len(d) for d in per_flaw] == [2] * len(per_flaw)  # two candidates, as the agents get
    assert len(per_flaw) > 1, f"every one of {len(CELLS)} cells drew {per_flaw}"  # the old key gave exactly 1


def test_seeds_of_one_flaw_draw_apart(draws: dict) -> None:
    assert [cell for cell in CELLS if draws[(cell, 0)] != draws[(cell, 1)]] != []


def test_the_same_cell_draws_the_same_edits_again(draws: dict, tmp_path: Path) -> None:
    assert _draw(tmp_path / "again", "short-budget", 1) == draws[("short-budget", 1)]
