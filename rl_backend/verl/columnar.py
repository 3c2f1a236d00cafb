"""The common verl step file read as columns at once: Arrow's JSON reader instead of a Python loop per line.

    table, labels = step_table(path, step, run_id="r1", round=3, data_source="verl/math")  # or None

Used by ``rl_backend.verl.ingest`` for every step file; ``None`` sends the file to the exact
per-line reader there, which applies the same rules and names the offending line.  This reader
takes only the shape verl 0.9.1's V1 trainer writes in the ordinary case, and says None for
anything else:

- exactly the keys ``input, output, gts, score, step, uid`` on every line, ``gts`` a string,
  ``score`` a finite number, ``step`` the file's step (a validation dump's extra keys, old dumps
  without ``uid``, a missing or mistyped key: per line);
- one output per session (``uid`` ``{prompt}_{session}_0``, no session twice: a multi-output
  session is collapsed per line) and no blank or ``\\r`` lines (line numbers stay exact);
- a file whose last line has no newline is left to the per-line reader, which refuses it.

Padding rows (uid ``pad<32 hex>_<i>_0``) are removed here too.  Per-row Python remains only
for the trajectory id hash, the ``file:line`` labels and, when given, the records and verifier
callbacks of ``ingest.iter_tables``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

SCHEMA = pa.schema([("input", pa.string()), ("output", pa.string()), ("gts", pa.string()),
                    ("score", pa.float64()), ("step", pa.int64()), ("uid", pa.string())])
UID_PATTERN = r"^(?P<prompt>.+)_(?P<session>\d+)_(?P<output>\d+)$"
PAD_PATTERN = r"^pad[0-9a-f]{32}_\d+_0$"
BLOCK_BYTES = 1 << 24


class StepColumns(NamedTuple):
    """The trajectories of one step file, padding removed, in file order, with their 1-based line numbers."""

    table: pa.Table
    group: pa.Array
    session: pa.Array
    lines: list[int]


def read_step(path: Path, step: int) -> StepColumns | None:
    """The step file's columns, or None when it is not the ordinary shape (see the module docstring)."""
    data = path.read_bytes()
    if not data.endswith(b"\n") or b"\n\n" in data or data.startswith(b"\n") or b"\r" in data:
        return None
    options = pa_json.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="error")
    try:
        table = pa_json.read_json(pa.BufferReader(data), parse_options=options,
                                  read_options=pa_json.ReadOptions(block_size=BLOCK_BYTES))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows == 0 or any(table[name].null_count for name in SCHEMA.names):
        return None
    if not pc.all(pc.equal(table["step"], step)).as_py() or not pc.all(pc.is_finite(table["score"])).as_py():
        return None
    real = pc.invert(pc.match_substring_regex(table["uid"], PAD_PATTERN))
    lines = [i + 1 for i in pc.indices_nonzero(real).to_pylist()]
    table = table.filter(real)
    parts = pc.extract_regex(table["uid"].combine_chunks(), UID_PATTERN)
    if parts.null_count or not pc.all(pc.equal(parts.field("output"), "0")).as_py():
        return None
    session = pc.cast(parts.field("session"), pa.int64())
    if pc.count_distinct(table["uid"]).as_py() != table.num_rows:
        return None  # a session twice: collapsed line by line
    return StepColumns(table, parts.field("prompt"), session, lines)


def _per_value(column: pa.ChunkedArray, fn) -> pa.Array:
    """``fn`` applied once per distinct value of a string column (prompts and ground truths repeat in a group)."""
    encoded = column.combine_chunks().dictionary_encode()
    values = pa.array([fn(v) for v in encoded.dictionary.to_pylist()], pa.string())
    return values.take(encoded.indices)


def base_columns(columns: StepColumns, path: Path, step: int, *, run_id: str, round: int,
                 data_source: str) -> tuple[dict[str, pa.Array], list[str]]:
    """The archive columns a dump line fixes by itself (``reward`` from ``score``), and the rows' labels."""
    table = columns.table
    prefix = f"{run_id}\x1f{round}\x1f{step}\x1f"
    traj = [f"{run_id}-r{round}-s{step}-" + hashlib.sha256(f"{prefix}{uid}\x1f{idx}".encode()).hexdigest()[:16]
            for uid, idx in zip(table["uid"].to_pylist(), columns.session.to_pylist())]
    n = table.num_rows
    out = {
        "traj_id": pa.array(traj, pa.string()),
        "step": pa.array([step] * n, pa.int64()),
        "group_id": pc.binary_join_element_wise(f"s{step}-", columns.group, ""),
        "sample_idx": columns.session,
        "task_id": _per_value(table["input"],
                              lambda p: "prompt-" + hashlib.sha256(p.encode()).hexdigest()[:12]),
        "data_source": pa.array([data_source] * n, pa.string()),
        "prompt": table["input"].combine_chunks(),
        "response": table["output"].combine_chunks(),
        "ground_truth": _per_value(table["gts"], lambda g: json.dumps(g, ensure_ascii=False)),
        "reward": table["score"].combine_chunks(),
    }
    return out, [f"{path}:{line}" for line in columns.lines]
