"""Rows of one (run, round) streamed into a single new part file of the archive, made visible atomically.

The archive's writing half (``rl_backend.archive`` reads and samples); reached through
``Archive.round_writer``, which backends call with the rows of a round as they come::

    with archive.round_writer("r1", 3) as writer:   # one hidden .part-*.parquet.tmp until the block ends
        writer.write(table_of_step_1)
        writer.write(rows_of_step_2)
    writer.part                                     # part-<hash>.parquet, or the recorded part
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness_repo.failpoints import failpoint
from rl_backend.archive_records import record_part
from trajectory.archive_checks import (MAX_REPORTED_ERRORS, RUN_ID_PATTERN, VERSION_KEY, ArchiveError, check_table,
                                       validate_rows, where_true)
from trajectory.schema import SCHEMA_VERSION, TRAJECTORY_SCHEMA


class RoundArchive(Protocol):
    """What a round writer uses of its archive (``rl_backend.archive.Archive``, which makes the writer)."""

    root: Path

    def partition(self, run_id: str, round: int) -> Path:
        """The folder of one round's parts."""
        ...

    def drop_recorded(self, source: str, run_id: str, round: int, table: pa.Table) -> tuple[pa.Table, Path | None]:
        """``table`` less the rows recorded identically before, and the part of the first such row (or None)."""
        ...


MAX_REWARD_INFO_BYTES = 2048
"""A row's ``reward_info`` JSON at most (the seed rewards write under 100 bytes): issue 45 found a reward adding
3.3 KB to every row, which no check bounded."""
REWARD_INFO_HEAD_CHARS = 200


def cap_reward_info(table: pa.Table) -> pa.Table:
    """``table`` with every ``reward_info`` over :data:`MAX_REWARD_INFO_BYTES` replaced by a record of the cut."""
    column = table.column("reward_info")
    over = where_true(pc.greater(pc.binary_length(column), MAX_REWARD_INFO_BYTES))
    if not over:
        return table
    values = column.to_pylist()
    for i in over:
        text = values[i]
        values[i] = json.dumps({"reward_info_cut": {"bytes": len(text.encode()), "cap": MAX_REWARD_INFO_BYTES,
                                                    "head": text[:REWARD_INFO_HEAD_CHARS]}})
    return table.set_column(table.schema.get_field_index("reward_info"), table.schema.field("reward_info"),
                            pa.array(values, pa.string()))


class RoundWriter:
    """Rows of one (run, round) streamed into a single new part file, made visible atomically at the end.

    Each ``write`` checks its rows, drops those recorded identically before (refusing a recorded
    ``traj_id`` with other content, or one already written by this writer) and appends the rest as a
    row group of a hidden temporary file, so memory holds one chunk.  ``commit`` (the end of a ``with``
    block) renames it to ``part-<hash>.parquet``; ``abort`` (an exception in the block) removes it and
    any folder it created.  Readers list only ``part-*.parquet``: until the commit, nothing of the
    round's stream is visible, and a killed writer leaves only a ``.*.tmp`` file, which
    ``meta_agent.recovery`` removes.

        with archive.round_writer("r1", 3) as writer:
            writer.write(table_of_step_1)
            writer.write(rows_of_step_2)
        writer.part      # the new part, or the recorded one when every row was recorded already

    ``reward_info`` is the harness's text: a row's over ``MAX_REWARD_INFO_BYTES`` is stored as a short record of
    the cut (its size and first characters), so what a harness adds to the archive per row stays bounded.
    """

    def __init__(self, archive: RoundArchive, run_id: str, round: int) -> None:
        self.source = f"append_round(run_id={run_id!r}, round={round})"
        if not isinstance(run_id, str) or not RUN_ID_PATTERN.match(run_id):
            raise ArchiveError(f"{self.source}: run id must be 1-128 letters, digits, '.', '_' or '-' and start "
                               "with a letter or digit (it names a directory)")
        if isinstance(round, bool) or not isinstance(round, int) or round < 0:
            raise ArchiveError(f"{self.source}: round must be a non-negative int")
        self.archive, self.run_id, self.round = archive, run_id, round
        self.partition = archive.partition(run_id, round)
        self.part: Path | None = None
        self.rows_written = 0
        self._ids: list[pa.Array] = []
        self._digest = hashlib.sha256()
        self._tmp: Path | None = None
        self._writer: pq.ParquetWriter | None = None
        self._created: list[Path] = []

    def __enter__(self) -> RoundWriter:
        return self

    def __exit__(self, kind: type | None, *_: object) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()

    def write(self, rows: Sequence[dict] | pa.Table, labels: Sequence[str] | None = None) -> int:
        """Check and stage ``rows`` (dicts or an Arrow table); return how many were new.

        ``labels`` names a table's rows in error messages (e.g. the ``file:line`` each came from).
        """
        table = check_table(self._own(rows), self.source, labels) if isinstance(rows, pa.Table) \
            else validate_rows(self._fill(rows), self.source)
        self._check_partition(table)
        table = cap_reward_info(table)  # before the ledger compares: a re-write of the same rows cuts alike
        if self._ids:
            again = where_true(pc.is_in(table.column("traj_id"), pa.concat_arrays(self._ids)))
            if again:
                ids = ", ".join(repr(table.column("traj_id")[i].as_py()) for i in again[:MAX_REPORTED_ERRORS])
                raise ArchiveError(f"{self.source}: {len(again)} traj_id(s) already written in this round's "
                                   f"stream: {ids}; every trajectory needs its own id")
        new_table, recorded = self.archive.drop_recorded(self.source, self.run_id, self.round, table)
        self.part = self.part or recorded
        if new_table.num_rows:
            self._stage(new_table)
        return new_table.num_rows

    def _own(self, table: pa.Table) -> pa.Table:
        """Fill ``run_id``/``round`` columns a bulk producer left out."""
        for name, value, kind in (("run_id", self.run_id, pa.string()), ("round", self.round, pa.int32())):
            if name not in table.column_names:
                table = table.append_column(name, pa.array([value] * table.num_rows, kind))
        return table

    def _fill(self, rows: Sequence[dict]) -> list:
        filled = []
        for i, row in enumerate(rows):
            if isinstance(row, dict):
                for key, expected in (("run_id", self.run_id), ("round", self.round)):
                    if row.get(key, expected) != expected:
                        raise ArchiveError(f"{self.source}: row {i}, field '{key}': is {row[key]!r} but the rows "
                                           f"are being appended to {key} {expected!r}; append them to their own "
                                           "partition")
                row = {"run_id": self.run_id, "round": self.round, **row}
            filled.append(row)
        return filled

    def _check_partition(self, table: pa.Table) -> None:
        for name, expected in (("run_id", self.run_id), ("round", self.round)):
            other = where_true(pc.not_equal(table.column(name), expected))
            if other:
                i = other[0]
                raise ArchiveError(f"{self.source}: row {i} (traj_id {table.column('traj_id')[i].as_py()!r}), field "
                                   f"'{name}': is {table.column(name)[i].as_py()!r} but the rows are being appended "
                                   f"to {name} {expected!r}; append them to their own partition")

    def _stage(self, table: pa.Table) -> None:
        if self._writer is None:
            for folder in (self.partition, *self.partition.parents):
                if folder.exists():
                    break
                self._created.insert(0, folder)
            self.partition.mkdir(parents=True, exist_ok=True)
            self._tmp = self.partition / f".part-{uuid.uuid4().hex}.parquet.tmp"
            schema = TRAJECTORY_SCHEMA.with_metadata({VERSION_KEY: str(SCHEMA_VERSION).encode()})
            self._writer = pq.ParquetWriter(self._tmp, schema)
        self._writer.write_table(table.replace_schema_metadata(self._writer.schema.metadata))
        ids = table.column("traj_id").combine_chunks()
        self._ids.append(ids)
        self._digest.update("\n".join(ids.to_pylist()).encode() + b"\n")
        self.rows_written += table.num_rows

    def commit(self) -> Path | None:
        """Make the staged rows visible as one part file; return it (or the recorded part, or None if no rows)."""
        if self._writer is None:
            return self.part
        self._writer.close()
        self._writer = None
        target = self.partition / f"part-{self._digest.hexdigest()[:16]}.parquet"
        if target.exists():
            self.abort()
            raise ArchiveError(f"{target}: already exists but does not hold these rows; the archive is "
                               "inconsistent, inspect the partition by hand")
        with open(self._tmp, "rb") as handle:  # durable before it becomes visible: a round is never half-lost
            os.fsync(handle.fileno())
        os.replace(self._tmp, target)
        self._tmp, self._created, self.part = None, [], target
        failpoint("archive.part_written")
        # visible first, then recorded: a kill in between leaves a part the next check reads whole and records
        record_part(self.archive.root, target, self.rows_written)
        return target

    def abort(self) -> None:
        """Drop everything staged: the temporary file and the folders this writer created."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None
        for folder in reversed(self._created):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
        self._created = []
