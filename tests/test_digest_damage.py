"""``digest.md`` names a lost or damaged archive part, the tripwire alarm and the live verdicts it affected, and how to
restore it, as ``history``/``show``/``report`` do; a live check over rounds with missing rows says how many and which
part instead of judging on fewer rows unsaid (issue 48). The digest is built from a real archive with the loop's own
functions (the digest, the ledger's view of the parts, the tripwire, the live check)."""

from __future__ import annotations

import pytest

from meta_agent.config import TripwireThresholds
from meta_agent.digest import render_digest_markdown
from meta_agent.live_check import check_live_effects, live_lines
from meta_agent.review.digest_columns import build_digest_from_table, read_round
from meta_agent.review.losses import archive_losses
from meta_agent.tripwire import compare_rounds
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from test_loop import _tiny_run


def _digest(archive: Archive, run_id: str, n: int, previous: list[dict]) -> dict:
    return build_digest_from_table(n, read_round(archive, run_id, n), metrics=[], findings=[],
                                   eval={"heldout_accuracy": 0.5}, previous=previous)


def _round_n_digest(tmp_path, damage: str | None) -> tuple[dict, str, str, list[str]]:
    """Rounds 0-2 archived, a round-0 merge predicting a benefit and a round-1 one predicting a side effect; round
    0's part ``damage``d (moved out, or truncated); round ``1`` (moved out) or ``2`` (truncated: round 0's rows are
    then unreadable, so the loop measures only later rounds) digested as the loop's digest phase does."""
    rd, repo = _tiny_run(tmp_path / "run")
    run_id, archive = rd.path.name, Archive(rd.archive)
    for n in (0, 1, 2):
        archive.append_round(run_id, n, synthetic_math_rows(run_id, n, 8, 4, seed=n, verify=lambda *a: (0.0, {})))
    (part,) = archive.parts(run_id, 0)
    rel = part.relative_to(rd.archive).as_posix()
    branches = []
    for n, effect in ((0, "truncation_rate decrease"), (1, "kept_share decrease")):
        wt = repo.start_intervention(n, f"change-{n}", worktree_root=tmp_path / "wt")
        (wt.path / "JOURNAL.md").write_text(f"change {n}\n")
        repo.commit(wt, f"Change {n}", {"Hypothesis": "h", "Predicted-Effect": [effect]})
        repo.remove_worktree(wt)
        repo.merge(wt.branch, {"Verdict": "merged; test"}, f"Merge {wt.branch}")
        branches.append(wt.branch)
    digests = [_digest(archive, run_id, n, []) for n in (0, 1)]  # before the damage, as the loop wrote them
    if damage == "moved_out":
        part.rename(tmp_path / "moved-out.parquet")
    elif damage == "truncated":
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    n = 2 if damage == "truncated" else 1
    digest = _digest(archive, run_id, n, digests[:n])
    digest["archive_losses"] = archive_losses(rd.archive, run_id)
    before, after = archive.rows(run_id=run_id, round=n - 1), archive.rows(run_id=run_id, round=n)
    alarms = compare_rounds(before, after, reward_range=(0.0, 1.0), thresholds=TripwireThresholds())
    digest["tripwire"] = [{k: (None if v != v else v) for k, v in a.__dict__.items()} for a in alarms]
    messages: list[str] = []
    digest["live_checks"] = check_live_effects(repo, n, digest, digests[:n], before, after, messages.append,
                                               control_rows=[], control="previous")
    return digest, rel, branches[n - 1], messages


def test_a_part_moved_out_is_named_with_the_alarm_and_the_live_verdict_it_affected(tmp_path):
    digest, rel, branch, messages = _round_n_digest(tmp_path, "moved_out")
    text = " ".join(render_digest_markdown(digest).split())
    assert "## Archive damage" in text
    assert f"archive part lost: `{rel}` (32 rows of round 0); its rows are missing from" in text
    assert "tripwire alarm rows_missing (reverted nothing): the before round has no training rows" in text
    (check,) = digest["live_checks"]
    said = f"measured without 32 rows: {rel} (lost, 32 rows of round 0)"
    assert check["branch"] == branch and check["rows_missing"].startswith(said)
    assert f"live check {branch}: {check['outcome']}, {said}" in text
    assert "python -m rl_backend.archive_ledger" in text and "put each file back from a copy" in text
    (line,) = [m for m in messages if m.startswith(f"live check {branch}")]
    assert said in line  # the console says it too
    (shown,) = live_lines([digest])[branch]
    assert said in shown  # and history/report, which read the digest's live checks


def test_a_truncated_part_is_named_as_damaged(tmp_path):
    digest, rel, branch, _ = _round_n_digest(tmp_path, "truncated")
    text = " ".join(render_digest_markdown(digest).split())
    assert f"archive part damaged: `{rel}` (32 rows of round 0)" in text
    assert "comparison of rounds 0/1 (a rows_missing alarm) and the live checks of rounds 1 and 2 (round 2" in text
    assert "-1/0" not in text  # nothing comes before round 0
    (check,) = digest["live_checks"]
    assert check["branch"] == branch and "rows_missing" not in check  # rounds 1 and 2 are whole


@pytest.mark.parametrize("damage", [None])
def test_a_whole_archive_shows_no_damage_section(tmp_path, damage):
    digest, _, _, messages = _round_n_digest(tmp_path, damage)
    assert digest["archive_losses"] == [] and "Archive damage" not in render_digest_markdown(digest)
    (check,) = digest["live_checks"]
    assert "rows_missing" not in check and not any("measured without" in m for m in messages)
