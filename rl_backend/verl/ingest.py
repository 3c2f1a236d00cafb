"""Import verl rollout and validation dumps into the trajectory archive, streaming, with verl 0.9.1's rules.

verl writes ``<dir>/<step>.jsonl`` (``trainer.rollout_data_dir`` and
``trainer.validation_data_dir``), one JSON object per output:

- rollout dump (V1 trainer): ``input, output, gts, score, step, uid``;
- validation dump: the same plus ``reward`` (the summed reward) and every
  reward-extra-info key (``acc``, ``pred``, ...).  A dict-returning reward's own
  ``score`` overwrites the ``score`` column there, so ``reward`` is preferred.

What verl puts in a dump that is not a trajectory is dropped by :mod:`rl_backend.verl.dump_lines`,
which reads the dump files line by line with verl's rules.

Memory is bounded by one step file and a chunk: an ordinary step file is parsed into columns
at once (``columnar``: Arrow's JSON reader), any other line by line into the same columns;
tables of about ``CHUNK_ROWS`` rows (checked by ``archive_checks.check_table``) stream into one
new part by ``Archive.round_writer``, which makes them visible only once the whole dump has
been read: a bad line anywhere leaves nothing of the import in the archive.
Trajectories the harness dropped never reach verl's dump (it is written after the sampler):
``rl_backend.verl.dropped`` adds them from the sampler's records.

``task_id`` is a hash of the prompt text (a dump carries no dataset index).
``verified`` is the verdict the reward entry recorded for a row (``records``: carried, never graded
again); for a row without a recorded verdict, the trusted verifier's score when one is given, else null.  A
verifier is any ``f(data_source, response, ground_truth)`` returning a score,
``(score, info)`` or ``{"score": ...}``; a domain's ``verify`` is one::

    from domains.math import MathDomain
    import_verl_dump(Path("runs/r1/rollouts"), Archive(Path("runs/r1/archive")), "r1", 3,
                     domain="math", split="train", verifier=MathDomain().verify)

On the command line (``rl_backend.verl_import``)::

    python -m rl_backend.verl_import runs/r1/rollouts --archive runs/r1/archive \\
        --run-id r1 --round 3 --domain math --split train --verifier domains.math:verify
"""

from __future__ import annotations

import hashlib
import json
import numbers
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from rl_backend.archive import Archive, ArchiveError
from rl_backend.verl.columnar import StepColumns, base_columns, read_step
from rl_backend.verl.dump_lines import CORE_KEYS, DUMP_KEYS, PAD_UID, dump_files, parse_uid, short_hash, step_samples
from trajectory.archive_checks import check_table

# PAD_UID, parse_uid and short_hash are verl's dump rules (dump_lines), named here too for the dropped-rows reader
__all__ = ["CHUNK_ROWS", "PAD_UID", "Records", "Verifier", "import_verl_dump", "iter_rows", "iter_tables",
           "parse_uid", "recorded_info", "recorded_verdict", "short_hash", "verify_response", "verl_rows"]

# verifier(data_source, response, ground_truth) -> score | (score, info) | {"score": score, ...}
Verifier = Callable[[str, str, Any], Any]
# records(output, gts) -> what the reward entry recorded for that trajectory, or None
Records = Callable[[str, Any], "dict | None"]


def verify_response(verifier: Verifier, data_source: str, response: str, gts: Any,
                    where: str) -> tuple[float, str | None]:
    """Call the trusted verifier and normalise its answer to (score in [0, 1], JSON info or None)."""
    try:
        result = verifier(data_source, response, gts)
    except Exception as exc:  # the verifier is trusted code; say which sample broke it
        exc.add_note(f"while verifying {where}")
        raise
    info = None
    if isinstance(result, tuple) and len(result) == 2:
        result, info = result
    elif isinstance(result, dict):
        info, result = result, result.get("score")
    if isinstance(result, bool) or not isinstance(result, numbers.Real) or not 0.0 <= float(result) <= 1.0:
        raise ArchiveError(f"{where}: the verifier returned {result!r}; a verifier must return a score in [0, 1], "
                           "(score, info) or {'score': ..., ...}")
    return float(result), None if info is None else json.dumps(info, ensure_ascii=False, default=str)


CHUNK_ROWS = 50_000


class _Chunk:
    """Columns of up to ``CHUNK_ROWS`` rows being built, with each row's ``file:line``."""

    BUILT = ("traj_id", "step", "group_id", "sample_idx", "task_id", "data_source", "prompt", "response",
             "ground_truth", "reward", "reward_info", "verified", "verifier_info")

    def __init__(self) -> None:
        self.columns: dict[str, list] = {name: [] for name in self.BUILT}
        self.labels: list[str] = []

    def __len__(self) -> int:
        return len(self.labels)

    def table(self, constants: dict[str, Any]) -> pa.Table:
        """The chunk as a table: built columns typed by Arrow, ``constants`` repeated on every row."""
        arrays = {name: pa.array(values) for name, values in self.columns.items()}
        arrays["reward"] = pa.array(self.columns["reward"], pa.float64())
        arrays["verified"] = pa.array(self.columns["verified"], pa.float64())
        for name in ("reward_info", "verifier_info"):
            arrays[name] = pa.array(self.columns[name], pa.string())
        return _table(arrays, constants, len(self))


def _table(arrays: dict[str, Any], constants: dict[str, Any], n: int) -> pa.Table:
    for name, value in constants.items():
        arrays[name] = pa.array([value] * n, pa.int32() if name == "round" else pa.string())
    return pa.table(arrays)


def recorded_verdict(recorded: dict) -> tuple[float | None, str | None]:
    """The verdict the reward entry recorded (score, JSON info): carried into the archive, never graded again."""
    verified, info = recorded.get("verified"), recorded.get("verifier_info")
    score = float(verified) if isinstance(verified, numbers.Real) and not isinstance(verified, bool) else None
    if info is not None and not isinstance(info, str):  # records written before the entry kept info as text
        info = json.dumps(info, ensure_ascii=False, default=str)
    return score, None if info in (None, "null") else info


def recorded_info(recorded: dict) -> dict:
    """The reward info of a trajectory the reward entry recorded: the harness's info, keep, and error if any."""
    return dict(recorded.get("reward_info") or {}, keep=recorded.get("keep"),
                **({"error": recorded["error"]} if recorded.get("error") else {}))


def _columnar_table(columns: StepColumns, path: Path, step: int, constants: dict[str, Any], *, source: str,
                    verifier: Verifier | None, records: Records | None) -> tuple[pa.Table, list[str]]:
    """A step file read by ``columnar.read_step`` as an archive table: the rows the per-line reader builds."""
    arrays, labels = base_columns(columns, path, step, run_id=constants["run_id"], round=constants["round"],
                                  data_source=source)
    n = len(labels)
    infos: list[str | None] = [None] * n
    verified: list[float | None] = [None] * n
    verifier_infos: list[str | None] = [None] * n
    if records is not None or verifier is not None:
        rewards = arrays["reward"].to_pylist()
        outputs, truths = columns.table["output"].to_pylist(), columns.table["gts"].to_pylist()
        for i, (output, gts) in enumerate(zip(outputs, truths)):
            recorded = records(output, gts) if records is not None else None
            if recorded is not None:
                rewards[i] = recorded.get("reward")
                infos[i] = json.dumps(recorded_info(recorded), ensure_ascii=False)
            if recorded is not None and "verified" in recorded:
                verified[i], verifier_infos[i] = recorded_verdict(recorded)
            elif verifier is not None:
                verified[i], verifier_infos[i] = verify_response(verifier, source, output, gts, labels[i])
        arrays["reward"] = pa.array(rewards, pa.float64())
    arrays |= {"reward_info": pa.array(infos, pa.string()), "verified": pa.array(verified, pa.float64()),
               "verifier_info": pa.array(verifier_infos, pa.string())}
    return _table(arrays, constants, n), labels


def iter_tables(dump_dir: Path, run_id: str, round: int, *, domain: str, split: str, data_source: str | None = None,
                verifier: Verifier | None = None, records: Records | None = None, harness_commit: str | None = None,
                policy_ref: str | None = None, up_to_step: int | None = None,
                chunk_rows: int = CHUNK_ROWS) -> Iterator[tuple[pa.Table, list[str]]]:
    """Archive tables of a dump directory, ``chunk_rows`` rows each, with each row's ``file:line``.

    The lines are checked here (``ArchiveError`` names the line); the tables are not yet: the
    consumer checks each once, with ``check_table`` or ``RoundWriter.write``, naming rows by line.

    ``records`` looks up what the reward entry recorded for a trajectory (the harness's reward,
    its info and keep, or its error); with it the archive's ``reward`` is the harness's word,
    None where the harness failed, rather than the placeholder the dump holds.
    """
    constants = dict(run_id=run_id, round=round, domain=domain, split=split, harness_commit=harness_commit,
                     policy_ref=policy_ref)
    pending: list[pa.Table] = []
    labels: list[str] = []
    # few large tables: the archive writer checks each table's ids against every earlier one
    for table, table_labels in _step_tables(Path(dump_dir), constants, data_source=data_source, verifier=verifier,
                                            records=records, up_to_step=up_to_step, chunk_rows=chunk_rows):
        pending.append(table)
        labels += table_labels
        if len(labels) >= chunk_rows:
            yield pa.concat_tables(pending), labels
            pending, labels = [], []
    if pending:
        yield pa.concat_tables(pending), labels


def _step_tables(dump_dir: Path, constants: dict[str, Any], *, data_source: str | None, verifier: Verifier | None,
                 records: Records | None, up_to_step: int | None,
                 chunk_rows: int) -> Iterator[tuple[pa.Table, list[str]]]:
    """One table per ordinary step file (``columnar``), tables of up to ``chunk_rows`` rows from the others."""
    run_id, round, domain = constants["run_id"], constants["round"], constants["domain"]
    chunk = _Chunk()
    for step, path in dump_files(dump_dir, up_to_step):
        step_columns = read_step(path, step)
        if step_columns is not None:  # the ordinary file, read as columns; anything else line by line below
            if len(chunk):
                yield chunk.table(constants), chunk.labels
                chunk = _Chunk()
            yield _columnar_table(step_columns, path, step, constants, source=data_source or f"verl/{domain}",
                                  verifier=verifier, records=records)
            continue
        order: dict[str, int] = {}  # group -> samples so far, for old dumps without sessions
        task_ids: dict[str, str] = {}  # prompt text -> task id, within this step file
        truths: dict[str, str] = {}  # a string gts -> its JSON text, within this step file
        id_prefix = f"{run_id}\x1f{round}\x1f{step}\x1f"  # short_hash(run_id, round, step, uid, idx), built once
        for sample in step_samples(path, step):
            record = sample.record
            idx = sample.session if sample.session >= 0 else order.get(sample.group, 0)
            order[sample.group] = order.get(sample.group, 0) + 1
            source = str(data_source or record.get("data_source") or f"verl/{domain}")
            reward = float(record["reward"] if "reward" in record else record["score"])
            # keys beyond verl's own (a validation dump's reward-extra keys); a rollout dump has none
            extras = {k: v for k, v in record.items() if k not in CORE_KEYS} \
                if len(record) > len(DUMP_KEYS) + ("uid" in record) else {}
            recorded = records(record["output"], record["gts"]) if records is not None else None
            verified, verifier_info = None, None
            if recorded is not None:
                reward = recorded.get("reward")
                extras = recorded_info(recorded)
            if recorded is not None and "verified" in recorded:
                verified, verifier_info = recorded_verdict(recorded)
            elif verifier is not None:
                verified, verifier_info = verify_response(verifier, source, record["output"], record["gts"],
                                                          sample.where)
            prompt = record["input"]
            task_id = task_ids.get(prompt)
            if task_id is None:
                task_id = task_ids[prompt] = f"prompt-{short_hash(prompt, size=12)}"
            uid = record.get("uid") or sample.group
            columns = chunk.columns
            digest = hashlib.sha256(f"{id_prefix}{uid}\x1f{idx}".encode()).hexdigest()[:16]
            columns["traj_id"].append(f"{run_id}-r{round}-s{step}-{digest}")
            columns["step"].append(step)
            columns["group_id"].append(f"s{step}-{sample.group}")
            columns["sample_idx"].append(idx)
            columns["task_id"].append(task_id)
            columns["data_source"].append(source)
            columns["prompt"].append(prompt)
            columns["response"].append(record["output"])
            gts = record["gts"]  # may be a bare string; a group's samples share it
            if type(gts) is str:
                ground_truth = truths.get(gts)
                if ground_truth is None:
                    ground_truth = truths[gts] = json.dumps(gts, ensure_ascii=False)
            else:
                ground_truth = json.dumps(gts, ensure_ascii=False)
            columns["ground_truth"].append(ground_truth)
            columns["reward"].append(reward)
            # as text: a NaN in the dump's extra keys is kept, where a dict with NaN would be refused
            columns["reward_info"].append(json.dumps(extras, ensure_ascii=False) if extras else None)
            columns["verified"].append(verified)
            columns["verifier_info"].append(verifier_info)
            chunk.labels.append(sample.where)
            if len(chunk) == chunk_rows:
                yield chunk.table(constants), chunk.labels
                chunk = _Chunk()
    if len(chunk):
        yield chunk.table(constants), chunk.labels


def iter_rows(dump_dir: Path, run_id: str, round: int, **kwargs: Any) -> Iterator[dict]:
    """The rows of :func:`iter_tables` as dicts (JSON columns as text), one chunk in memory at a time."""
    for table, labels in iter_tables(dump_dir, run_id, round, **kwargs):
        yield from check_table(table, f"import of {dump_dir}", labels).to_pylist()


def verl_rows(dump_dir: Path, run_id: str, round: int, **kwargs: Any) -> list[dict]:
    """Every row of :func:`iter_rows` in a list (small dumps and tests; the importer streams)."""
    return list(iter_rows(dump_dir, run_id, round, **kwargs))


def import_verl_dump(dump_dir: Path, archive: Archive, run_id: str, round: int, *, domain: str, split: str,
                     data_source: str | None = None, verifier: Verifier | None = None,
                     records: Records | None = None, harness_commit: str | None = None,
                     policy_ref: str | None = None, up_to_step: int | None = None) -> int:
    """Import a verl dump directory into ``archive`` as (``run_id``, ``round``); return the rows it holds.

    The rows stream into one new part that becomes visible only after the last line was read and
    checked; the import is idempotent: importing the same dump twice records it once.
    """
    total = 0
    with archive.round_writer(run_id, round) as writer:
        for table, labels in iter_tables(Path(dump_dir), run_id, round, domain=domain, split=split,
                                         data_source=data_source, verifier=verifier, records=records,
                                         harness_commit=harness_commit, policy_ref=policy_ref,
                                         up_to_step=up_to_step):
            writer.write(table, labels)
            total += table.num_rows
        if total == 0:
            raise ArchiveError(f"{dump_dir}: the dump files hold no trajectories")
    return total
