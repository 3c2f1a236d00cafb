"""Archive parts a run lost (moved out, deleted): the lines ``history`` and ``report`` show.

``rl_backend.archive_ledger`` records a part found missing when a run resumes (``_losses.jsonl`` in
the archive); what it held can no longer be backtested, re-scored or compared by the tripwire.
"""

from __future__ import annotations

from pathlib import Path

from rl_backend.archive_ledger import losses


def loss_lines(archive: Path, run_id: str | None = None) -> list[str]:
    """One line per lost part of ``run_id`` (every run when None), with how to restore it."""
    out = []
    for loss in losses(Path(archive)):
        if run_id is not None and loss.get("run_id") != run_id:
            continue
        out.append(f"archive part lost: {loss['part']} ({loss.get('rows')} rows of round {loss.get('round')}, "
                   f"noticed {loss.get('noticed', '?')}); its rows are missing from backtests and the tripwire; "
                   "put the file back from a copy to restore them")
    return out
