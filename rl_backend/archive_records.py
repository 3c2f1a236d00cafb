"""The archive's records of its parts: ``_parts.jsonl`` (checksum and row count of every part written, and
every part removed on purpose) and ``_losses.jsonl`` (parts found missing, and put back).

The round writer records each part it makes visible; ``rl_backend.archive_ledger`` checks the files against
these records.  Plain files and JSON lines only, so that the writer below the ``Archive`` and the checks above it
share them.

    record_part(archive.root, part, rows)                       # as RoundWriter.commit does
    forget_part(archive.root, part, "its round trains again")  # removed on purpose: not a loss
    ledger(archive.root)["run_id=r1/round=0/part-ab.parquet"]    # {"part", "rows", "bytes", "sha256", ...}
    losses(archive.root)                                        # parts noticed missing, not restored since
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

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


def append_line(path: Path, record: dict) -> None:
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
    append_line(root / LEDGER, record)
    return record


def forget_part(root: Path, part: Path, why: str) -> None:
    """Remove ``part`` on purpose (a round that trains again) and say so in the ledger: not a loss."""
    part.unlink(missing_ok=True)
    append_line(root / LEDGER, {"part": part.relative_to(root).as_posix(), "removed": why,
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
