"""The archive's ledger: a checksum and row count for every part when it is written, checked before training.

``RoundWriter.commit`` appends one line per new part to ``<archive>/_parts.jsonl``
(``{"part", "rows", "bytes", "sha256"}``, the part's path relative to the archive).
``check_parts`` compares the files with it, and ``verify_run`` (called when a run
resumes, before anything trains) refuses a damaged part, naming it and how to restore
it, and records a part that is gone as a loss in ``<archive>/_losses.jsonl``, which
``losses`` lists for history and reports.

    problems = check_parts(archive, run_id="r1")    # damaged, lost, unrecorded
    lines = verify_run(archive, "r1")               # ArchiveError if a part is damaged

The two files and their readers and writers (``record_part``, ``forget_part``, ``ledger``, ``losses``) are
``rl_backend.archive_records``, below the ``Archive`` whose round writer records each part.

A part written before the ledger existed (or whose line a kill cut off: the part is made
visible first, then recorded) is read whole once, and recorded if it reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from trajectory.archive_checks import ArchiveError

from rl_backend.archive import Archive
from rl_backend.archive_records import LOSSES, append_line, file_digest, ledger, losses, record_part

@dataclass
class PartCheck:
    """What ``check_parts`` found; ``damaged`` lines name the part and how to restore it."""

    checked: int = 0
    damaged: list[str] = field(default_factory=list)
    lost: list[dict] = field(default_factory=list)
    """Recorded parts whose file is gone (newly noticed ones are written to ``_losses.jsonl``)."""
    restored: list[str] = field(default_factory=list)
    """Parts recorded as lost whose file is back with the ledger's checksum (recorded as restored when writing)."""
    recorded_now: list[str] = field(default_factory=list)
    """Parts that had no ledger line (older archives, a kill between commit and record): read whole, recorded."""


def _partition(rel: str) -> tuple[str, int]:
    run, round_ = rel.split("/")[:2]
    return run.removeprefix("run_id="), int(round_.removeprefix("round="))


def _restore_hint(rel: str, record: dict | None) -> str:
    held = f"it held {record['rows']} rows, sha256 {record['sha256'][:16]}...; " if record else ""
    return (f"{held}restore {rel} from a backup of the archive, or move it out of the archive (its rows are "
            "then recorded as a loss, which history and report show)")


def check_parts(archive: Archive, run_id: str | None = None, write: bool = True) -> PartCheck:
    """Every part of ``run_id`` (or of the whole archive) against the ledger: checksum, size, row count.
    ``write=False`` only looks (a command that may yet be refused must change nothing): a newly missing part
    is not recorded as a loss, an unrecorded one not recorded."""
    root = archive.root
    recorded = ledger(root)
    prefix = "" if run_id is None else f"run_id={run_id}/"
    result = PartCheck()
    files = {p.relative_to(root).as_posix(): p for p in archive._files(run_id, None)}
    noticed = {r["part"] for r in losses(root)}
    for rel, record in sorted(recorded.items()):
        if rel.startswith(prefix) and rel not in files:
            run, round_ = _partition(rel)
            loss = {"part": rel, "run_id": run, "round": round_, "rows": record.get("rows"),
                    "sha256": record.get("sha256")}
            result.lost.append(loss)
            if rel not in noticed and write:
                append_line(root / LOSSES, loss | {"noticed": round(time.time(), 3)})
    for rel, path in sorted(files.items()):
        result.checked += 1
        record = recorded.get(rel)
        if rel in noticed and record is not None and file_digest(path) == (record["bytes"], record["sha256"]):
            result.restored.append(rel)  # put back from a copy, byte for byte: no longer a loss
            if write:
                append_line(root / LOSSES, {"part": rel, "restored": round(time.time(), 3)})
        if record is None:
            problem = _unreadable(path)
            if problem:
                result.damaged.append(f"{path}: {problem}; {_restore_hint(rel, None)}")
            elif write:
                record_part(root, path, pq.ParquetFile(path).metadata.num_rows)
                result.recorded_now.append(rel)
            continue
        size, sha = file_digest(path)
        if size != record["bytes"] or sha != record["sha256"]:
            result.damaged.append(f"{path}: damaged ({size} bytes, sha256 {sha[:16]}... where the ledger recorded "
                                  f"{record['bytes']} bytes, {record['sha256'][:16]}...); "
                                  f"{_restore_hint(rel, record)}")
            continue
        rows = pq.ParquetFile(path).metadata.num_rows
        if rows != record["rows"]:
            result.damaged.append(f"{path}: holds {rows} rows where the ledger recorded {record['rows']}; "
                                  f"{_restore_hint(rel, record)}")
    return result


def _unreadable(path: Path) -> str | None:
    """Why ``path`` cannot be read whole (footer or any data page), or None."""
    try:
        parquet = pq.ParquetFile(path)
        for i in range(parquet.num_row_groups):
            parquet.read_row_group(i)
    except (OSError, pa.ArrowException) as exc:
        return f"unreadable ({str(exc)[:200]})"
    return None


def _refuse(found: PartCheck, run_id: str | None) -> None:
    if found.damaged:
        whose = "the archive" if run_id is None else f"run {run_id}"
        raise ArchiveError(f"{len(found.damaged)} archive part(s) of {whose} are damaged, so nothing "
                           "trains or is judged until they are restored:\n  " + "\n  ".join(found.damaged))


def refuse_damaged(archive: Archive, run_id: str | None) -> None:
    """Before a command writes anything: ArchiveError naming each damaged part of ``run_id``; writes nothing."""
    _refuse(check_parts(archive, run_id, write=False), run_id)


def verify_run(archive: Archive, run_id: str) -> list[str]:
    """Before a run resumes: refuse damaged parts (ArchiveError naming each); one line per lost part."""
    found = check_parts(archive, run_id)
    _refuse(found, run_id)
    lines = [f"{loss['part']}: missing from the archive; its {loss['rows']} rows of round {loss['round']} are "
             f"recorded as lost ({LOSSES})" for loss in found.lost]
    lines += [f"{rel}: had no checksum (written before the ledger, or the controller stopped just after); "
              "read whole and recorded" for rel in found.recorded_now]
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m rl_backend.archive_ledger ARCHIVE [--run-id R]``: check every part; exit 1 if one is damaged."""
    import argparse

    parser = argparse.ArgumentParser(description="Check an archive's parts against their recorded checksums.")
    parser.add_argument("archive", type=Path)
    parser.add_argument("--run-id")
    args = parser.parse_args(argv)
    found = check_parts(Archive(args.archive), args.run_id)
    for line in found.damaged:
        print(f"DAMAGED {line}")
    for loss in found.lost:
        print(f"LOST    {loss['part']} ({loss['rows']} rows of run {loss['run_id']} round {loss['round']})")
    for rel in found.recorded_now:
        print(f"RECORDED {rel} (had no checksum)")
    print(f"{found.checked} part(s) checked: {len(found.damaged)} damaged, {len(found.lost)} lost")
    return 1 if found.damaged else 0


if __name__ == "__main__":
    raise SystemExit(main())
