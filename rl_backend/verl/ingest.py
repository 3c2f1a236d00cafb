"""Import verl rollout and validation dumps into the trajectory archive, streaming, with verl 0.9.1's rules.

verl writes ``<dir>/<step>.jsonl`` (``trainer.rollout_data_dir`` and
``trainer.validation_data_dir``), one JSON object per output:

- rollout dump (V1 trainer): ``input, output, gts, score, step, uid``;
- validation dump: the same plus ``reward`` (the summed reward) and every
  reward-extra-info key (``acc``, ``pred``, ...).  A dict-returning reward's own
  ``score`` overwrites the ``score`` column there, so ``reward`` is preferred.

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

Memory is bounded by one step file; rows go to the archive in chunks of
``CHUNK_ROWS``.  Every line is checked before the first row is written.
``task_id`` is a hash of the prompt text (a dump carries no dataset index).
``verified`` is the trusted verifier's score when one is given, else null.  A
verifier is any ``f(data_source, response, ground_truth)`` returning a score,
``(score, info)`` or ``{"score": ...}``; a domain's ``verify`` is one::

    from meta_agent.domains.math import MathDomain
    import_verl_dump(Path("runs/r1/rollouts"), Archive(Path("runs/r1/archive")), "r1", 3,
                     domain="math", split="train", verifier=MathDomain().verify)

On the command line (``python -m rl_backend.verl_import`` is the same command)::

    python -m rl_backend.verl.ingest runs/r1/rollouts --archive runs/r1/archive \\
        --run-id r1 --round 3 --domain math --split train --verifier meta_agent.domains.math:verify
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import math
import numbers
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_backend.archive import Archive, ArchiveError
from rl_backend.rows import trajectory_row

# verifier(data_source, response, ground_truth) -> score | (score, info) | {"score": score, ...}
Verifier = Callable[[str, str, Any], Any]
# records(output, gts) -> what the reward entry recorded for that trajectory, or None
Records = Callable[[str, Any], "dict | None"]

DUMP_KEYS = ("input", "output", "gts", "score", "step")
CORE_KEYS = (*DUMP_KEYS, "uid")
CHUNK_ROWS = 50_000
_V1_UID = re.compile(r"^(?P<prompt>.+)_(?P<session>\d+)_(?P<output>\d+)$")
_PAD_UID = re.compile(r"^pad[0-9a-f]{32}_\d+_0$")
_STEP_FILE = re.compile(r"^\d+\.jsonl$")


@dataclass(frozen=True)
class Sample:
    """One trajectory of a dump: its line, group, session and output index."""

    record: dict
    where: str
    group: str
    session: int
    output_idx: int


def _digest(*parts: object, size: int = 16) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:size]


def parse_uid(uid: str | None, prompt: str, where: str) -> tuple[str, int | None, int]:
    """``(group, session, output_idx)`` of a dump line; ``session`` is None for an old dump without uid."""
    if uid is None:
        return f"p{_digest(prompt, size=12)}", None, 0
    match = _V1_UID.match(uid)
    if match is None:
        raise ArchiveError(f"{where}: uid {uid!r} is not verl's '<prompt uuid>_<session>_<output>'; "
                           "is this a verl dump?")
    return match["prompt"], int(match["session"]), int(match["output"])


def _verify(verifier: Verifier, data_source: str, response: str, gts: Any, where: str) -> tuple[float, str | None]:
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


def _number(record: dict, key: str, where: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ArchiveError(f"{where}: '{key}' is {value!r}, expected a finite number")
    return float(value)


def _parse_line(text: str, where: str, file_step: int) -> dict:
    """One dump line as a dict, checked; ``ArchiveError`` names the file and line."""
    try:
        record = json.loads(text)
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
        if uid is not None and _PAD_UID.match(uid):
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
        yield sessions[item] if isinstance(item, tuple) else item


def iter_rows(dump_dir: Path, run_id: str, round: int, *, domain: str, split: str, data_source: str | None = None,
              verifier: Verifier | None = None, records: Records | None = None, harness_commit: str | None = None,
              policy_ref: str | None = None, up_to_step: int | None = None) -> Iterator[dict]:
    """Archive rows of a dump directory, one step file in memory at a time; ``ArchiveError`` names the line.

    ``records`` looks up what the reward entry recorded for a trajectory (the harness's reward,
    its info and keep, or its error); with it the archive's ``reward`` is the harness's word,
    None where the harness failed, rather than the placeholder the dump holds.
    """
    for step, path in dump_files(Path(dump_dir), up_to_step):
        order: dict[str, int] = {}  # group -> samples so far, for old dumps without sessions
        for sample in step_samples(path, step):
            record = sample.record
            idx = sample.session if sample.session >= 0 else order.get(sample.group, 0)
            order[sample.group] = order.get(sample.group, 0) + 1
            source = data_source or record.get("data_source") or f"verl/{domain}"
            reward = float(record["reward"] if "reward" in record else record["score"])
            extras = {k: v for k, v in record.items() if k not in CORE_KEYS}
            recorded = records(record["output"], record["gts"]) if records is not None else None
            if recorded is not None:
                reward = recorded.get("reward")
                extras = dict(recorded.get("reward_info") or {}, keep=recorded.get("keep"), **(
                    {"error": recorded["error"]} if recorded.get("error") else {}))
            verified, verifier_info = (None, None) if verifier is None else _verify(
                verifier, str(source), record["output"], record["gts"], sample.where)
            uid = record.get("uid") or sample.group
            try:
                yield trajectory_row(
                    traj_id=f"{run_id}-r{round}-s{step}-{_digest(run_id, round, step, uid, idx)}",
                    run_id=run_id, round=round, step=step, group_id=f"s{step}-{sample.group}", sample_idx=idx,
                    domain=domain, task_id=f"prompt-{_digest(record['input'], size=12)}",
                    data_source=str(source), split=split, prompt=record["input"], response=record["output"],
                    ground_truth=json.dumps(record["gts"], ensure_ascii=False),  # gts may be a bare string
                    reward=reward,
                    # as text: a NaN in the dump's extra keys is kept, where a dict with NaN would be refused
                    reward_info=json.dumps(extras, ensure_ascii=False) if extras else None,
                    verified=verified, verifier_info=verifier_info,
                    harness_commit=harness_commit, policy_ref=policy_ref,
                )
            except ArchiveError as exc:
                raise ArchiveError(f"{sample.where}: {exc}") from exc


def verl_rows(dump_dir: Path, run_id: str, round: int, **kwargs: Any) -> list[dict]:
    """Every row of :func:`iter_rows` in a list (small dumps and tests; the importer streams)."""
    return list(iter_rows(dump_dir, run_id, round, **kwargs))


def check_dump(dump_dir: Path, up_to_step: int | None = None) -> int:
    """Check every line of a dump directory without building rows; the number of trajectories in it."""
    return sum(1 for step, path in dump_files(Path(dump_dir), up_to_step) for _ in step_samples(path, step))


def import_verl_dump(dump_dir: Path, archive: Archive, run_id: str, round: int, *, domain: str, split: str,
                     data_source: str | None = None, verifier: Verifier | None = None,
                     records: Records | None = None, harness_commit: str | None = None,
                     policy_ref: str | None = None, up_to_step: int | None = None) -> int:
    """Import a verl dump directory into ``archive`` as (``run_id``, ``round``); return the rows it holds.

    Every line is checked before anything is written; rows are then appended in chunks,
    and the append is idempotent: importing the same dump twice records it once.
    """
    if check_dump(Path(dump_dir), up_to_step) == 0:
        raise ArchiveError(f"{dump_dir}: the dump files hold no trajectories")
    total, chunk = 0, []
    for row in iter_rows(Path(dump_dir), run_id, round, domain=domain, split=split, data_source=data_source,
                         verifier=verifier, records=records, harness_commit=harness_commit, policy_ref=policy_ref,
                         up_to_step=up_to_step):
        chunk.append(row)
        if len(chunk) == CHUNK_ROWS:
            archive.append_round(run_id, round, chunk)
            total, chunk = total + len(chunk), []
    if chunk:
        archive.append_round(run_id, round, chunk)
    return total + len(chunk)


def load_verifier(spec: str) -> Verifier:
    """``package.module:function`` -> the callable."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ArchiveError(f"--verifier {spec!r}: expected 'package.module:function'")
    function = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(function):
        raise ArchiveError(f"--verifier {spec!r}: {module_name} has no callable {attribute!r}")
    return function


def main(argv: list[str] | None = None, prog: str = "python -m rl_backend.verl.ingest") -> int:
    """CLI entry point: ``python -m rl_backend.verl.ingest DIR --archive A --run-id R --round N ...``."""
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("dump_dir", type=Path, help="verl rollout or validation dump directory (<step>.jsonl)")
    parser.add_argument("--archive", type=Path, required=True, help="archive root directory")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--domain", required=True, help="math | code | swe")
    parser.add_argument("--split", required=True, help="train | val | heldout")
    parser.add_argument("--data-source", help="data_source for every row (default: the line's, else verl/<domain>)")
    parser.add_argument("--verifier", help="trusted verifier 'module:function' called as f(data_source, response, "
                        "gts); without it 'verified' stays null")
    parser.add_argument("--up-to-step", type=int, help="import only steps <= this one (the job's "
                        "latest_checkpointed_iteration.txt while it runs or after it crashed)")
    args = parser.parse_args(argv)
    try:
        verifier = load_verifier(args.verifier) if args.verifier else None
        n = import_verl_dump(args.dump_dir, Archive(args.archive), args.run_id, args.round, domain=args.domain,
                             split=args.split, data_source=args.data_source, verifier=verifier,
                             up_to_step=args.up_to_step)
    except ArchiveError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"{args.dump_dir}: {n} trajectories now in {args.archive} (run {args.run_id}, round {args.round})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
