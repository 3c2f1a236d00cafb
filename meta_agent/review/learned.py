"""Did the run learn? The trusted exam of the base policy and of every round, with the paired changes the
console's end-of-run table shows (vs the base policy, vs round 0, vs the round it trained from) and one plain
sentence, for the HTML report's index and ``report.md``.

    rows = exam_rows(digests(rd))      # base first, then each round with an exam
    sentence(rows)                     # "Round 2's policy beats the base policy: ... and round 0: ..."

Per-round intervals overlap where the paired change does not: the same tasks answered by two policies are
compared task by task, so only the paired figures say whether a round beat another.
"""

from __future__ import annotations

import html
from typing import NamedTuple

from meta_agent.heldout_stats import format_interval

esc = html.escape


class ExamRow(NamedTuple):
    label: str
    round: int | None  # None for the base policy
    accuracy: dict | None  # {"value", "low", "high", "n"}
    vs_base: dict | None  # PairedDifference as a dict with "excludes_zero"
    vs_first: dict | None
    vs_previous: dict | None
    previous_label: str


def _paired(d: object) -> dict | None:
    return d if isinstance(d, dict) and d.get("n") else None


def exam_rows(ds: list[dict]) -> list[ExamRow]:
    """The base policy (from round 0's digest) and every round whose digest holds its exam."""
    rows = []
    for d in sorted(ds, key=lambda d: d.get("round", -1)):
        figures = d.get("heldout") or {}
        n = d.get("round")
        if n == 0 and isinstance(figures.get("base"), dict):
            rows.append(ExamRow("base policy", None, figures["base"], None, None, None, ""))
        acc = figures.get("accuracy")
        if not isinstance(acc, dict) or not acc.get("n"):
            continue
        start = figures.get("trained_from", None if n == 0 else n - 1)
        vs_previous = _paired(figures.get("vs_previous"))
        vs_first = _paired(figures.get("vs_first"))
        rows.append(ExamRow(f"round {n}", n, acc, _paired(figures.get("vs_base")),
                            None if n == 0 or start == 0 else vs_first,  # round 1's round 0 is its previous
                            vs_previous, "" if start is None else f"vs round {start}"))
    return rows


def change_text(d: dict | None) -> str:
    """``+0.148 [+0.089, +0.223] (20 gained, 1 lost)``; a word where the change is not defined."""
    if not d:
        return "-"
    return (f"{format_interval(d['value'], d['low'], d['high'], signed=True)} "
            f"({d['gained']} gained, {d['lost']} lost)")


def _compare(d: dict | None, what: str) -> str | None:
    if not d:
        return None
    figure = change_text(d)
    if not d.get("excludes_zero"):
        return f"is not distinguishable from {what} ({figure}: the interval includes zero)"
    return f"{'beats' if d['value'] > 0 else 'is worse than'} {what} ({figure})"


def sentence(rows: list[ExamRow]) -> str:
    """One plain sentence about the last round with an exam, from its paired changes."""
    rounds = [r for r in rows if r.round is not None]
    if not rounds:
        return "No round has a held-out exam yet, so this run cannot say whether it learned."
    last = rounds[-1]
    parts = [p for p in (_compare(last.vs_base, "the untrained base policy"),
                         _compare(last.vs_first, "round 0")) if p]
    if not parts:
        return f"Round {last.round} has an exam but nothing to pair it with (no base policy exam recorded)."
    return (f"Round {last.round}'s policy " + ", and ".join(parts)
            + ". Paired over the same tasks; 95% intervals.")


def markdown_lines(rows: list[ExamRow]) -> list[str]:
    """The table and the sentence for ``report.md``."""
    lines = ["| policy | held-out accuracy [95%] | vs base policy | vs round 0 | vs the round it trained from |",
             "|---|---|---|---|---|"]
    for r in rows:
        acc = format_interval(r.accuracy["value"], r.accuracy["low"], r.accuracy["high"])
        previous = f"{change_text(r.vs_previous)} ({r.previous_label})" if r.vs_previous else "-"
        lines.append(f"| {r.label} | {acc} | {change_text(r.vs_base)} | {change_text(r.vs_first)} | {previous} |")
    return lines + ["", sentence(rows)]


def html_section(rows: list[ExamRow]) -> str:
    """The index's first section: the sentence, then the table of paired figures."""
    body = "".join(
        f'<tr class="exam-row"><td>{esc(r.label)}</td><td>'
        f'{esc(format_interval(r.accuracy["value"], r.accuracy["low"], r.accuracy["high"]))}</td>'
        f'<td class="paired">{esc(change_text(r.vs_base))}</td><td class="paired">{esc(change_text(r.vs_first))}</td>'
        f'<td class="paired">{esc(change_text(r.vs_previous))}'
        + (f" ({esc(r.previous_label)})" if r.vs_previous else "") + "</td></tr>" for r in rows)
    table = ("<table id=\"did-it-learn\"><thead><tr><th>policy</th><th>held-out accuracy [95%]</th>"
             "<th>vs base policy</th><th>vs round 0</th><th>vs the round it trained from</th></tr></thead>"
             f"<tbody>{body}</tbody></table>") if rows else ""
    return (f'<h2>Did it learn?</h2><p class="verdict">{esc(sentence(rows))}</p>{table}'
            "<p>Each round's own interval is wide; the paired change compares the same tasks answered by two "
            "policies, so it can exclude zero where the per-round intervals overlap.</p>")
