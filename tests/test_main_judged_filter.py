"""A filter that keeps the wrong groups is named and repaired.

GRPO learns only from a group whose rewards differ; a filter that drops those groups and keeps the flat ones leaves
the loss nothing to learn from while the batch looks well kept (``kept_share`` high, so ``filter_drops`` says
nothing, and ``zero_variance_groups`` names only the flat groups, not the filter).  Main's keep mask, as the trainer
recorded it per trajectory, is judged: the share of reward-varying groups whose contrast the filter removed, against
the share of flat groups it dropped.  The keep masks are planted by hand, as ``tests/test_main_judged.py`` plants
them (what ``bench/heldout_flaws_2026_12b.py``'s inverted ``keep_group`` makes the trainer record)."""

from __future__ import annotations

import pytest
from test_main_judged import RANGE, _named, _rows
from test_recipe_agent import check_branch, load, propose, quiet_digest, transcript

from harness_repo.repo import HarnessRepo
from meta_agent.config import GateThresholds

MIXED = [(1.0, 1.0), (0.0, 0.0), (0.0, 0.0), (1.0, 1.0)]
FLAT = [(0.0, 0.0)] * 4


def _round(keep_mixed, keep_flat, mixed: int = 4, flat: int = 4) -> list[dict]:
    """``mixed`` reward-varying groups then ``flat`` flat ones; ``keep_*(k)`` says whether member k was kept."""
    return _rows([[(v, r, keep_mixed(k)) for k, (v, r) in enumerate(MIXED)] for _ in range(mixed)]
                 + [[(v, r, keep_flat(k)) for k, (v, r) in enumerate(FLAT)] for _ in range(flat)])


INVERTED = _round(lambda k: False, lambda k: True, mixed=3, flat=5)  # keep_group: len(set(rewards)) == 1


def test_a_filter_that_keeps_flat_groups_and_drops_varying_ones_is_named() -> None:
    named = _named(INVERTED)
    assert "main:kept_share" not in named  # 20 of 32 kept: the kept share alone sees nothing
    found = named["main:informative_dropped"]
    assert found["severity"] == "error" and found["rate"] == pytest.approx(1.0)  # all 3 varying groups lost
    assert "5 of 5 flat" in found["message"] and "3 of 3" in found["message"], found["message"]
    assert found["examples"] and {e["traj_id"][:2] for e in found["examples"]} <= {"g0", "g1", "g2"}


def test_the_finding_joins_the_digest_with_the_other_main_checks() -> None:
    from meta_agent.main_checks import add_main_findings
    digest: dict = {"failure_modes": []}
    add_main_findings(digest, INVERTED, RANGE, thresholds=GateThresholds())
    assert [m["name"] for m in digest["failure_modes"]] == ["main:informative_dropped"]
    assert digest["main_checks"]["informative_dropped"]["passed"] is False


def test_filters_that_keep_the_contrast_are_not_named() -> None:
    assert "main:informative_dropped" not in _named(_round(lambda k: True, lambda k: True))  # the seed: keep all
    assert "main:informative_dropped" not in _named(_round(lambda k: True, lambda k: False))  # dynamic sampling
    one_lost = _round(lambda k: True, lambda k: True)
    for row in one_lost[:4]:  # one varying group of four dropped: below the line
        row["kept"] = False
    assert "main:informative_dropped" not in _named(one_lost)


def test_a_filter_that_keeps_only_paid_answers_loses_the_contrast_and_is_named() -> None:
    """Every group keeps only its paid members: each kept group is flat, whatever was varying."""
    named = _named(_round(lambda k: MIXED[k][1] >= 0.5, lambda k: False))
    assert named["main:informative_dropped"]["rate"] == pytest.approx(1.0)


def test_an_unrecorded_keep_mask_names_nothing_and_says_so() -> None:
    """verl leaves ``kept`` null: what the filter dropped is unknown, never blamed."""
    from meta_agent.main_checks import checks_on_main
    unknown = [dict(r, kept=None) for r in INVERTED]
    checks, findings = checks_on_main(unknown, RANGE, GateThresholds())
    [check] = [c for c in checks if c["name"] == "informative_dropped"]
    assert check["passed"] and "unknown" in check["detail"] and findings == []


@pytest.fixture()
def repo(tmp_path) -> HarnessRepo:
    return HarnessRepo.create(tmp_path / "harness", "math")


INVERTED_FILTER = '''
def keep_trajectory(traj):
    return True


def keep_group(group):
    rewards = [t.get("reward") for t in group]
    return len(set(rewards)) == 1
'''


def test_the_recipe_agent_loosens_a_filter_named_for_dropping_the_contrast(repo: HarnessRepo) -> None:
    repo.commit_files({"filters.py": INVERTED_FILTER}, "Train on consistent groups")
    mode = {"name": "main:informative_dropped", "source": "main_checks", "severity": "error", "rate": 1.0,
            "message": "main's filters removed the reward contrast of 3 of 3 varying groups", "examples": []}
    [p] = propose(repo, quiet_digest(kept_share=20 / 32, failure_modes=[mode]))
    check_branch(repo, p, "iv/r1-loosen-filters", ["filters.py"],
                 [("kept_share", "increase"), ("signal_share", "increase")])
    assert transcript(repo, 1, "unaddressed") == []
    after = load(repo, p.branch, "filters.py")
    mixed = [{"reward": 1.0}, {"reward": 0.0}]
    assert not load(repo, "main", "filters.py").keep_group(mixed) and after.keep_group(mixed)


def test_the_search_agent_previews_filter_edits_for_it_by_the_backtest() -> None:
    """Where loosen-filters declines, the mode is searched in the filter family: edits the backtest previews."""
    from test_search_agent import _files

    from meta_agent.agents.search import FAMILY, SYMPTOMS, candidates
    assert FAMILY["main:informative_dropped"] == "filter" and "signal_share" in dict(SYMPTOMS["filter"])
    [edit] = candidates(FAMILY["main:informative_dropped"], _files())
    assert set(edit.files) == {"filters.py"}  # backtest-measurable: previewed on the archive, not by generating
