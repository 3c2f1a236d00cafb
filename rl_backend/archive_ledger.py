"""The archive's ledger: a checksum and row count for every part when it is written, checked before training.

``RoundWriter.commit`` appends one line per new part to ``<archive>/_parts.jsonl``
(``{"part", "rows", "bytes", "sha256"}``, the part's path relative to the archive).
``check_parts`` compares the files with it, and ``verify_run`` (called when a run
resumes, before anything trains) refuses a damaged part, naming it and how to restore
it, and records a part that is gone as a loss in ``<archive>/_losses.jsonl``, which
``losses`` lists for history and reports.

    problems = check_parts(archive, run_id="r1")    # damaged, lost, unrecorded
    forget_part(archive.root, part, "its round trains again")  # removed on purpose: not a loss
    lines = verify_run(archive, "r1")               # ArchiveError if a part is damaged
    archive_losses = losses(archive.root)

A part written before the ledger existed (or whose line a kill cut off: the part is made
visible first, then recorded) is read whole once, and recorded if it reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from trajectory.archive_checks import ArchiveError

if TYPE_CHECKING:
    from rl_backend.archive import Archive

LEDGER = "_parts.jsonl"
LOSSES = "_losses.jsonl"


def file_digest(path: Path) -> tuple[int, str]:
    """(bytes, sha256 hex) of ``path``, read in 1 MiB chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _append(path: Path, record: dict) -> None:
    """One JSON line, appended and flushed to disk (a torn last line is skipped by the readers)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torn = False
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as handle:
            handle.seek(-1, os.SEEK_END)
            torn = handle.read(1) != b"\n"  # a line a kill cut off: start on a line of our own
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(("\n" if torn else "") + json.dumps(record, sort_keys=True) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut off by a kill; its part is re-recorded by the next check
    return out


def record_part(root: Path, part: Path, rows: int) -> dict:
    """Append ``part``'s checksum and row count to the ledger of the archive at ``root``."""
    size, sha = file_digest(part)
    record = {"part": part.relative_to(root).as_posix(), "rows": rows, "bytes": size, "sha256": sha,
              "recorded": round(time.time(), 3)}
    _append(root / LEDGER, record)
    return record


def forget_part(root: Path, part: Path, why: str) -> None:
    """Remove ``part`` on purpose (a round that trains again) and say so in the ledger: not a loss."""
    part.unlink(missing_ok=True)
    _append(root / LEDGER, {"part": part.relative_to(root).as_posix(), "removed": why,
                            "recorded": round(time.time(), 3)})


def ledger(root: Path) -> dict[str, dict]:
    """The ledger's record of every part present by intent, by path relative to the archive (last line wins)."""
    out: dict[str, dict] = {}
    for r in _lines(root / LEDGER):
        if isinstance(r, dict) and "part" in r:
            if "removed" in r:
                out.pop(r["part"], None)
            else:
                out[r["part"]] = r
    return out


def losses(root: Path) -> list[dict]:
    """Parts found missing from the archive at ``root`` and not put back since:
    ``{"part", "run_id", "round", "rows", "noticed"}`` (a ``{"part", "restored"}`` line ends a loss)."""
    out: dict[str, dict] = {}
    for r in _lines(root / LOSSES):
        if isinstance(r, dict) and "part" in r:
            if "restored" in r:
                out.pop(r["part"], None)
            else:
                out[r["part"]] = r
    return list(out.values())


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
                _append(root / LOSSES, loss | {"noticed": round(time.time(), 3)})
    for rel, path in sorted(files.items()):
        result.checked += 1
        record = recorded.get(rel)
        if rel in noticed and record is not None and file_digest(path) == (record["bytes"], record["sha256"]):
            result.restored.append(rel)  # put back from a copy, byte for byte: no longer a loss
            if write:
                _append(root / LOSSES, {"part": rel, "restored": round(time.time(), 3)})
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

    from rl_backend.archive import Archive

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
