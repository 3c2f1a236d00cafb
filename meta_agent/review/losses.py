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
from rl_backend.archive_records import LOSSES, ledger, losses

RESTORE = "put the file back from a copy to restore them (check: python -m rl_backend.archive_ledger ARCHIVE)"


def _affected(round_: object) -> str:
    if not isinstance(round_, int):
        return "backtests, rescore and the tripwire"
    if round_ == 0:  # nothing comes before round 0, and its merges are first checked live in round 1
        return ("backtest samples, rescore, the tripwire's comparison of rounds 0/1 (a rows_missing alarm) and the "
                "live checks of rounds 1 and 2 (round 2's as their control)")
    return (f"backtest samples, rescore, the tripwire's comparisons of rounds {round_ - 1}/{round_} and "
            f"{round_}/{round_ + 1} (a rows_missing alarm) and the live checks of rounds {round_} to {round_ + 2} "
            "(the last as their control)")


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
                   + f"); its rows are missing from {_affected(loss.get('round'))}; {RESTORE}")
    return out


def archive_losses(archive: Path, run_id: str) -> list[dict]:
    """The parts of ``run_id`` whose rows a round cannot read now: ``{"part", "round", "rows", "state"}`` with
    ``state`` lost (recorded by the ledger, file gone, or listed in ``_losses.jsonl`` and not restored) or
    damaged (its size differs from the ledger's). Only stats, never a checksum: the digest phase calls this every
    round, and hashing a large archive would cost minutes; a resume checks every byte (``verify_run``).
    Writes nothing."""
    root = Path(archive)
    prefix = f"run_id={run_id}/"
    out: dict[str, dict] = {}
    for loss in losses(root):
        if loss.get("run_id") == run_id and not (root / loss["part"]).exists():
            out[loss["part"]] = {"part": loss["part"], "round": loss.get("round"), "rows": loss.get("rows"),
                                 "state": "lost"}
    for rel, record in ledger(root).items():
        if not rel.startswith(prefix) or rel in out:
            continue
        path = root / rel
        round_ = int(rel.split("/")[1].removeprefix("round="))
        if not path.exists():
            out[rel] = {"part": rel, "round": round_, "rows": record.get("rows"), "state": "lost"}
        elif path.stat().st_size != record.get("bytes"):
            out[rel] = {"part": rel, "round": round_, "rows": record.get("rows"), "state": "damaged"}
    return sorted(out.values(), key=lambda loss: (loss["round"] if isinstance(loss["round"], int) else -1,
                                                  loss["part"]))


def missing_rows_note(found: list[dict], rounds: set[int]) -> str | None:
    """What a measure over ``rounds`` lacks, in words (None: nothing): how many rows, of which round, which part."""
    hit = [loss for loss in found if loss.get("round") in rounds]
    if not hit:
        return None
    rows = sum(loss.get("rows") or 0 for loss in hit)
    parts = "; ".join(f"{loss['part']} ({loss['state']}, {loss.get('rows')} rows of round {loss.get('round')})"
                      for loss in hit)
    return f"measured without {rows} rows: {parts}; {RESTORE}"


def damage_markdown(digest: dict) -> str:
    """The digest's section on archive damage (empty when there is none): each lost or damaged part, the tripwire
    alarms and live checks it affected, and how to restore it. For ``digest.md``, as history/show/report say it."""
    found = digest.get("archive_losses") or []
    alarms = [a for a in digest.get("tripwire") or [] if isinstance(a, dict) and a.get("metric") == "rows_missing"]
    checks = [c for c in digest.get("live_checks") or [] if c.get("rows_missing")]
    if not (found or alarms or checks):
        return ""
    lines = ["", "## Archive damage", ""]
    for loss in found:
        lines.append(f"- archive part {loss['state']}: `{loss['part']}` ({loss.get('rows')} rows of round "
                     f"{loss.get('round')}); its rows are missing from {_affected(loss.get('round'))}")
    for alarm in alarms:
        lines.append(f"- tripwire alarm rows_missing (reverted nothing): {alarm.get('detail', '')}")
    for check in checks:
        lines.append(f"- live check {check['branch']}: {check['outcome']}, {check['rows_missing'].split('; put')[0]}")
    lines += ["", "To restore: `python -m rl_backend.archive_ledger <run folder>/archive` names each part; put each "
              f"file back from a copy (a part put back byte for byte is recorded as restored in `{LOSSES}`). Left "
              "lost, its rows stay missing from the checks above."]
    return "\n".join(lines) + "\n"


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
