"""The control a live check measures round n's benefits against.

Three kinds (``meta_agent.live_check.check_live_effects`` takes each):

- ``previous``: the round whose policy round n-1 trained from (round n-2, unless a rollback restarted round n-1
  from an earlier policy: ``meta_agent.run.lineage``), the change ordinary training made the round before
  (a difference in differences, ``live_stats.controlled_change``).  Round 1 has no round -1.
- ``rollback``: round n-1 itself, when round n was rolled back to the policy round n-1 also trained from.  The two
  rounds started from the same policy and differ by round n-1's merges: the benefit is the plain difference
  (``live_stats.field_change``), with no trend to subtract.
- ``concurrent``: round n of a *control arm*: a run that trained round n from the same round n-1 policy
  on the harness without round n-1's merges (a benchmark's fixed arm, which shares round 0 with this
  run).  The benefit is then the plain difference between the two runs' round n
  (``live_stats.field_change``), with no trend to subtract.  A run names its control arm in
  ``live_control.json`` in its run folder, written by trusted code (a benchmark; harness code cannot
  write the run folder): ``{"run_dir": "../../fixed/seed0", "rounds": [1]}``, a path relative to the
  run folder, and the rounds for which the arm's harness is this run's harness before the merges
  (with a fixed arm from a shared round 0: round 1 only, since merges of later rounds build on earlier ones).

Trusted code: only archive rows written by the trainer and the verifier are read.

    rows, kind = control_rows(run_dir, archive, run_id, n, parent)   # "previous" | "rollback" | "concurrent" | "none"
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from rl_backend.archive import Archive

CONTROL_FILE = "live_control.json"


def concurrent_arm(run_dir: Path, round: int) -> Path | None:
    """The control arm's run folder for ``round``, as ``live_control.json`` names it; None without one."""
    path = Path(run_dir) / CONTROL_FILE
    if not path.is_file():
        return None
    try:
        spec = json.loads(path.read_text())
        arm = (Path(run_dir) / str(spec["run_dir"])).resolve()
        rounds = {int(r) for r in spec.get("rounds", [])}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a live control ({exc}); expected "
                         '{"run_dir": "<path relative to the run folder>", "rounds": [1]}') from None
    if round not in rounds or arm == Path(run_dir).resolve():  # an arm is never its own control
        return None
    return arm


def _previous_round(k: int) -> int | None:
    return k - 1 if k else None


def control_rows(run_dir: Path, archive: Archive, run_id: str, round: int,
                 parent: Callable[[int], int | None] = _previous_round) -> tuple[list[dict], str]:
    """The rows round ``round``'s live check measures benefits against, and which kind of control they are.
    ``parent(k)``: the round whose policy round k trained from (None: the base policy), the run's lineage."""
    if round >= 1 and parent(round) != round - 1:  # rolled back: round-1 started where this round started
        rows = archive.rows(run_id=run_id, round=round - 1)
        return (rows, "rollback") if rows else ([], "none")
    if round >= 2:
        start = parent(round - 1)
        return (archive.rows(run_id=run_id, round=start), "previous") if start is not None else ([], "none")
    arm = concurrent_arm(run_dir, round) if round >= 1 else None
    if arm is None or not (arm / "archive").exists():
        return [], "none"
    run = json.loads((arm / "run.json").read_text()).get("run_id", arm.name) if (arm / "run.json").is_file() \
        else arm.name
    rows = Archive(arm / "archive").rows(run_id=run, round=round)
    return (rows, "concurrent") if rows else ([], "none")
