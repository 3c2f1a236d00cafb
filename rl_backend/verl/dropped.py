"""Trajectories the verl sampler dropped, from a round's ``group_records/``, as archive rows beside the dump's.

verl writes its rollout dump after the sampler, so the dump holds only what trained.  The sampler
(``rl_backend.verl.sampler``) records each trajectory it drops (prompt and response as the dump decodes
them, ground truth, task, tokens, its group reward and info, the reason) in
``group_records/<host>-<pid>-s<step>.jsonl``; ``iter_round_tables`` yields the dump's tables and then
these, with ``keep: false`` and the reason in ``reward_info``, so a round's archive holds every
trajectory judged.  Rules: only steps up to the last checkpoint, for each step only the lines of the
last launch that ran it, a half-written file refused, and a trajectory the dump holds taken from the dump::

    for table, labels in iter_round_tables(out / "rollouts", out / "group_records", "r1", 3, up_to_step=2,
                                           domain="math", split="train"):
        writer.write(table, labels)
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from rl_backend.archive import ArchiveError
from rl_backend.verl.ingest import (PAD_UID, Records, Verifier, iter_tables, recorded_info, recorded_verdict,
                                    short_hash, verify_response)
from trajectory.rows import trajectory_row
from trajectory.schema import TRAJECTORY_SCHEMA


class Dropped(NamedTuple):
    """A trajectory the sampler dropped, as its records line holds it (see ``rl_backend.verl.sampler``)."""

    step: int
    group: str
    session: int
    fields: dict
    where: str


_DROPPED_TYPES = {"output": int, "prompt": str, "response": str, "data_source": str, "task_id": str,
                  "reason": str}


def load_dropped(records_dir: Path, up_to_step: int | None = None) -> dict[str, Dropped]:
    """The dropped trajectories of a round's ``group_records/``, keyed as :func:`dump_keys` keys a dump's rows:
    steps up to ``up_to_step`` only, each step's lines from the last launch that judged it."""
    folder = Path(records_dir)
    candidates: list[tuple[int, Dropped]] = []  # (the launch that wrote it, the trajectory)
    last_launch: dict[int, int] = {}
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            raise ArchiveError(f"{path}: half-written (its last line has no newline); the sampler replaces its "
                               "files whole, so this one was cut or edited: restore it or remove it")
        for number, raw in enumerate(data.decode("utf-8").split("\n")[:-1], start=1):
            where = f"{path}:{number}"
            try:
                line = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise ArchiveError(f"{where}: not valid JSON ({exc.msg}); the sampler writes one object a "
                                   "line") from exc
            if not isinstance(line, dict) or "step" not in line:
                continue  # a line of an older sampler: it names no step, so it cannot be placed
            step, launch = line.get("step"), line.get("launch", 0)
            if type(step) is not int or type(launch) is not int:
                raise ArchiveError(f"{where}: 'step' and 'launch' must be integers, got {step!r} and {launch!r}")
            if up_to_step is not None and step > up_to_step:
                continue  # after the last checkpoint: a resumed job re-runs it with new uuids
            last_launch[step] = max(last_launch.get(step, launch), launch)
            if line.get("keep") is not False or "dropped" not in line:
                continue
            candidates.append((launch, _dropped(line, step, where)))
    return {f"s{d.step}-{d.group}\x1f{d.session}": d for launch, d in candidates if launch == last_launch[d.step]}


def _dropped(line: dict, step: int, where: str) -> Dropped:
    fields, uid, session = line["dropped"], line.get("uid"), line.get("session")
    if not isinstance(fields, dict) or not isinstance(uid, str) or type(session) is not int or session < 0:
        raise ArchiveError(f"{where}: a dropped trajectory needs 'uid' (text), 'session' (an integer >= 0) and "
                           "'dropped' (an object); is this a group_records file of rl_backend.verl.sampler?")
    bad = [k for k, kind in _DROPPED_TYPES.items() if not isinstance(fields.get(k), kind)
           or isinstance(fields.get(k), bool)]
    if bad:
        raise ArchiveError(f"{where}: dropped trajectory field(s) {', '.join(bad)} missing or mistyped "
                           f"(expected {', '.join(f'{k}: {_DROPPED_TYPES[k].__name__}' for k in bad)})")
    if PAD_UID.match(f"{uid}_{session}_0") or "gts" not in fields:
        raise ArchiveError(f"{where}: uid {uid!r} is verl's padding or 'gts' is missing: not a trajectory")
    return Dropped(step, uid, session, fields, where)


def dump_keys(table: pa.Table) -> pa.Array:
    """Each archive row's ``group_id`` and ``sample_idx`` as one key (a dropped trajectory's in ``load_dropped``)."""
    return pc.binary_join_element_wise(table["group_id"], pc.cast(table["sample_idx"], pa.string()), "\x1f")


def dropped_table(dropped: list[Dropped], run_id: str, round: int, *, domain: str, split: str,
                  data_source: str | None = None, verifier: Verifier | None = None, records: Records | None = None,
                  harness_commit: str | None = None, policy_ref: str | None = None) -> tuple[pa.Table, list[str]]:
    """Archive rows of dropped trajectories: built as the dump's rows are (ids, groups, task ids, the reward entry's
    record, the verifier), with ``keep: false`` and the drop ``reason`` in ``reward_info``."""
    rows = []
    for d in dropped:
        f = d.fields
        source = data_source or f"verl/{domain}"
        recorded = records(f["response"], f["gts"]) if records is not None else None
        reward = recorded.get("reward") if recorded is not None else f.get("reward")
        info = recorded_info(recorded) if recorded is not None else dict(f.get("reward_info") or {})
        # the verdict the sampler carried from the reward entry (keyed by the row), else the record's; graded
        # here only for records that carry none (an importer's own verifier, records of older runs)
        if "verified" in f:
            verified, verifier_info = recorded_verdict(f)
        elif recorded is not None and "verified" in recorded:
            verified, verifier_info = recorded_verdict(recorded)
        else:
            verified, verifier_info = (None, None) if verifier is None else verify_response(
                verifier, source, f["response"], f["gts"], d.where)
        uid = f"{d.group}_{d.session}_{f['output']}"
        digest = hashlib.sha256(f"{run_id}\x1f{round}\x1f{d.step}\x1f{uid}\x1f{d.session}".encode()).hexdigest()[:16]
        tokens, truncated = f.get("response_tokens"), f.get("truncated")
        rows.append(trajectory_row(
            traj_id=f"{run_id}-r{round}-s{d.step}-{digest}", run_id=run_id, round=round, step=d.step,
            group_id=f"s{d.step}-{d.group}", sample_idx=d.session, domain=domain,
            task_id=f"prompt-{short_hash(f['prompt'], size=12)}", data_source=source, split=split, prompt=f["prompt"],
            response=f["response"], ground_truth=json.dumps(f["gts"], ensure_ascii=False),
            reward=reward if isinstance(reward, numbers.Real) and not isinstance(reward, bool) else None,
            reward_info=json.dumps(dict(info, keep=False, dropped=f["reason"]), ensure_ascii=False, default=str),
            verified=verified, verifier_info=verifier_info,
            response_tokens=tokens if type(tokens) is int else None,
            truncated=truncated if isinstance(truncated, bool) else None,
            finish_reason=None if not isinstance(truncated, bool) else ("length" if truncated else "stop"),
            harness_commit=harness_commit, policy_ref=policy_ref))
    return pa.Table.from_pylist(rows, schema=TRAJECTORY_SCHEMA), [d.where for d in dropped]


def iter_round_tables(dump_dir: Path, records_dir: Path, run_id: str, round: int, *, up_to_step: int | None = None,
                      **kwargs: Any) -> Iterator[tuple[pa.Table, list[str]]]:
    """:func:`iter_tables` of a rollout dump, then the trajectories the sampler dropped (``records_dir``, the
    round's ``group_records/``) that the dump does not hold: every trajectory judged, each once, the dump's first."""
    dropped = load_dropped(records_dir, up_to_step)
    for table, labels in iter_tables(dump_dir, run_id, round, up_to_step=up_to_step, **kwargs):
        if dropped:  # the dump wins: a trajectory it holds trained, whatever a records line claims
            keys = dump_keys(table)
            for i in pc.indices_nonzero(pc.is_in(keys, value_set=pa.array(list(dropped), pa.string()))).to_pylist():
                dropped.pop(keys[i].as_py(), None)
        yield table, labels
    if dropped:
        table_kwargs = {k: v for k, v in kwargs.items() if k in ("domain", "split", "data_source", "verifier",
                                                                 "records", "harness_commit", "policy_ref")}
        yield dropped_table(list(dropped.values()), run_id, round, **table_kwargs)
