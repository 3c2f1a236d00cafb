"""Checking rows and Parquet files against the trajectory schema, before anything is written or read.

Every problem names the source (file), the row and the field, and says what to do.
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

from rl_backend.schema import JSON_COLUMNS, REQUIRED_COLUMNS, SCHEMA_VERSION, SPLITS, TRAJECTORY_SCHEMA

# Identifiers that must be non-empty: they key groups, partitions and caches.
ID_FIELDS = ("traj_id", "run_id", "group_id", "domain", "task_id", "data_source")
# Partition directory names hold the run id verbatim, so keep it path- and hive-safe.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
VERSION_KEY = b"trajectory_schema_version"
MAX_REPORTED_ERRORS = 10
_INT_BOUNDS = {pa.int16(): (-(2**15), 2**15 - 1), pa.int32(): (-(2**31), 2**31 - 1)}


class ArchiveError(ValueError):
    """Rows or files that do not fit the trajectory schema; the message says where and what to do."""


# ----------------------------------------------------------------------------- validation


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
    problems = [(k, "is not a column of the trajectory schema (see rl_backend/schema.py); remove or rename it")
                for k in row if k not in TRAJECTORY_SCHEMA.names]
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
                           "rewrite the file with the schema in rl_backend/schema.py")
    for name in schema.names:
        found, wanted = schema.field(name).type, TRAJECTORY_SCHEMA.field(name).type
        if not _compatible(found, wanted):
            raise ArchiveError(f"{path}: column {name!r} has type {found}, expected {wanted}; rewrite the file "
                               "with the schema in rl_backend/schema.py")


def check_batch(path: str, batch: pa.RecordBatch) -> None:
    """Row-level checks that the footer cannot answer: versions and nulls in required columns."""
    versions = batch.column("schema_version")
    if versions.null_count == 0 and len(versions) and pc.max(versions).as_py() > SCHEMA_VERSION:
        raise ArchiveError(f"{path}: has rows of trajectory schema version {pc.max(versions).as_py()}, "
                           f"newer than this code's {SCHEMA_VERSION}; upgrade the meta-agent package to read it")
    for name in batch.schema.names:
        if name in REQUIRED_COLUMNS and batch.column(name).null_count:
            raise ArchiveError(f"{path}: required column {name!r} has null values; fix or remove the file")
