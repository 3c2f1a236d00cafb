"""Import verl rollout and validation dumps into the trajectory archive.

verl writes ``<dir>/<step>.jsonl`` (``trainer.rollout_data_dir`` and
``trainer.validation_data_dir``), one JSON object per sample:

- rollout dump (V1 trainer): ``input, output, gts, score, step, uid``;
- validation dump: ``input, output, gts, score, step`` plus ``reward`` and every
  reward-extra-info key (``acc``, ``pred``, ...), and ``uid`` in recent versions.

Mapping: ``prompt`` = input, ``response`` = output, ``ground_truth`` = gts,
``reward`` = score, ``reward_info`` = the extra keys.  A GRPO group is the prompt
part of ``uid`` (V1 writes ``{prompt_uuid}_{sample_idx}_{output_idx}``; an older
bare prompt uuid is used whole; without ``uid`` the prompt text is the group),
within one step; ``sample_idx`` is the order within the group.  ``task_id`` is a
hash of the prompt text, since the dump carries no dataset index.  ``verified``
is the trusted verifier's score when one is given, else null (such rows cannot
be backtested on).  A verifier is any ``f(data_source, response, ground_truth)``
returning a score, ``(score, info)`` or ``{"score": ...}``; a domain's ``verify``
method is one:

    from meta_agent.domains.math import MathDomain
    import_verl_dump(Path("runs/r1/rollouts"), Archive(Path("runs/r1/archive")), "r1", 3,
                     domain="math", split="train", verifier=MathDomain().verify)

On the command line ``--verifier`` names a module-level function, ``module:function``;
the math domain's is ``meta_agent.domains.math:verify``:

    python -m rl_backend.verl_import runs/r1/rollouts --archive runs/r1/archive \\
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rl_backend.archive import Archive, ArchiveError
from rl_backend.rows import trajectory_row

# verifier(data_source, response, ground_truth) -> score | (score, info) | {"score": score, ...}
Verifier = Callable[[str, str, Any], Any]

DUMP_KEYS = ("input", "output", "gts", "score", "step")
CORE_KEYS = (*DUMP_KEYS, "uid")
_V1_UID = re.compile(r"^(?P<prompt>.+)_\d+_\d+$")
_STEP_FILE = re.compile(r"^\d+\.jsonl$")


def _digest(*parts: object, size: int = 16) -> str:
    return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:size]


def group_key(uid: str | None, prompt: str) -> str:
    """The prompt a sample belongs to: the prompt uuid of a V1 uid, an old bare uid, or the prompt text."""
    if uid is None:
        return f"p{_digest(prompt, size=12)}"
    match = _V1_UID.match(uid)
    return match["prompt"] if match else uid


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
    score = record["score"]
    if isinstance(score, bool) or not isinstance(score, numbers.Real) or not math.isfinite(score):
        raise ArchiveError(f"{where}: 'score' is {score!r}, expected a finite number")
    if record["step"] != file_step or isinstance(record["step"], bool):
        raise ArchiveError(f"{where}: 'step' is {record['step']!r} but the file is step {file_step}; "
                           "files must be named <step>.jsonl as verl writes them")
    if "uid" in record and not isinstance(record["uid"], str):
        raise ArchiveError(f"{where}: 'uid' is {type(record['uid']).__name__}, expected a string")
    return record


def dump_files(dump_dir: Path) -> list[tuple[int, Path]]:
    """The ``<step>.jsonl`` files of a verl dump directory, by step."""
    if not dump_dir.is_dir():
        raise ArchiveError(f"{dump_dir}: not a directory; pass verl's trainer.rollout_data_dir or "
                           "trainer.validation_data_dir")
    files = sorted((int(p.stem), p) for p in dump_dir.iterdir() if _STEP_FILE.match(p.name))
    if not files:
        raise ArchiveError(f"{dump_dir}: no <step>.jsonl files; is this a verl dump directory?")
    return files


def verl_rows(dump_dir: Path, run_id: str, round: int, *, domain: str, split: str, data_source: str | None = None,
              verifier: Verifier | None = None, harness_commit: str | None = None,
              policy_ref: str | None = None) -> list[dict]:
    """Map every line of a verl dump directory to a checked archive row; ``ArchiveError`` names the line."""
    rows = []
    for step, path in dump_files(Path(dump_dir)):
        seen: dict[str, int] = {}  # group -> samples so far, in file order
        for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not text.strip():
                continue
            where = f"{path}:{number}"
            record = _parse_line(text, where, step)
            uid = record.get("uid")
            group = group_key(uid, record["input"])
            idx = seen.get(group, 0)
            seen[group] = idx + 1
            source = data_source or record.get("data_source") or f"verl/{domain}"
            extras = {k: v for k, v in record.items() if k not in CORE_KEYS}
            verified, verifier_info = (None, None) if verifier is None else _verify(
                verifier, str(source), record["output"], record["gts"], where)
            try:
                rows.append(trajectory_row(
                    traj_id=f"{run_id}-r{round}-s{step}-{_digest(run_id, round, step, uid or group, idx)}",
                    run_id=run_id, round=round, step=step, group_id=f"s{step}-{group}", sample_idx=idx,
                    domain=domain, task_id=f"prompt-{_digest(record['input'], size=12)}",
                    data_source=str(source), split=split, prompt=record["input"], response=record["output"],
                    ground_truth=json.dumps(record["gts"], ensure_ascii=False),  # gts may be a bare string
                    reward=float(record["score"]),
                    # as text: a NaN in the dump's extra keys is kept, where a dict with NaN would be refused
                    reward_info=json.dumps(extras, ensure_ascii=False) if extras else None,
                    verified=verified, verifier_info=verifier_info,
                    harness_commit=harness_commit, policy_ref=policy_ref,
                ))
            except ArchiveError as exc:
                raise ArchiveError(f"{where}: {exc}") from exc
    return rows


def import_verl_dump(dump_dir: Path, archive: Archive, run_id: str, round: int, *, domain: str, split: str,
                     data_source: str | None = None, verifier: Verifier | None = None,
                     harness_commit: str | None = None, policy_ref: str | None = None) -> int:
    """Import a verl dump directory into ``archive`` as (``run_id``, ``round``); return the rows it holds.

    All files are checked before anything is written, and the append is
    idempotent: importing the same dump twice records it once.
    """
    rows = verl_rows(Path(dump_dir), run_id, round, domain=domain, split=split, data_source=data_source,
                     verifier=verifier, harness_commit=harness_commit, policy_ref=policy_ref)
    if not rows:
        raise ArchiveError(f"{dump_dir}: the dump files hold no samples")
    archive.append_round(run_id, round, rows)
    return len(rows)


def load_verifier(spec: str) -> Verifier:
    """``package.module:function`` -> the callable."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ArchiveError(f"--verifier {spec!r}: expected 'package.module:function'")
    function = getattr(importlib.import_module(module_name), attribute, None)
    if not callable(function):
        raise ArchiveError(f"--verifier {spec!r}: {module_name} has no callable {attribute!r}")
    return function


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: ``python -m rl_backend.verl_import DIR --archive A --run-id R --round N ...``."""
    parser = argparse.ArgumentParser(prog="python -m rl_backend.verl_import", description=__doc__.split("\n\n")[0])
    parser.add_argument("dump_dir", type=Path, help="verl rollout or validation dump directory (<step>.jsonl)")
    parser.add_argument("--archive", type=Path, required=True, help="archive root directory")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--domain", required=True, help="math | code | swe")
    parser.add_argument("--split", required=True, help="train | val | heldout")
    parser.add_argument("--data-source", help="data_source for every row (default: the line's, else verl/<domain>)")
    parser.add_argument("--verifier", help="trusted verifier 'module:function' called as f(data_source, response, "
                        "gts); without it 'verified' stays null")
    args = parser.parse_args(argv)
    try:
        verifier = load_verifier(args.verifier) if args.verifier else None
        n = import_verl_dump(args.dump_dir, Archive(args.archive), args.run_id, args.round, domain=args.domain,
                             split=args.split, data_source=args.data_source, verifier=verifier)
    except ArchiveError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"{args.dump_dir}: {n} trajectories now in {args.archive} (run {args.run_id}, round {args.round})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
