"""``history`` in a narrow terminal: a few lines per intervention instead of a table folded into slivers.

Each line is cut to the terminal's width; ``show <branch>`` prints one intervention whole.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from harness_repo.repo import Intervention

WIDE = 120
"""At or above this many columns ``history`` prints its table; below, :func:`print_compact`."""


def _cut(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


def print_compact(ivs: list[Intervention], live: dict[str, list[str]], console: Console, run_dir: str) -> None:
    """Per intervention: branch, status and author; subject; predictions; verdict; live checks; each one line."""
    width = console.width
    for iv in ivs:
        author = ", ".join(iv.trailers.get("Agent", []) + iv.trailers.get("Model", []))
        console.print(Text(_cut(f"{iv.branch}  {iv.status}  {iv.head[:8]}" + (f"  ({author})" if author else ""),
                                width), style="bold"))
        lines = [iv.subject or iv.hypothesis, "predicts: " + ("; ".join(iv.predicted_effects) or "-"),
                 "verdict: " + (iv.verdict or "none yet")]
        if iv.revert_commit:
            lines.append(f"reverted by {iv.revert_commit[:8]}")
        lines += live.get(iv.branch, [])
        for line in lines:
            console.print("  " + _cut(line, width - 2), markup=False, highlight=False)
    if ivs:
        console.print(_cut(f"whole intervention: python -m meta_agent show <branch> --run-dir {run_dir}", width),
                      markup=False, highlight=False)
