"""A damaged or lost archive part is shown where users look: ``history``, ``show <round>``, ``report`` (HTML and
Markdown) name it with what it affects and how to restore it, without writing anything; ``backtest`` refuses to
judge over a damaged part; a part put back byte for byte is recorded as restored (issue 48)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.config import TripwireThresholds
from meta_agent.run_dir import RunDir, write_json_atomic
from meta_agent.tripwire import compare_rounds
from review_run import cli
from rl_backend.archive import Archive
from rl_backend.archive_ledger import verify_run
from rl_backend.archive_records import LOSSES, losses
from rl_backend.synthetic import synthetic_math_rows
from test_loop import _tiny_run


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _run(tmp_path: Path) -> tuple[RunDir, HarnessRepo, Path]:
    rd, repo = _tiny_run(tmp_path / "run")
    archive = Archive(rd.archive)
    for n in (0, 1):
        archive.append_round(rd.path.name, n, synthetic_math_rows(rd.path.name, n, 8, 4, seed=n,
                                                                   verify=lambda *a: (0.0, {})))
        rd.round_dir(n).mkdir(parents=True)
        write_json_atomic(rd.round_dir(n) / "digest.json", {"round": n})
    rd.save_state({"round": 2, "phase": "done", "status": "finished", "rounds": {}})
    wt = repo.start_intervention(1, "some-change", worktree_root=tmp_path / "wt")
    (wt.path / "JOURNAL.md").write_text("a change\n")
    repo.commit(wt, "Change", {"Hypothesis": "h", "Predicted-Effect": ["miss_rate decrease"]})
    repo.remove_worktree(wt)
    (part,) = archive.parts(rd.path.name, 1)
    return rd, repo, part


@pytest.mark.parametrize("damage", ["truncated", "moved_out"])
def test_every_view_shows_the_part_and_how_to_restore_it(tmp_path, damage):
    rd, _, part = _run(tmp_path)
    rel = part.relative_to(rd.archive).as_posix()
    if damage == "truncated":
        part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
        said, alarms = [f"archive part damaged: {part}", "restore " + rel], []
    else:
        part.rename(tmp_path / "moved-out.parquet")
        # the loop's tripwire of round 2 then compares round 1's missing rows: a rows_missing alarm, as it writes it
        (alarm,) = compare_rounds([], Archive(rd.archive).rows(run_id=rd.path.name, round=0),
                                  reward_range=(0.0, 1.0), thresholds=TripwireThresholds())
        write_json_atomic(rd.round_dir(1) / "digest.json", {"round": 1, "tripwire": [
            {k: (None if v != v else v) for k, v in alarm.__dict__.items()}]})
        said = [f"archive part lost: {rel} (32 rows of round 1, not yet recorded)", "put the file back from a copy",
                "the tripwire's comparisons of rounds 0/1 and 1/2"]
        alarms = ["round 1: tripwire alarm rows_missing (reverted nothing): the before round has no training rows"]
    before = _files(rd.path)
    history = cli("history", "--run-dir", str(rd.path), columns=200)
    show = cli("show", "1", "--run-dir", str(rd.path), columns=200)
    assert history.returncode == 0 and show.returncode == 0, history.stderr + show.stderr
    assert _files(rd.path) == before  # looking writes nothing
    for out, expected in ((" ".join(history.stdout.split()), said + alarms), (" ".join(show.stdout.split()), said)):
        for text in expected:
            assert text in out, (text, out[-2000:])
    assert rel not in " ".join(cli("show", "0", "--run-dir", str(rd.path), columns=200).stdout.split())
    report = cli("report", "--run-dir", str(rd.path), columns=200)
    assert report.returncode == 0, report.stderr[-3000:]
    for page in (rd.path / "report" / "index.html", rd.path / "report" / "report.md"):
        text = " ".join(html.unescape(page.read_text()).split())
        assert all(t in text for t in said + alarms), page
    backtest = cli("backtest", "iv/r1-some-change", "--run-dir", str(rd.path), "--dry-run", columns=200)
    if damage == "truncated":
        assert backtest.returncode == 1 and "damaged" in backtest.stderr and "restore" in backtest.stderr
        assert "Traceback" not in backtest.stderr


def test_a_part_put_back_is_recorded_as_restored(tmp_path):
    rd, _, part = _run(tmp_path)
    copy = tmp_path / "copy.parquet"
    shutil.copy(part, copy)
    part.unlink()
    archive = Archive(rd.archive)
    assert [line.split(":")[0] for line in verify_run(archive, rd.path.name)] == [
        part.relative_to(rd.archive).as_posix()]
    assert len(losses(rd.archive)) == 1
    shutil.copy(copy, part)
    assert verify_run(archive, rd.path.name) == [] and losses(rd.archive) == []
    last = json.loads((rd.archive / LOSSES).read_text().splitlines()[-1])
    assert last["part"] == part.relative_to(rd.archive).as_posix() and "restored" in last
    assert "archive part" not in cli("history", "--run-dir", str(rd.path), columns=200).stdout
