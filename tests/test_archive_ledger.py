"""The archive's ledger: a checksum and row count per part, checked before a run trains again.

Real Parquet parts written by ``Archive.append_round``, then damaged the ways a disk, a copy or a
person damages them: truncated, a data page corrupted behind an intact footer, moved out.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_backend.archive import Archive, ArchiveError
from rl_backend.archive_ledger import check_parts, main, verify_run
from rl_backend.archive_records import LEDGER, forget_part, ledger, losses
from rl_backend.synthetic import synthetic_math_rows


def _verify(*_args) -> tuple[float, dict]:
    return 0.0, {}


@pytest.fixture
def archive(tmp_path: Path) -> Archive:
    archive = Archive(tmp_path / "archive")
    for round_ in (0, 1):
        archive.append_round("r1", round_, synthetic_math_rows("r1", round_, 50, 4, seed=round_, verify=_verify))
    archive.append_round("other", 0, synthetic_math_rows("other", 0, 5, 4, seed=9, verify=_verify))
    return archive


def _part(archive: Archive, round_: int) -> Path:
    (part,) = archive.parts("r1", round_)
    return part


def test_every_part_is_recorded_with_its_checksum_and_rows(archive):
    recorded = ledger(archive.root)
    assert sorted(recorded) == sorted(p.relative_to(archive.root).as_posix() for p in archive._files(None, None))
    assert [recorded[p]["rows"] for p in sorted(recorded)] == [20, 200, 200]
    assert verify_run(archive, "r1") == []
    assert check_parts(archive).checked == 3


def test_a_truncated_part_stops_the_run_named_with_how_to_restore_it(archive):
    part = _part(archive, 0)
    part.write_bytes(part.read_bytes()[:-100])
    with pytest.raises(ArchiveError) as refused:
        verify_run(archive, "r1")
    message = str(refused.value)
    assert str(part) in message and "restore" in message and "held 200 rows" in message
    assert "nothing trains" in message
    assert verify_run(archive, "other") == []  # another run's parts are not this run's problem


def test_a_corrupted_data_page_behind_an_intact_footer_is_named(archive):
    part = _part(archive, 1)
    data = bytearray(part.read_bytes())
    for i in range(200, 1200):  # inside the first column chunk's pages; the footer at the end is untouched
        data[i] ^= 0x5A
    part.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="damaged") as refused:
        verify_run(archive, "r1")
    assert str(part) in str(refused.value)
    with pytest.raises(ArchiveError) as read:
        archive.read(run_id="r1", round=1)
    assert str(part) in str(read.value) and "restore it from a backup" in str(read.value)


def test_a_part_moved_out_is_recorded_as_a_loss_once(archive, tmp_path, capsys):
    part = _part(archive, 0)
    part.rename(tmp_path / "moved-out.parquet")
    lines = verify_run(archive, "r1")
    assert lines == [f"{part.relative_to(archive.root).as_posix()}: missing from the archive; its 200 rows of "
                     "round 0 are recorded as lost (_losses.jsonl)"]
    assert verify_run(archive, "r1") == lines  # still reported, recorded once
    (loss,) = losses(archive.root)
    assert (loss["run_id"], loss["round"], loss["rows"]) == ("r1", 0, 200)
    assert main([str(archive.root)]) == 0
    assert "LOST    run_id=r1/round=0/" in capsys.readouterr().out


def test_a_part_without_a_ledger_line_is_read_whole_and_recorded(archive):
    (archive.root / LEDGER).write_text("")  # an archive from before the ledger, or a kill just after commit
    lines = verify_run(archive, "r1")
    assert ["had no checksum" in line for line in lines] == [True, True], lines
    assert verify_run(archive, "r1") == []
    assert sorted(r["rows"] for r in ledger(archive.root).values()) == [200, 200]


def test_a_torn_ledger_line_is_skipped(archive):
    with open(archive.root / LEDGER, "a") as handle:
        handle.write('{"part": "run_id=r1/round=9/part-x.parq')
    assert verify_run(archive, "r1") == []
    part = _part(archive, 0)
    part.unlink()
    (archive.root / LEDGER).write_text((archive.root / LEDGER).read_text() + '{"part": "run_id=r1/rou')
    archive.append_round("r1", 2, synthetic_math_rows("r1", 2, 5, 4, seed=2, verify=_verify))
    assert ledger(archive.root)[_part(archive, 2).relative_to(archive.root).as_posix()]["rows"] == 20
    assert [line.split(":")[0] for line in verify_run(archive, "r1")] == [part.relative_to(archive.root).as_posix()]
    assert json.loads((archive.root / LEDGER).read_text().splitlines()[-1])["rows"] == 20


def test_a_part_removed_on_purpose_is_not_a_loss(archive):
    """Recovery removes the part of a round whose training was killed before its result: it trains again."""
    part = _part(archive, 1)
    forget_part(archive.root, part, "round 1 trains again")
    assert not part.exists()
    assert verify_run(archive, "r1") == [] and losses(archive.root) == []
    archive.append_round("r1", 1, synthetic_math_rows("r1", 1, 50, 4, seed=1, verify=_verify))
    assert verify_run(archive, "r1") == [] and _part(archive, 1).exists()
