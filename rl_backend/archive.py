"""The trajectory archive: a Parquet dataset partitioned by run and round (DESIGN §4).

Layout::

    <root>/run_id=<id>/round=<n>/part-<hash>.parquet

Each part file holds whole rows of ``trajectory.schema.TRAJECTORY_SCHEMA`` (the
partition columns are kept inside the files too, so a file read on its own is
self-describing).  Files are written once, atomically, and never rewritten: a
resumed round that appends the same rows again is a no-op, and a row that reuses
a recorded ``traj_id`` with different content is refused.

    archive = Archive(Path("runs/demo/archive"))
    archive.append_round("demo", 0, rows)    # dicts, or an Arrow table from a bulk producer
    with archive.round_writer("demo", 1) as writer:   # streamed: one part, visible only when the block ends
                                                      # (rl_backend.archive_writer.RoundWriter)
        for chunk in chunks:
            writer.write(chunk)
    table = archive.read(run_id="demo", split="train")
    sample = archive.sample_groups({"run_id": "demo", "where": pc.field("verified").is_valid()},
                                   n_groups=64, seed=0)  # reads only the chosen groups' rows
    key = archive.sample_id(sample)          # cache key of the backtest sample
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import operator
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from rl_backend.archive_writer import RoundWriter
from trajectory.archive_checks import (  # noqa: F401  (re-exported: the archive's public errors and checks)
    MAX_REPORTED_ERRORS,
    RUN_ID_PATTERN,
    VERSION_KEY,
    ArchiveError,
    check_batch,
    check_file_schema,
    check_table,
    where_true,
    validate_rows,
)
from trajectory.schema import JSON_COLUMNS, SPLITS, TRAJECTORY_SCHEMA

GROUP_KEY = ("run_id", "round", "group_id")
"""The columns that identify one GRPO group across the archive."""

def _json_loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def sample_id(table: pa.Table) -> str:
    """A short stable hash of the sorted ``traj_id``s: the cache key of a sample."""
    ids = sorted(table.column("traj_id").to_pylist())
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- the archive


class Archive:
    """A trajectory archive rooted at ``root`` (created on first write)."""

    validate_rows = staticmethod(validate_rows)
    sample_id = staticmethod(sample_id)

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Archive({str(self.root)!r})"

    # -- layout

    def partition(self, run_id: str, round: int) -> Path:
        """The folder that holds the part files of (``run_id``, ``round``)."""
        return self.root / f"run_id={run_id}" / f"round={round}"

    def parts(self, run_id: str, round: int) -> list[Path]:
        """The visible part files of (``run_id``, ``round``), sorted."""
        return self._files(run_id, round)

    def runs(self) -> list[str]:
        """Run ids with at least one recorded part file, sorted."""
        return sorted(d.name.removeprefix("run_id=") for d in self.root.glob("run_id=*")
                      if any(d.glob("round=*/part-*.parquet")))

    def rounds(self, run_id: str) -> list[int]:
        """Rounds of ``run_id`` with at least one recorded part file, ascending."""
        found = []
        for d in (self.root / f"run_id={run_id}").glob("round=*"):
            number = d.name.removeprefix("round=")
            if number.isdigit() and any(d.glob("part-*.parquet")):
                found.append(int(number))
        return sorted(found)

    def _files(self, run_id: str | None, round: int | None) -> list[Path]:
        # Partition pruning by directory: only the files of the asked run/round are opened.
        run_glob = "run_id=*" if run_id is None else f"run_id={run_id}"
        round_glob = "round=*" if round is None else f"round={round}"
        return sorted(self.root.glob(f"{run_glob}/{round_glob}/part-*.parquet"))

    # -- reading

    def _batches(self, files: list[Path], where: ds.Expression | None,
                 columns: list[str]) -> Iterator[tuple[str, pa.RecordBatch]]:
        """(file, batch) pairs of the rows matching ``where``, every file and batch checked."""
        if not files:
            return
        for path in files:
            check_file_schema(path)
        scanned = list(dict.fromkeys([*columns, "schema_version"]))  # versions are checked on every read
        for path in files:  # one file at a time, so that a read error names its file
            dataset = ds.dataset([str(path)], schema=TRAJECTORY_SCHEMA, format="parquet")
            try:
                for tagged in dataset.scanner(columns=scanned, filter=where).scan_batches():
                    check_batch(tagged.fragment.path, tagged.record_batch)
                    yield tagged.fragment.path, tagged.record_batch.select(columns)
            except pa.ArrowInvalid as exc:  # a value that cannot be cast to the schema's type
                raise ArchiveError(f"{path}: does not fit the trajectory schema or cannot be read ({exc}); "
                                   "restore it from a backup of the archive, or move it out of the archive") from exc
            except OSError as exc:  # a corrupted data page behind an intact footer
                raise ArchiveError(f"{path}: a data page cannot be read ({exc}); restore it from a backup of the "
                                   "archive, or move it out of the archive (its rows are then recorded as a loss; "
                                   "python -m rl_backend.archive_ledger checks every part)") from exc

    def _scan(self, files: list[Path], where: ds.Expression | None, columns: list[str]) -> pa.Table:
        wanted = pa.schema([TRAJECTORY_SCHEMA.field(c) for c in columns])
        return pa.Table.from_batches([b for _, b in self._batches(files, where, columns)], schema=wanted)

    def read(self, run_id: str | None = None, round: int | None = None, split: str | None = None,
             domain: str | None = None, columns: Sequence[str] | None = None,
             where: ds.Expression | None = None) -> pa.Table:
        """Rows matching every given filter, as a table with the schema's column types.

        ``run_id``/``round`` prune partitions by directory; ``split``/``domain``
        and ``where`` (any further pyarrow filter, e.g. ``pc.field("verified").is_valid()``)
        are pushed down to the Parquet scan.  ``columns`` selects a projection.
        """
        filter_ = self._filter(run_id, round, split, domain, where)
        return self._scan(self._files(run_id, round), filter_, self._columns(columns))

    @staticmethod
    def _columns(columns: Sequence[str] | None) -> list[str]:
        columns = list(columns) if columns is not None else TRAJECTORY_SCHEMA.names
        unknown = [c for c in columns if c not in TRAJECTORY_SCHEMA.names]
        if unknown:
            raise ArchiveError(f"unknown column(s) {', '.join(unknown)}; see trajectory/schema.py for the names")
        return columns

    @staticmethod
    def _filter(run_id: str | None, round: int | None, split: str | None, domain: str | None,
                where: ds.Expression | None) -> ds.Expression | None:
        if split is not None and split not in SPLITS:
            raise ArchiveError(f"split {split!r} is unknown; expected one of {', '.join(SPLITS)}")
        conditions = [ds.field(name) == value for name, value in
                      (("run_id", run_id), ("round", round), ("split", split), ("domain", domain))
                      if value is not None]
        return _all_of([*conditions, *([where] if where is not None else [])])

    def rows(self, run_id: str | None = None, round: int | None = None, split: str | None = None,
             domain: str | None = None, columns: Sequence[str] | None = None) -> list[dict]:
        """Like ``read`` but as a list of dicts, with the JSON columns parsed."""
        table = self.read(run_id=run_id, round=round, split=split, domain=domain, columns=columns)
        rows = table.to_pylist()
        json_names = [c for c in table.column_names if c in JSON_COLUMNS]
        for row in rows:
            for name in json_names:
                row[name] = _json_loads(row[name])
        return rows

    def count(self, run_id: str | None = None, round: int | None = None, split: str | None = None,
              domain: str | None = None) -> int:
        """Number of rows matching the filters."""
        return self.read(run_id=run_id, round=round, split=split, domain=domain, columns=["traj_id"]).num_rows

    # -- writing

    def append_round(self, run_id: str, round: int, rows: Sequence[dict] | pa.Table) -> Path:
        """Record ``rows`` as trajectories of (``run_id``, ``round``); return the part file that holds them.

        ``rows`` are dicts (checked by ``validate_rows``) or an Arrow table (checked by ``check_table``,
        JSON columns as text).  Rows may leave out ``run_id``, ``round`` and ``schema_version`` (filled
        in).  Calling again with rows already recorded identically writes nothing, so a resumed round
        never duplicates; only the new rows of a partly recorded batch are written.  A recorded
        ``traj_id`` with different content raises ``ArchiveError``: nothing recorded is ever rewritten.
        """
        with self.round_writer(run_id, round) as writer:
            if not len(rows):
                raise ArchiveError(f"{writer.source}: no rows given; a round records at least one trajectory")
            writer.write(rows)
        assert writer.part is not None  # at least one row was written or found recorded
        return writer.part

    def round_writer(self, run_id: str, round: int) -> RoundWriter:
        """A :class:`RoundWriter` streaming rows of (``run_id``, ``round``) into one new part file."""
        return RoundWriter(self, run_id, round)

    def drop_recorded(self, source: str, run_id: str, round: int, table: pa.Table) -> tuple[pa.Table, Path | None]:
        """``table`` less the rows recorded identically before, and the part of the first such row (or None);
        ``ArchiveError`` (naming ``source``) for rows that reuse a recorded id with other content."""
        files = self._files(run_id, round)
        if not files:
            return table, None
        where = ds.field("traj_id").isin(table.column("traj_id"))
        # ids first (one column): a fresh chunk, the usual case, never reads the recorded rows whole
        if not any(b.num_rows for _, b in self._batches(files, where, ["traj_id"])):
            return table, None
        recorded: dict[str, tuple[dict, str]] = {}
        for path, batch in self._batches(files, where, TRAJECTORY_SCHEMA.names):
            for row in batch.to_pylist():
                recorded[row["traj_id"]] = (row, path)
        conflicts, keep = [], []
        for i, row in enumerate(table.to_pylist()):
            old = recorded.get(row["traj_id"])
            if old is None:
                keep.append(i)
                continue
            differing = [name for name in TRAJECTORY_SCHEMA.names if name != "schema_version"
                         and _comparable(name, row[name]) != _comparable(name, old[0][name])]
            if differing:
                conflicts.append(f"row {i}, traj_id {row['traj_id']!r}: differs from the row recorded in "
                                 f"{old[1]} in field(s) {', '.join(differing)}")
        if conflicts:
            shown = "\n  ".join(conflicts[:MAX_REPORTED_ERRORS])
            raise ArchiveError(f"{source}: {len(conflicts)} row(s) reuse a recorded traj_id with different "
                               f"content; recorded rows are never rewritten, so give new trajectories new ids:"
                               f"\n  {shown}")
        first_recorded = Path(recorded[next(iter(recorded))][1])
        return table.take(pa.array(keep, pa.int64())), first_recorded


    # -- sampling

    def sample_groups(self, table_or_filters: pa.Table | dict, n_groups: int, seed: int,
                      stratify: Sequence[str] = ("round", "task_id")) -> pa.Table:
        """Draw ``n_groups`` whole GRPO groups, stratified, deterministically for ``seed``.

        A group is every row sharing (run_id, round, group_id); it is never split.
        ``table_or_filters`` is a table or a dict of ``read`` filters (``where`` and
        ``columns`` included).  Given filters, only the group keys and the ``stratify``
        columns of the matching rows are read to choose the groups, then only the
        chosen groups' rows: the archive is never read whole.  Either way the same
        rows come back, in archive order.  Groups are allocated to strata (distinct
        values of ``stratify``) in proportion to their size, with at least one per
        stratum when ``n_groups`` allows.  Asking for at least as many groups as
        exist returns them all.
        """
        if n_groups < 1:
            raise ArchiveError(f"n_groups must be at least 1, got {n_groups}")
        choosing = list(dict.fromkeys([*GROUP_KEY, *stratify]))
        if isinstance(table_or_filters, pa.Table):
            table = table_or_filters
            missing = [c for c in choosing if c not in table.column_names]
            if missing:
                raise ArchiveError(f"sample_groups: table lacks column(s) {', '.join(missing)}; read them too")
            chosen = _choose_groups(table.select(choosing), n_groups, seed, stratify)
            return table.filter(pc.is_in(_group_keys(table), value_set=_group_keys_of(chosen)))
        filters = dict(table_or_filters)
        columns = self._columns(filters.pop("columns", None))
        chosen = _choose_groups(self.read(**filters, columns=choosing), n_groups, seed, stratify)
        run_id, round = filters.get("run_id"), filters.get("round")
        filter_ = _all_of([self._filter(run_id, round, filters.get("split"), filters.get("domain"),
                                        filters.get("where")), _in_groups(chosen)])
        # The same files as the first read: files of other partitions are skipped by their
        # row-group statistics on run_id and round, so only chosen partitions' pages are read.
        return self._scan(self._files(run_id, round), filter_, columns)


def _all_of(conditions: list[ds.Expression | None]) -> ds.Expression | None:
    present = [c for c in conditions if c is not None]
    return functools.reduce(operator.and_, present) if present else None


def _choose_groups(keys: pa.Table, n_groups: int, seed: int, stratify: Sequence[str]) -> list[tuple]:
    """The (run_id, round, group_id) keys drawn from ``keys`` (group-key and ``stratify`` columns).

    Depends only on the set of groups and their strata, never on row order.
    """
    pairs = keys.group_by(keys.column_names, use_threads=False).aggregate([])  # distinct (group, stratum)
    values = [pairs.column(c).to_pylist() for c in keys.column_names]
    position = {name: i for i, name in enumerate(keys.column_names)}
    stratum_of: dict[tuple, tuple] = {}
    for row in zip(*values):
        key = tuple(row[position[c]] for c in GROUP_KEY)
        stratum = tuple(row[position[c]] for c in stratify)
        if stratum_of.setdefault(key, stratum) != stratum:
            raise ArchiveError(f"sample_groups: group {key} has rows with different {', '.join(stratify)} "
                               f"({stratum_of[key]} vs {stratum}); stratify by columns constant within a group")
    strata: dict[tuple, list[tuple]] = defaultdict(list)
    for key, stratum in stratum_of.items():
        strata[stratum].append(key)
    rng = random.Random(seed)
    chosen: list[tuple] = []
    for stratum, quota in _allocate({s: len(g) for s, g in strata.items()}, n_groups, rng).items():
        chosen += rng.sample(sorted(strata[stratum], key=_sort_key), quota)
    return chosen


_SEP = "\x1f"  # run ids and rounds never hold it, so "run<SEP>round<SEP>group" names one group


def _group_keys(table: pa.Table) -> pa.Array:
    return pc.binary_join_element_wise(table.column("run_id"), pc.cast(table.column("round"), pa.string()),
                                       table.column("group_id"), _SEP)


def _group_keys_of(chosen: list[tuple]) -> pa.Array:
    return pa.array([_SEP.join(str(v) for v in key) for key in chosen], pa.string())


def _in_groups(chosen: list[tuple]) -> ds.Expression:
    """A scan filter for the rows of ``chosen``: per partition, its group ids."""
    by_partition: dict[tuple, list[str]] = defaultdict(list)
    for run_id, round, group_id in chosen:
        by_partition[(run_id, round)].append(group_id)
    terms = [(ds.field("run_id") == run_id) & (ds.field("round") == round) & ds.field("group_id").isin(ids)
             for (run_id, round), ids in sorted(by_partition.items())]
    return functools.reduce(operator.or_, terms) if terms else ds.scalar(False)


def _comparable(name: str, value: Any) -> Any:
    """JSON columns compare by content, so key order or spacing is not a conflict."""
    return _json_loads(value) if name in JSON_COLUMNS else value


def _sort_key(values: tuple) -> tuple:
    return tuple((v is None, str(v)) for v in values)


def _allocate(sizes: dict[tuple, int], n: int, rng: random.Random) -> dict[tuple, int]:
    """Proportional allocation of ``n`` draws over strata by largest remainder, capped by size.

    Every stratum gets one first when ``n`` covers them all; ties go in a seeded
    random order so that equal strata are not always favoured alphabetically.
    """
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    order = sorted(sizes, key=_sort_key)
    rng.shuffle(order)
    share = {s: n * sizes[s] / total for s in order}
    alloc = {s: min(sizes[s], max(1 if n >= len(order) else 0, math.floor(share[s]))) for s in order}
    while sum(alloc.values()) > n:  # the minimum of one pushed us over: take from the most over-served
        over = max((s for s in order if alloc[s] > 1), key=lambda s: alloc[s] - share[s])
        alloc[over] -= 1
    while sum(alloc.values()) < n:  # hand out the rest by largest remaining share
        under = max((s for s in order if alloc[s] < sizes[s]), key=lambda s: share[s] - alloc[s])
        alloc[under] += 1
    return {s: k for s, k in alloc.items() if k}
