"""``python -m meta_agent show <branch|sha|round> --run-dir R``: one intervention or one round, whole.

Reads as text at 80 columns (the diff coloured in a terminal, plain when piped) or, with ``--json``,
as the dict of :mod:`meta_agent.review.records` that the HTML report renders too.
"""

from __future__ import annotations

import json
import textwrap

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness_repo.repo import HarnessRepo
from meta_agent.review.precision import explain_change
from meta_agent.review.learned import change_text
from meta_agent.review.drafts import draft_record, find
from meta_agent.review.records import NameNotFound, intervention_record, resolve, round_record, source_name
from meta_agent.run_dir import RunDir


def record_for(rd: RunDir, name: str) -> dict:
    """The record ``show`` prints for ``name`` in the run ``rd`` (``NameNotFound`` lists the nearest names)."""
    repo = HarnessRepo.open(rd.require().harness)
    try:
        kind, key = resolve(rd, repo, name)
    except NameNotFound:
        draft = find(repo, name)  # a stopped candidate's parked work: not a branch any more, still shown
        if draft is None:
            raise
        return draft_record(repo, draft)
    return intervention_record(rd, repo, str(key)) if kind == "intervention" else round_record(rd, repo, int(key))


def fmt(value: object, signed: bool = False) -> str:
    """A figure as three decimals (``+`` for a change), ``-`` when absent."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    if value != value:  # NaN: a figure with nothing to measure it on
        return "undefined"
    if isinstance(value, int) and not signed:
        return str(value)
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def interval(low: object, high: object) -> str:
    """``[+0.010, +0.120]`` for a change; nothing when a bound is missing or undefined."""
    if any(v is None or (isinstance(v, float) and v != v) for v in (low, high)):
        return ""
    return f"[{fmt(low, True)}, {fmt(high, True)}]"


def change_cell(m: dict) -> str:
    """A gate metric's change with its interval, or why it is undefined (``undefined: no verified failure ...``)."""
    if m.get("undefined"):
        return f"undefined: {m['undefined']}"
    return f"{fmt(m['delta'], True)} {interval(m['ci_low'], m['ci_high'])}".strip()


def _para(console: Console, title: str, text: str) -> None:
    console.print(Text(title, style="bold"))
    for line in (text or "-").splitlines() or ["-"]:
        # a path or a sha longer than a line stays whole (copyable), so rich must not fold it either
        console.print(textwrap.fill(line, width=max(console.width - 2, 20), initial_indent="  ",
                                    break_on_hyphens=False, break_long_words=False, subsequent_indent="  "),
                      markup=False, highlight=False, soft_wrap=True)


def _diff(console: Console, diff: str) -> None:
    styles = (("+++", "bold"), ("---", "bold"), ("diff ", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))
    for line in diff.splitlines():
        style = next((s for prefix, s in styles if line.startswith(prefix)), "")
        console.print(Text(line, style=style), overflow="fold", highlight=False)


def print_intervention(r: dict, console: Console) -> None:
    console.print(Text(f"{r['branch']}  {r['status']}  (round {r['round']}, {r['head'][:10]})", style="bold"))
    author = r["author"]
    who = ", ".join(str(v) for v in (author["agent"], author["model"]) if v) or "unknown author"
    usage = ", ".join(f"{k} {author[k]}" for k in ("tokens", "cost") if author[k])
    console.print(f"by {who}" + (f" ({usage})" if usage else ""), markup=False, highlight=False)
    _para(console, "Subject", r["subject"])
    _para(console, "Hypothesis", r["hypothesis"])
    _para(console, "Predicted effects", "\n".join(f"- {e}" for e in r["predicted_effects"]))
    console.print(Text(f"Diff ({len(r['files'])} file(s): {', '.join(r['files'])})", style="bold"))
    _diff(console, r["diff"])
    bt = r["backtest"]
    if bt:
        table = Table(title=f"Backtest: {str(bt['decision']).upper()}", title_justify="left", box=None,
                      pad_edge=False)
        for col, just in (("metric", "left"), ("main", "right"), ("cand.", "right"), ("change [95% CI]", "right"),
                          ("gate", "left")):
            table.add_column(col, justify=just, overflow="fold")
        for m in bt["metrics"]:
            gate = "unsure" if m["undecided"] else {True: "pass", False: "FAIL", None: ""}[m["passed"]]
            table.add_row(m["name"], fmt(m["main"]), fmt(m["candidate"]),
                          change_cell(m),
                          f"{gate} {m['rule'] or ''}".strip())
        console.print(table)
        failed = [c for c in bt["checks"]
                  if not c.get("passed") and c.get("name") not in {m["name"] for m in bt["metrics"]}]
        for c in failed:
            _para(console, f"check {c.get('name')}: FAIL", str(c.get("detail", "")))
        if bt["sample"]:
            _para(console, "Sample", bt["sample"])
    _para(console, "Verdict", (r["verdict"] or "none recorded") + "".join(
        f"\n- {reason}" for reason in (bt or {}).get("reasons", [])))
    live = "\n".join(f"round {c.get('round')}: {c.get('outcome')}" + "".join(
        f"\n  {explain_change(text, verdict, (c.get('intervals') or {}).get(text), c.get('round'))}"
        for text, verdict in (c.get("predictions") or {}).items()) for c in r["live"])
    _para(console, "Live check", live or "not measured yet (it runs after the next round trains on a merge)")
    if r["skill"]:
        _para(console, "Became skill", f"{r['skill']['name']} ({r['skill']['file']}, {r['skill']['commit'][:10]})")
    if r["revert"]:
        _para(console, "Reverted", f"{r['revert']['commit'][:10]}: {r['revert']['reason']}" + "".join(
            f"\n{key}: {value}" for key, values in r["revert"]["evidence"].items() for value in values))
    if r["missing"]:
        _para(console, "Missing", "\n".join(f"- {m}" for m in r["missing"]))


def print_round(r: dict, console: Console) -> None:
    console.print(Text(f"Round {r['round']}", style="bold"))
    console.print(" · ".join(f"{k} {fmt(v)}" for k, v in r["figures"].items() if v is not None) or "no figures",
                  markup=False, highlight=False)
    for f in r["findings"]:
        _para(console, f"finding {f['name']} ({f['severity']}, rate {fmt(f['rate'])}, {source_name(f)})",
              f.get("message") or "")
        for ex in f["examples"]:
            response = " ".join(str(ex.get("response", "")).split())
            _para(console, f"  e.g. {ex.get('traj_id')} reward {fmt(ex.get('reward'))} verified "
                           f"{fmt(ex.get('verified'))}", response[:300])
    _para(console, "Proposals", "\n".join(f"- {p['branch']}: {p['status']}" + (f" ({p['verdict']})" if p["verdict"]
                                          else "") for p in r["proposals"]) or "none")
    exam = r["exam"]
    acc = exam["accuracy"]
    shown = (f"{fmt(acc.get('value'))} [{fmt(acc.get('low'))}, {fmt(acc.get('high'))}]"  # a bound has no sign
             if isinstance(acc, dict) else fmt(acc))
    if isinstance(exam.get("vs_base"), dict) and exam["vs_base"].get("n"):
        shown += f"; vs base policy {change_text(exam['vs_base'])}"
    _para(console, "Held-out exam", shown)
    if r.get("rollback"):
        _para(console, "Rollback", r["rollback"]["message"])
    if r["missing"]:
        _para(console, "Missing", "\n".join(f"- {m}" for m in r["missing"]))


def print_draft(r: dict, console: Console) -> None:
    console.print(Text(f"{r['ref']}  parked draft  ({r['head'][:10]})", style="bold"))
    _para(console, "Never judged", r["note"])
    _para(console, "Commits since main", "\n".join(r["commits"]) or "none (the draft is main's own commit)")
    console.print(Text("Diff against main", style="bold"))
    _diff(console, r["diff"] or "(no change)")


def show(rd: RunDir, name: str, as_json: bool, console: Console | None = None) -> int:
    """Print ``name``'s record as text (80 columns at most) or JSON on stdout."""
    record = record_for(rd, name)
    if as_json:
        print(json.dumps(record, indent=2, default=str))
        return 0
    console = console or Console()
    console.width = min(console.width, 80)
    {"intervention": print_intervention, "round": print_round, "draft": print_draft}[record["kind"]](record, console)
    return 0
