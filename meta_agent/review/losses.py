"""Archive parts a run lost or that are damaged: the lines ``history``, ``report`` and ``show`` print.

``rl_backend.archive_ledger`` keeps every part's checksum and row count and records a part found missing
(``_losses.jsonl`` in the archive); a part put back byte for byte is recorded as restored. What a lost or
damaged part held cannot be backtested, re-scored or compared by the tripwire, and the live checks of its
round and the next measure without it. These lines only look: they write nothing.
"""

from __future__ import annotations

from pathlib import Path

from rl_backend.archive import Archive
from rl_backend.archive_ledger import check_parts
from rl_backend.archive_records import losses


def _affected(round_: object) -> str:
    if not isinstance(round_, int):
        return "backtests, rescore and the tripwire"
    return (f"backtest samples, rescore, the tripwire's comparisons of rounds {round_ - 1}/{round_} and "
            f"{round_}/{round_ + 1} (a rows_missing alarm) and the live checks of rounds {round_} and {round_ + 1}")


def loss_lines(archive: Path, run_id: str | None = None, round_: int | None = None) -> list[str]:
    """One line per damaged or lost part of ``run_id`` (every run when None; one round when ``round_``), each
    with what it affects and how to restore it."""
    archive = Path(archive)
    if not archive.is_dir():
        return []
    found = check_parts(Archive(archive), run_id, write=False)
    out = [f"archive part damaged: {line}" for line in found.damaged
           if round_ is None or f"/round={round_}/" in line]
    seen = set()
    for loss in [*losses(archive), *found.lost]:
        if loss["part"] in seen or loss["part"] in found.restored:
            continue
        seen.add(loss["part"])
        other_run = run_id is not None and loss.get("run_id") != run_id
        if other_run or (round_ is not None and loss.get("round") != round_):
            continue
        out.append(f"archive part lost: {loss['part']} ({loss.get('rows')} rows of round {loss.get('round')}"
                   + (f", noticed {loss['noticed']}" if loss.get("noticed") else ", not yet recorded")
                   + f"); its rows are missing from {_affected(loss.get('round'))}; put the file back from a copy "
                   "to restore them (check: python -m rl_backend.archive_ledger ARCHIVE)")
    return out


def alarm_lines(digests: list[dict]) -> list[str]:
    """Every tripwire comparison that missing rows made impossible (``rows_missing``: it fires and reverts
    nothing), by round: what a lost part has already cost the run's safety checks."""
    out = []
    for d in sorted(digests, key=lambda d: d.get("round", -1)):
        for alarm in d.get("tripwire") or []:
            if isinstance(alarm, dict) and alarm.get("metric") == "rows_missing":
                out.append(f"round {d.get('round')}: tripwire alarm rows_missing (reverted nothing): "
                           f"{alarm.get('detail', '')}")
    return out
