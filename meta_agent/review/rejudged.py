"""Lines for ``history`` (and ``show``) about the merges the last ``rescore`` judged again.

    lines = rejudged_lines(Path("runs/math"))   # {"iv/r0-x": ["re-judged by rescore at main 1a2b...: ..."]}
"""

from __future__ import annotations

from pathlib import Path

from meta_agent.judge.rescore import latest_summary


def rejudged_lines(run_dir: Path) -> dict[str, list[str]]:
    """Per branch, one line for a merge the newest re-scoring found ``rejudged`` or could not judge."""
    summary = latest_summary(run_dir)
    if summary is None:
        return {}
    judge = f"rescore at main {summary['judge']['main'][:12]}"
    out: dict[str, list[str]] = {}
    for verdict in summary.get("merges", []):
        if verdict["status"] == "rejudged":
            done = "; reverted" if verdict["branch"] in summary.get("reverted", []) else \
                "; revert with `python -m meta_agent rescore --revert`"
            line = f"re-judged by {judge} (round {verdict['round']}): {'; '.join(verdict['reasons'])}{done}"
        elif verdict["status"] == "unjudged":
            line = f"not re-judged by {judge}: {'; '.join(verdict['reasons'])}"
        else:
            continue
        out.setdefault(verdict["branch"], []).append(line)
    return out
