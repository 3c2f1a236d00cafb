"""The headline precision counts only merges a later round could check; a merge waiting for its next round and
one whose benefit cannot be measured live are listed with their reason, not counted as failures (issue 48:
"backtest precision 0.33 (1 of 3 merges confirmed live)" counted both)."""

from __future__ import annotations

from pathlib import Path

from harness_repo.repo import HarnessRepo
from meta_agent.review.precision import checked_precision, describe, explain_change


def proposed(repo: HarnessRepo, tmp_path: Path, round: int, slug: str) -> str:
    wt = repo.start_intervention(round, slug, worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text((wt.path / "JOURNAL.md").read_text() + f"\n{slug} {round}\n")
    repo.commit(wt, f"Change {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": ["signal_share increase"],
                                      "Recipe-Change": slug})
    repo.remove_worktree(wt)
    repo.merge(wt.branch, {"Verdict": "merged; test"}, f"Merge {wt.branch}")
    return wt.branch


def test_precision_counts_only_checkable_merges_and_names_the_rest(tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    held, blind = proposed(repo, tmp_path, 0, "held"), proposed(repo, tmp_path, 0, "blind")
    missed = proposed(repo, tmp_path, 0, "missed")
    late = proposed(repo, tmp_path, 1, "late")  # merged in the last round: nothing trained on it yet
    benefit = {"kinds": {"signal_share increase": "benefit"}}
    digests = [{"round": 0, "live_checks": []},
               {"round": 1, "live_checks": [
                   {"branch": held, "outcome": "confirmed", "predictions": {"signal_share increase": "held"},
                    **benefit},
                   {"branch": blind, "outcome": "refuted", "predictions": {"signal_share increase": "unmeasurable"},
                    **benefit},
                   {"branch": missed, "outcome": "refuted", "predictions": {"signal_share increase": "inconclusive"},
                    **benefit}]}]
    figures = checked_precision(repo.interventions(), digests)
    assert (figures["confirmed"], figures["checked"], figures["precision"]) == (1, 2, 0.5)
    text = describe(figures)
    assert text.startswith("backtest precision 0.50: 1 of 2 merges a later round could check confirmed live")
    assert f"1 waiting: {late} (merged in round 1; the next round has not trained on it yet)" in text
    assert f"1 unmeasurable live: {blind} (signal_share increase: no control for it live)" in text
    assert "rejected changes tried again undefined (nothing rejected)" in text and "nan" not in text


def test_a_run_with_nothing_checkable_says_undefined_in_words(tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    late = proposed(repo, tmp_path, 0, "late")
    text = describe(checked_precision(repo.interventions(), [{"round": 0}]))
    assert text.startswith("backtest precision undefined: no merge a later round could check (not counted: 1 waiting: "
                           f"{late} (merged in round 0")


def test_an_unmeasurable_prediction_says_why_it_confirms_nothing() -> None:
    line = explain_change("signal_share increase", "unmeasurable", None, 1)
    assert line == ("signal_share increase: unmeasurable (no control for it live: a benefit counts only against the "
                    "change the round before made without this merge; round 1 has no round -1 and no control arm)")
    assert explain_change("truncation_rate decrease", "held", None, 2) == "truncation_rate decrease: held"
