"""Held-out attacks on issue 44's three defences, written after the code froze (commit 5e0e7c2), run once:

- the refuted rule reads knobs as training does: more spellings of a refuted 0.7 -> 0.91 move;
- ``main:informative_dropped`` and loosen-filters: filters written so a reader of ``def`` lines is misled;
- the generation preview's cap: main's own budget past the cap as well.
"""

from __future__ import annotations

import pytest
from test_main_judged import _named
from test_main_judged_filter import INVERTED, _round
from test_recipe_agent import propose, quiet_digest, transcript
from test_refuted_heldout import _ctx, _knob_change, _refuted

from harness_repo.repo import HarnessRepo
from meta_agent.agents.refuted import declined


@pytest.mark.parametrize("new", ["temperature: !!float 0.91", "temperature: !!str 0.91", "temperature: 0.91e0",
                                 "temperature: +.91", "temperature: 0.910000"])
def test_more_spellings_of_a_refuted_move_are_the_same_move(tmp_path, new: str) -> None:
    repo = _refuted(tmp_path, "temperature: 0.7", new)
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.88"), _ctx(tmp_path, repo))


def test_a_refuted_move_written_as_a_yaml_merge_key_is_the_same_move(tmp_path) -> None:
    """The grpo block merges a mapping anchored in the notes' place: ``<<: *hot``."""
    repo = _refuted(tmp_path, "domain: math|temperature: 0.7\n",
                    "x: &hot {temperature: 0.91}\ndomain: math|<<: *hot\n")
    # an unknown top-level key (x) is refused by training: this spelling never trained, so it holds nothing back
    assert declined(_knob_change(repo, "temperature: 0.7", "temperature: 0.88"), _ctx(tmp_path, repo)) is None


def test_a_filter_that_drops_half_of_every_kind_of_group_is_below_both_lines() -> None:
    """Half the varying groups lost and half the flat ones: 0.5 is not above the line, and kept_share is 0.5."""
    rows = _round(lambda k: True, lambda k: True)
    for row in rows[:8] + rows[16:24]:  # groups 0-1 (varying) and 4-5 (flat) of 4 + 4
        row["kept"] = False
    named = _named(rows)
    assert "main:informative_dropped" not in named and "main:kept_share" not in named


_HIDDEN = '''
def keep_trajectory(traj):
    return True


def keep_group(group):
    return True


def _consistent(group):
    return len({t.get("reward") for t in group}) == 1


keep_group = _consistent
'''


def test_an_inverted_filter_bound_by_assignment_is_still_loosened(tmp_path) -> None:
    from meta_agent.main_checks import judge_main
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"filters.py": _HIDDEN}, "Train on consistent groups")
    [mode] = [m for m in judge_main(INVERTED, (0.0, 1.0)) if m["name"] == "main:informative_dropped"]
    proposals = propose(repo, quiet_digest(kept_share=20 / 32, failure_modes=[mode]))
    assert [p.branch for p in proposals] == ["iv/r1-loosen-filters"], transcript(repo, 1)["loosen-filters"]


def test_main_past_the_cap_too_leaves_the_symptom_unknown_not_zero() -> None:
    """main's budget (512) and the candidate's (1024) both past the preview's cap, every completion still going:
    neither side can be judged, so the edit is unranked, not scored 0 -> 0."""
    from test_generation_preview_cap import _sample

    from meta_agent.agents.preview_evidence import generation_score
    from meta_agent.generation_preview import _total, compare
    capped = _sample([0, 0, 0, 0], [0, 0, 0, 0], [4, 4, 4, 4])
    rates = compare(capped, capped, seed=0)
    out = {"symptom": "truncated", "main": _total(rates, ["truncated"], "main"),
           "candidate": _total(rates, ["truncated"], "candidate"), "rates": rates, "seconds": 1.0, "settings": {}}
    assert out["main"] is None and generation_score(out)[0] is None
