"""The trajectory record: one Parquet row per rollout (DESIGN §4).

Backends write it, importers convert foreign dumps into it, the backtest and the
digest read it.  Bump ``SCHEMA_VERSION`` on any change to ``TRAJECTORY_SCHEMA``
and teach ``archive.py`` to read the older version.
"""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 3
"""2 added ``task``, 3 added ``kept``; older files read with the columns they lack null."""

# JSON columns hold a JSON document as a string so that Parquet never has to
# unify nested types across rounds written by different backends.
JSON_COLUMNS = ("messages", "ground_truth", "reward_info", "verifier_info", "task")

TRAJECTORY_SCHEMA = pa.schema(
    [
        pa.field("traj_id", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("round", pa.int32(), nullable=False),
        pa.field("step", pa.int32(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),  # one GRPO group = one prompt's samples
        pa.field("sample_idx", pa.int32(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),  # math | code | swe
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("data_source", pa.string(), nullable=False),  # e.g. reasoning_gym/chain_sum
        pa.field("split", pa.string(), nullable=False),  # train | val | heldout
        pa.field("prompt", pa.string(), nullable=False),
        pa.field("response", pa.string(), nullable=False),
        pa.field("messages", pa.string()),  # JSON list of {role, content}
        pa.field("ground_truth", pa.string()),  # JSON
        pa.field("reward", pa.float64()),  # as assigned in training by the harness
        pa.field("reward_info", pa.string()),  # JSON
        pa.field("verified", pa.float64()),  # trusted verifier score 0..1; null if unknown
        pa.field("verifier_info", pa.string()),  # JSON
        pa.field("response_tokens", pa.int32()),
        pa.field("truncated", pa.bool_()),
        pa.field("finish_reason", pa.string()),
        pa.field("harness_commit", pa.string()),
        pa.field("policy_ref", pa.string()),
        # whether the trainer let the trajectory into the loss (the harness's filters, the runtime's masks, a
        # reward it could judge), as it counted kept_share; null where a backend does not record it (verl,
        # agent mode, imports) and on held-out rows.  Written by the trainer, never by harness code.
        pa.field("kept", pa.bool_()),
        # JSON {"question": str, "vars": {...}}: what the harness's prompt templates were rendered from, so a
        # backtest can render a candidate's templates over archived tasks; null for imported rows
        pa.field("task", pa.string()),
        pa.field("schema_version", pa.int16(), nullable=False),
    ]
)

REQUIRED_COLUMNS = tuple(f.name for f in TRAJECTORY_SCHEMA if not f.nullable)
SPLITS = ("train", "val", "heldout")
