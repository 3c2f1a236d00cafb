"""Checking rows and Parquet files against the trajectory schema, before anything is written or read.

Every problem names the source (file), the row and the field, and says what to do.  Rows come
either as dicts (``validate_rows``: one producer's rows, checked value by value) or, from bulk
producers such as the verl importer, as an Arrow table checked column by column (``check_table``)::

    table = check_table(pa.table({"traj_id": [...], ...}), "import of runs/r1/rollouts")
"""

from __future__ import annotations

import json
import math
import numbers
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from trajectory.schema import JSON_COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION, SPLITS, TRAJECTORY_SCHEMA

try:  # a C JSON parser where one is installed (verl's environment has it); json decides every refusal
    import orjson
except ImportError:  # pragma: no cover - the main environment
    orjson = None

# Identifiers that must be non-empty: they key groups, partitions and caches.
ID_FIELDS = ("traj_id", "run_id", "group_id", "domain", "task_id", "data_source")
# Partition directory names hold the run id verbatim, so keep it path- and hive-safe.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
VERSION_KEY = b"trajectory_schema_version"
MAX_REPORTED_ERRORS = 10
_INT_BOUNDS = {pa.int16(): (-(2**15), 2**15 - 1), pa.int32(): (-(2**31), 2**31 - 1)}
_NAMES = frozenset(TRAJECTORY_SCHEMA.names)


class ArchiveError(ValueError):
    """Rows or files that do not fit the trajectory schema; the message says where and what to do."""


# ----------------------------------------------------------------------------- validation


def parse_json(text: str) -> Any:
    """``json.loads(text)``, through orjson first when installed.  The same documents are accepted:
    what orjson refuses (NaN, Infinity, huge ints, lone surrogates, deep nesting) goes to ``json``,
    whose ``JSONDecodeError`` is the answer."""
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def _check_value(field: pa.Field, value: Any) -> tuple[Any, str | None]:
    """Return (clean value, problem or None) for one non-null value of ``field``."""
    name, kind = field.name, field.type
    if name in JSON_COLUMNS:
        if isinstance(value, str):
            try:
                json.loads(value)
            except json.JSONDecodeError as exc:
                return None, f"is not valid JSON ({exc.msg} at char {exc.pos}); pass a dict/list or a JSON string"
            return value, None
        if isinstance(value, (dict, list, numbers.Real)):
            try:
                return json.dumps(value, ensure_ascii=False, allow_nan=False), None
            except (TypeError, ValueError) as exc:
                return None, f"cannot be serialised to JSON ({exc}); use plain dicts, lists, str, numbers"
        return None, f"has type {type(value).__name__}; expected a dict, a list or a JSON string"
    if pa.types.is_string(kind):
        if not isinstance(value, str):
            return None, f"has type {type(value).__name__}; expected str"
        if name in ID_FIELDS and not value:
            return None, "is empty; identifiers must be non-empty strings"
        return value, None
    if pa.types.is_boolean(kind):
        if not isinstance(value, bool):
            return None, f"has type {type(value).__name__}; expected bool"
        return value, None
    if pa.types.is_integer(kind):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            return None, f"has type {type(value).__name__}; expected int"
        low, high = _INT_BOUNDS[kind]
        if not low <= int(value) <= high:
            return None, f"{value} does not fit {kind}"
        if name != "schema_version" and int(value) < 0:
            return None, f"is {value}; expected a non-negative int"
        return int(value), None
    if pa.types.is_floating(kind):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return None, f"has type {type(value).__name__}; expected a float"
        if not math.isfinite(float(value)):
            return None, f"is {value}; use None for an unknown value"
        return float(value), None
    raise AssertionError(f"no validation rule for {field}")  # schema.py grew a type this file does not know


def _row_problems(row: dict, clean: dict) -> list[tuple[str, str]]:
    """Check one row field by field, filling ``clean``; return (field, problem) pairs."""
    problems = [(k, "is not a column of the trajectory schema (see trajectory/schema.py); remove or rename it")
                for k in row if k not in _NAMES]
    for field in TRAJECTORY_SCHEMA:
        value = row.get(field.name)
        if field.name == "schema_version":
            if value is not None and value != SCHEMA_VERSION:
                problems.append((field.name, f"is {value!r} but this code writes version {SCHEMA_VERSION}; "
                                 "leave it out and it is filled in"))
            clean[field.name] = SCHEMA_VERSION
            continue
        if value is None:
            if not field.nullable:
                problems.append((field.name, "is missing (required)" if field.name not in row
                                 else "is None but the field is required"))
            clean[field.name] = None
            continue
        clean[field.name], problem = _check_value(field, value)
        if problem:
            problems.append((field.name, problem))
    if isinstance(clean.get("verified"), float) and not 0.0 <= clean["verified"] <= 1.0:
        problems.append(("verified", f"is {clean['verified']}, outside [0, 1]; the trusted verifier score must be "
                         "in [0, 1] (None if unknown)"))
    if isinstance(clean.get("split"), str) and clean["split"] not in SPLITS:
        problems.append(("split", f"is {clean['split']!r}; expected one of {', '.join(SPLITS)}"))
    return problems


def _raise(source: str, errors: list[str]) -> None:
    shown = "\n  ".join(errors[:MAX_REPORTED_ERRORS])
    more = f"\n  ... and {len(errors) - MAX_REPORTED_ERRORS} more" if len(errors) > MAX_REPORTED_ERRORS else ""
    raise ArchiveError(f"{source}: {len(errors)} problem(s) in the trajectory rows; fix them at the "
                       f"source and retry:\n  {shown}{more}")


def check_row(row: dict, source: str) -> dict:
    """One row checked as ``validate_rows`` checks it; return it clean (JSON columns as strings, every column).

    Raises ``ArchiveError`` naming each bad field as ``<source>: ... field '<name>': <problem>``.
    """
    clean: dict = {}
    problems = _row_problems(row, clean)
    if problems:
        _raise(source, [f"field '{name}': {problem}" for name, problem in problems])
    return clean


def validate_rows(rows: Sequence[dict], source: str) -> pa.Table:
    """Check ``rows`` against the trajectory schema and return them as a table.

    JSON columns accept dicts/lists (serialised) or JSON strings (checked);
    ``schema_version`` is filled in.  Raises ``ArchiveError`` listing each bad
    row as ``<source>: row <i>, field '<name>': <problem>``.
    """
    errors: list[str] = []
    clean_rows: list[dict] = []
    first_seen: dict[str, int] = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            errors.append(f"row {i}: is a {type(row).__name__}, expected a dict of column -> value")
            continue
        clean: dict = {}
        errors += [f"row {i}, field '{name}': {problem}" for name, problem in _row_problems(row, clean)]
        traj_id = clean.get("traj_id")
        if isinstance(traj_id, str):
            if traj_id in first_seen:
                errors.append(f"row {i}, field 'traj_id': {traj_id!r} duplicates row {first_seen[traj_id]}; "
                              "every trajectory needs its own id")
            first_seen.setdefault(traj_id, i)
        clean_rows.append(clean)
    if errors:
        _raise(source, errors)
    return pa.Table.from_pylist(clean_rows, schema=TRAJECTORY_SCHEMA)


# ----------------------------------------------------------------------------- columnar validation


def where_true(mask: pa.Array) -> list[int]:
    """Row indices where a boolean mask is true (nulls count as false)."""
    return pc.indices_nonzero(pc.fill_null(mask, False)).to_pylist()


def _cast_column(name: str, column: pa.Array, wanted: pa.DataType) -> tuple[pa.Array | None, list, str | None]:
    """(column cast to the schema's type, [(row, problem)], column-wide problem) of one given column."""
    found = column.type
    if pa.types.is_null(found):
        return pa.nulls(len(column), wanted), [], None
    if not _compatible(found, wanted) or (pa.types.is_integer(wanted) and pa.types.is_dictionary(found)):
        return None, [], f"column has type {found}; expected {wanted}"
    if pa.types.is_dictionary(found):
        column = column.dictionary_decode()
    rows: list[tuple[int, str]] = []
    if pa.types.is_integer(wanted) and found != wanted:
        low, high = _INT_BOUNDS[wanted]
        outside = pc.fill_null(pc.or_(pc.less(column, low), pc.greater(column, high)), False)
        rows = [(i, f"{column[i].as_py()} does not fit {wanted}") for i in where_true(outside)]
        column = pc.if_else(outside, 0, column)  # reported above; 0 casts, so the cast cannot fail
    return column.cast(wanted), rows, None


def _column_problems(name: str, column: pa.Array) -> list[tuple[int, str]]:
    """(row, problem) pairs of one column already of the schema's type: the rules ``_check_value`` applies."""
    field = TRAJECTORY_SCHEMA.field(name)
    kind = field.type
    found: list[tuple[int, str]] = []
    if not field.nullable and column.null_count:
        found += [(i, "is None but the field is required") for i in where_true(pc.is_null(column))]
    if name == "schema_version":
        bad = where_true(pc.not_equal(column, SCHEMA_VERSION))
        return found + [(i, f"is {column[i].as_py()!r} but this code writes version {SCHEMA_VERSION}; "
                         "leave it out and it is filled in") for i in bad]
    if name in JSON_COLUMNS:
        for i, text in enumerate(column.to_pylist()):
            if text is not None:
                try:
                    parse_json(text)
                except json.JSONDecodeError as exc:
                    found.append((i, f"is not valid JSON ({exc.msg} at char {exc.pos}); write a JSON document"))
        return found
    if pa.types.is_string(kind) and name in ID_FIELDS:
        found += [(i, "is empty; identifiers must be non-empty strings")
                  for i in where_true(pc.equal(pc.utf8_length(column), 0))]
    if pa.types.is_integer(kind):
        found += [(i, f"is {column[i].as_py()}; expected a non-negative int") for i in where_true(pc.less(column, 0))]
    if pa.types.is_floating(kind):
        found += [(i, f"is {column[i].as_py()}; use None for an unknown value")
                  for i in where_true(pc.invert(pc.is_finite(column)))]
    if name == "verified":
        found += [(i, f"is {column[i].as_py()}, outside [0, 1]; the trusted verifier score must be in [0, 1] "
                   "(None if unknown)") for i in where_true(pc.and_(pc.is_finite(column), pc.or_(
                       pc.less(column, 0.0), pc.greater(column, 1.0))))]
    if name == "split":
        found += [(i, f"is {column[i].as_py()!r}; expected one of {', '.join(SPLITS)}")
                  for i in where_true(pc.and_(pc.is_valid(column), pc.invert(pc.is_in(column, pa.array(SPLITS)))))]
    return found


def _duplicates(ids: pa.Array) -> list[tuple[int, str]]:
    counts = pc.value_counts(ids)
    repeated = pc.filter(counts.field("values"), pc.greater(counts.field("counts"), 1))
    if not len(repeated):
        return []
    first: dict[str, int] = {}
    found = []
    for i in where_true(pc.is_in(ids, repeated)):
        traj_id = ids[i].as_py()
        if traj_id in first:
            found.append((i, f"{traj_id!r} duplicates row {first[traj_id]}; every trajectory needs its own id"))
        first.setdefault(traj_id, i)
    return found


def check_table(table: pa.Table | pa.RecordBatch, source: str, labels: Sequence[str] | None = None) -> pa.Table:
    """Check a table of trajectory rows column by column; return it with the schema's column order and types.

    The twin of ``validate_rows`` for bulk producers: the same rules (required columns, non-empty
    identifiers, non-negative ints, finite floats, ``verified`` in [0, 1], known splits, parseable
    JSON columns, unique ``traj_id``), applied with Arrow compute, only JSON parsing per value.
    JSON columns are text here (a bulk producer serialises them).  Missing nullable columns are
    null, ``schema_version`` is filled in.  ``labels`` names each row (e.g. a dump's ``file:line``);
    every problem also names the row's ``traj_id`` and the field::

        <source>: 1 problem(s) ...: row 7 (traj_id 'r1-r0-s3-ab'), field 'verified': is 1.5, outside [0, 1] ...
    """
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    table = table.combine_chunks()
    errors: list[str] = [f"column '{name}': is not a column of the trajectory schema (see trajectory/schema.py); "
                         "remove or rename it" for name in table.column_names if name not in _NAMES]
    if table.num_rows == 0:
        errors.append("no rows; a table of trajectories holds at least one")
    columns: dict[str, pa.Array] = {}
    found: list[tuple[int, str, str]] = []
    for field in TRAJECTORY_SCHEMA:
        name = field.name
        if name not in table.column_names:
            if not field.nullable and name != "schema_version":
                errors.append(f"column '{name}': is missing (required)")
            fill = SCHEMA_VERSION if name == "schema_version" else None
            columns[name] = pa.array([fill] * table.num_rows, field.type)
            continue
        given = table.column(name)
        column, rows, problem = _cast_column(name, given.chunk(0) if given.num_chunks else pa.array([], given.type),
                                             field.type)
        if problem:
            errors.append(f"column '{name}': {problem}")
            continue
        found += [(i, name, p) for i, p in rows + _column_problems(name, column)]
        columns[name] = column
    if errors:
        _raise(source, errors)
    found += [(i, "traj_id", p) for i, p in _duplicates(columns["traj_id"])]
    if found:
        found.sort(key=lambda item: item[0])
        ids = columns["traj_id"]
        _raise(source, [f"{labels[i] if labels is not None else f'row {i}'} (traj_id {ids[i].as_py()!r}), "
                        f"field '{name}': {problem}" for i, name, problem in found])
    return pa.Table.from_arrays([columns[name] for name in TRAJECTORY_SCHEMA.names], schema=TRAJECTORY_SCHEMA)


# ----------------------------------------------------------------------------- reading files


def _compatible(found: pa.DataType, wanted: pa.DataType) -> bool:
    """Whether a hand-written column type can be cast losslessly enough to the schema's."""
    if pa.types.is_dictionary(found):
        found = found.value_type
    if found == wanted:
        return True
    if pa.types.is_integer(wanted):
        return pa.types.is_integer(found)
    if pa.types.is_floating(wanted):
        return pa.types.is_integer(found) or pa.types.is_floating(found)
    if pa.types.is_string(wanted):
        return pa.types.is_string(found) or pa.types.is_large_string(found)
    return False


def check_file_schema(path: Path) -> None:
    """Refuse a part file that is newer than this code or does not fit the schema, naming it."""
    try:
        schema = pq.read_schema(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArchiveError(f"{path}: not a readable Parquet file ({exc}); move it out of the archive") from exc
    version = (schema.metadata or {}).get(VERSION_KEY)
    if version is not None and int(version) > SCHEMA_VERSION:
        raise ArchiveError(f"{path}: written with trajectory schema version {int(version)}, newer than this "
                           f"code's {SCHEMA_VERSION}; upgrade the meta-agent package to read it")
    missing = [name for name in REQUIRED_COLUMNS if name not in schema.names]
    if missing:
        raise ArchiveError(f"{path}: missing required column(s) {', '.join(missing)}; rewrite the file with "
                           "rl_backend.archive.Archive.append_round or move it out of the archive")
    unknown = [name for name in schema.names if name not in TRAJECTORY_SCHEMA.names]
    if unknown:
        raise ArchiveError(f"{path}: unknown column(s) {', '.join(unknown)} for schema version {SCHEMA_VERSION}; "
                           "rewrite the file with the schema in trajectory/schema.py")
    for name in schema.names:
        found, wanted = schema.field(name).type, TRAJECTORY_SCHEMA.field(name).type
        if not _compatible(found, wanted):
            raise ArchiveError(f"{path}: column {name!r} has type {found}, expected {wanted}; rewrite the file "
                               "with the schema in trajectory/schema.py")


def check_batch(path: str, batch: pa.RecordBatch) -> None:
    """Row-level checks that the footer cannot answer: versions and nulls in required columns."""
    versions = batch.column("schema_version")
    if versions.null_count == 0 and len(versions) and pc.max(versions).as_py() > SCHEMA_VERSION:
        raise ArchiveError(f"{path}: has rows of trajectory schema version {pc.max(versions).as_py()}, "
                           f"newer than this code's {SCHEMA_VERSION}; upgrade the meta-agent package to read it")
    for name in batch.schema.names:
        if name in REQUIRED_COLUMNS and batch.column(name).null_count:
            raise ArchiveError(f"{path}: required column {name!r} has null values; fix or remove the file")
