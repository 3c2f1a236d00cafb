"""What ``python -m meta_agent`` shows while a run goes and when it ends: progress, round panels, the run table.

``meta_agent.run_cli`` drives the loop and hands it :class:`ConsoleEvents`; everything here only reads
the run folder (digests, result.json, the archive) and draws on stderr::

    events = ConsoleEvents()                      # RoundLoop(..., events=events)
    console.print(run_table(rd, rounds))          # one row per round: exam, change vs base, time per part
    console.print(time_line(rd, events.trained, events.seconds))
"""

from __future__ import annotations

import json
import time

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from meta_agent.heldout_stats import format_change, format_interval
from meta_agent.run_dir import RunDir

console = Console(stderr=True)


class ConsoleEvents:
    """Progress bars and a one-screen summary per round."""

    def __init__(self, out: Console | None = None) -> None:
        self.out = out or console
        self.progress: Progress | None = None
        self.task = None
        self.seconds: dict[str, float] = {}
        """Seconds per loop phase spent in this process, summed over rounds."""
        self.trained: list[int] = []
        """Rounds whose train phase ran in this process."""
        self._clock: tuple[str | None, float] = (None, time.monotonic())

    def phase(self, n: int, phase: str) -> None:
        self.close()
        self._tick(phase)
        if phase == "train" and n not in self.trained:
            self.trained.append(n)
        self.out.print(f"[bold cyan]round {n}[/] · {phase}")

    def _tick(self, phase: str | None) -> None:
        running, since = self._clock
        now = time.monotonic()
        if running:
            self.seconds[running] = self.seconds.get(running, 0.0) + now - since
        self._clock = (phase, now)

    def train_step(self, step: int, total: int, metrics: dict) -> None:
        reward = metrics.get("reward", metrics.get("reward_mean"))
        desc = f"reward {reward:.3f}" if isinstance(reward, (int, float)) else ""
        if not self.out.is_terminal:  # piped or logged: a bar draws nothing there, so one line per step
            elapsed = time.monotonic() - self._clock[1]
            self.out.print(f"  training step {step}/{total}" + (f" · {desc}" if desc else "")
                           + f" · {elapsed:.0f} s into the phase", highlight=False)
            return
        if self.progress is None:
            self.progress = Progress(TextColumn("  training"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                     TextColumn("{task.description}"), TimeElapsedColumn(), console=self.out)
            self.progress.start()
            self.task = self.progress.add_task("", total=total)
        self.progress.update(self.task, completed=step, total=total, description=desc)
        if step >= total:
            self.close()

    def message(self, text: str) -> None:
        self.close()
        self.out.print(f"  {text}")

    def round_done(self, summary: dict) -> None:
        self.close()
        self._tick(None)
        self.out.print(round_panel(summary))

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def round_panel(summary: dict) -> Panel:
    d = summary["digest"]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()

    def fmt(key: str) -> str:
        value = d.get(key)
        trend = (d.get("trends") or {}).get(key, {})
        delta = trend.get("delta") if isinstance(trend, dict) else None
        text = f"{value:.3f}" if isinstance(value, (int, float)) else "-"
        return text + (f"  ({delta:+.3f})" if isinstance(delta, (int, float)) else "")

    for key in ("reward_mean", "verified_mean", "heldout_accuracy", "zero_variance_share", "truncation_rate",
                "hack_rate", "failure_pay", "miss_rate"):
        table.add_row(key, fmt(key))
    for label, text in heldout_lines(d.get("heldout") or {}, d.get("round")):
        table.add_row(label, text)
    seconds = (summary.get("eval") or {}).get("seconds") or {}
    if seconds:
        table.add_row("seconds", ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    for alarm in d.get("tripwire") or []:
        if alarm.get("fired"):
            table.add_row("tripwire", f"[red]{alarm['detail']}[/]")
    if d.get("rollback"):
        table.add_row("rollback", f"[yellow]{d['rollback']['message']}[/]")
    for iv in summary["interventions"]:
        colour = {"merged": "green", "rejected": "red"}.get(iv["status"], "yellow")
        table.add_row("intervention", f"[{colour}]{iv['status']}[/] {iv['branch']}")
    for check in d.get("live_checks", []):
        table.add_row("live check", f"{check['outcome']} {check['branch']}")
    table.add_row("main", (summary.get("main") or "")[:10])
    table.add_row("details", summary["round_dir"])
    return Panel(table, title=f"round {summary['round']} done", expand=False)


def run_table(rd: RunDir, rounds: int) -> Table:
    """End of run: the trusted exam per round (the untrained base policy first) with 95% intervals, the paired
    change from the base and from round 0, the share of GRPO groups without signal and where each round's
    time went."""
    table = Table(title="held-out exam per round (95% intervals)")
    for column in ("round", "accuracy", "vs base policy", "vs round 0", "zero-variance groups", "seconds"):
        table.add_column(column)
    for n in range(rounds):
        path = rd.round_dir(n) / "digest.json"
        d = json.loads(path.read_text()) if path.exists() else {}
        figures = d.get("heldout") or {}
        base = figures.get("base")
        if n == 0 and base:
            table.add_row("base", format_interval(base["value"], base["low"], base["high"]), "", "", "", "")
        acc = figures.get("accuracy")
        result = rd.round_dir(n) / "train" / "result.json"
        seconds = json.loads(result.read_text())["eval"].get("seconds", {}) if result.exists() else {}
        zero = d.get("zero_variance_share")
        table.add_row(str(n), format_interval(acc["value"], acc["low"], acc["high"]) if acc else "-",
                      _change(figures.get("vs_base")), "" if n == 0 else _change(figures.get("vs_first")),
                      f"{zero:.2f}" if isinstance(zero, (int, float)) else "-",
                      ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()))
    table.caption = ("* the interval excludes zero: a change beyond chance on the same tasks; "
                     "'vs round 0' is what training after the first round added")
    return table


def _change(d: dict | None) -> str:
    """A digest's paired change (``vs_base``, ``vs_first``) for the table; ``-`` when that exam is unknown."""
    if not d or not d["n"]:
        return "-"
    return format_change(d["value"], d["low"], d["high"], d["excludes_zero"])


def time_line(rd: RunDir, trained: list[int], phases: dict[str, float]) -> str:
    """Where this process's time went, measured: GRPO training, exams and everything else, with the
    generation rates that set them, so a run that misses its time goal shows why.  ``trained``: the
    rounds this process trained, ``phases``: its seconds per loop phase (a resumed run counts only what
    it ran itself)."""
    from rl_backend.archive import Archive

    total = sum(phases.values())
    backend = {"base_exam": 0.0, "grpo": 0.0, "exam": 0.0}
    tokens = {"train": 0, "heldout": 0}
    archive = Archive(rd.archive) if rd.archive.exists() else None
    for n in trained:
        result = rd.round_dir(n) / "train" / "result.json"
        seconds = json.loads(result.read_text())["eval"].get("seconds", {}) if result.exists() else {}
        for key in backend:
            backend[key] += seconds.get(key, 0.0)
        for split in tokens:
            rows = archive.rows(run_id=rd.path.name, round=n, split=split, columns=["response_tokens"]) \
                if archive else []
            tokens[split] += sum(r["response_tokens"] or 0 for r in rows)
    if not total:
        return "time: no phase ran in this process"
    exams = backend["base_exam"] + backend["exam"]
    rest = total - backend["grpo"] - exams
    others = {"policy load/save, sandbox, archive": phases.get("train", 0.0) - backend["grpo"] - exams}
    others |= {k: v for k, v in phases.items() if k != "train"}

    def rate(n_tokens: int, seconds: float) -> str:
        return f"{n_tokens / seconds:.0f} tokens/s" if seconds > 0 else "-"

    return (f"time: {total:.0f} s in all; GRPO training {backend['grpo']:.0f} s ({backend['grpo'] / total:.0%}, "
            f"{tokens['train']} rollout tokens at {rate(tokens['train'], backend['grpo'])} with the update), "
            f"exams {exams:.0f} s ({exams / total:.0%}: base policy {backend['base_exam']:.0f}, after training "
            f"{backend['exam']:.0f} for {tokens['heldout']} answer tokens at "
            f"{rate(tokens['heldout'], backend['exam'])}), "
            f"other {rest:.0f} s ({rest / total:.0%}: "
            + ", ".join(f"{k} {v:.0f}" for k, v in others.items()) + ")")


def heldout_lines(figures: dict, round: int | None = None) -> list[tuple[str, str]]:
    """The round's trusted exam with 95% intervals: accuracy, and its paired change from the base policy, from
    the round it trained from (the previous one, unless a rollback restarted ``round`` from an earlier one) and
    (from round 2 on) from round 0, flagged when the interval excludes zero."""
    lines = []
    acc = figures.get("accuracy")
    if acc and acc["n"]:
        lines.append(("held-out exam", f"{format_interval(acc['value'], acc['low'], acc['high'])} on {acc['n']} tasks"))
    start = figures.get("trained_from")  # a rolled-back round is paired with the round it restarted from
    previous = "vs last round" if start is None or round in (None, start + 1) else f"vs round {start}, its start"
    for key, label in (("vs_base", "vs base policy"), ("vs_previous", previous), ("vs_first", "vs round 0")):
        d = figures.get(key)
        if key == "vs_first" and d == figures.get("vs_previous"):  # round 1: round 0 is the last round
            continue
        if d and d["n"]:
            verdict = "significant" if d["excludes_zero"] else "within noise"
            lines.append((label, f"{format_interval(d['value'], d['low'], d['high'], signed=True)} "
                                 f"(+{d['gained']}/-{d['lost']} tasks, {verdict})"))
    return lines
