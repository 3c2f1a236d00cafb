"""Reading verl 0.9.1's dump files: ``<dir>/<step>.jsonl``, one line per output, checked line by line.

verl writes ``<dir>/<step>.jsonl`` (``trainer.rollout_data_dir`` and ``trainer.validation_data_dir``).
What verl puts in a dump that is not a trajectory, and how each is handled:

- ``uid`` is ``{prompt_uuid}_{session_id}_{output_idx}``: the GRPO group is the prompt
  uuid, ``sample_idx`` the session.  Dumps of ``trainer.use_v1=False`` and verl <= 0.8
  have no ``uid``: their group is the task (the prompt text).  Any other ``uid`` is refused.
- padding rows (uid ``pad<32 hex>_<i>_0``, empty input and output) are skipped;
- a session with several outputs is one trajectory: the highest output index is kept,
  as verl's trainer does; a failed session is simply missing (short groups are kept);
- a file whose last line has no newline is still being written (or its writer died):
  refused.  ``up_to_step`` imports only steps up to the last checkpoint, since a
  resumed job rewrites later steps with new uuids.

Every refusal is an ``ArchiveError`` naming the file and line.  :mod:`rl_backend.verl.ingest` turns the samples
into archive tables.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from rl_backend.archive import ArchiveError
from trajectory.archive_checks import parse_json

DUMP_KEYS = ("input", "output", "gts", "score", "step")
CORE_KEYS = (*DUMP_KEYS, "uid")
_V1_UID = re.compile(r"^(?P<prompt>.+)_(?P<session>\d+)_(?P<output>\d+)$")
PAD_UID = re.compile(r"^pad[0-9a-f]{32}_\d+_0$")
_STEP_FILE = re.compile(r"^\d+\.jsonl$")


class Sample(NamedTuple):
    """One trajectory of a dump: its line, group, session and output index."""

    record: dict
    where: str
    group: str
    session: int
    output_idx: int


def short_hash(*parts: object, size: int = 16) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:size]


def parse_uid(uid: str | None, prompt: str, where: str) -> tuple[str, int | None, int]:
    """``(group, session, output_idx)`` of a dump line; ``session`` is None for an old dump without uid."""
    if uid is None:
        return f"p{short_hash(prompt, size=12)}", None, 0
    match = _V1_UID.match(uid)
    if match is None:
        raise ArchiveError(f"{where}: uid {uid!r} is not verl's '<prompt uuid>_<session>_<output>'; "
                           "is this a verl dump?")
    return match["prompt"], int(match["session"]), int(match["output"])


def _number(record: dict, key: str, where: str) -> float:
    value = record[key]
    if type(value) is float or type(value) is int:  # the common case, without the ABC check
        if math.isfinite(value):
            return float(value)
    elif not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value):
        return float(value)
    raise ArchiveError(f"{where}: '{key}' is {value!r}, expected a finite number")


def _parse_line(text: str, where: str, file_step: int) -> dict:
    """One dump line as a dict, checked; ``ArchiveError`` names the file and line."""
    try:
        record = parse_json(text)
    except json.JSONDecodeError as exc:
        raise ArchiveError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); "
                           "is the dump truncated? Remove the line or re-dump the step") from exc
    if not isinstance(record, dict):
        raise ArchiveError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [k for k in DUMP_KEYS if k not in record]
    if missing:
        raise ArchiveError(f"{where}: missing key(s) {', '.join(missing)}; a verl dump line has "
                           f"{', '.join(DUMP_KEYS)} (and uid); is this a verl rollout/validation dump?")
    for key in ("input", "output"):
        if not isinstance(record[key], str):
            raise ArchiveError(f"{where}: '{key}' is {type(record[key]).__name__}, expected a string")
    _number(record, "score", where)
    if "reward" in record:
        _number(record, "reward", where)
    if record["step"] != file_step or isinstance(record["step"], bool):
        raise ArchiveError(f"{where}: 'step' is {record['step']!r} but the file is step {file_step}; "
                           "files must be named <step>.jsonl as verl writes them")
    if "uid" in record and not isinstance(record["uid"], str):
        raise ArchiveError(f"{where}: 'uid' is {type(record['uid']).__name__}, expected a string")
    return record


def dump_files(dump_dir: Path, up_to_step: int | None = None) -> list[tuple[int, Path]]:
    """The ``<step>.jsonl`` files of a verl dump directory, by step, up to ``up_to_step`` when given."""
    if not dump_dir.is_dir():
        raise ArchiveError(f"{dump_dir}: not a directory; pass verl's trainer.rollout_data_dir or "
                           "trainer.validation_data_dir")
    files = sorted((int(p.stem), p) for p in dump_dir.iterdir() if _STEP_FILE.match(p.name))
    if not files:
        raise ArchiveError(f"{dump_dir}: no <step>.jsonl files; is this a verl dump directory?")
    return [(step, path) for step, path in files if up_to_step is None or step <= up_to_step]


def step_samples(path: Path, step: int) -> Iterator[Sample]:
    """The trajectories of one step file in file order: padding skipped, multi-output sessions collapsed."""
    with path.open("rb") as handle:
        data = handle.read()
    if not data.endswith(b"\n"):
        raise ArchiveError(f"{path}: half-written (its last line has no newline): verl is still writing it or died "
                           "while writing; import after the job has exited, or only up to the last checkpointed "
                           "step (--up-to-step)")
    sessions: dict[tuple[str, int], Sample] = {}
    ordered: list[Sample | tuple[str, int]] = []
    for number, raw in enumerate(data.decode("utf-8").split("\n")[:-1], start=1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        record = _parse_line(raw, where, step)
        uid = record.get("uid")
        if uid is not None and PAD_UID.match(uid):
            continue  # verl's filler for batch divisibility, not a trajectory
        group, session, output_idx = parse_uid(uid, record["input"], where)
        if session is None:  # old dump: no sessions, every line is a trajectory
            ordered.append(Sample(record, where, group, -1, 0))
            continue
        key = (group, session)
        old = sessions.get(key)
        if old is None:
            ordered.append(key)
        if old is None or output_idx > old.output_idx:
            sessions[key] = Sample(record, where, group, session, output_idx)
    for item in ordered:
        yield item if isinstance(item, Sample) else sessions[item]
