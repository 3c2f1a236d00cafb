"""Every results table of the README and the docs, generated from the records under ``bench/results/`` (and
``bench/repair_results.jsonl``), written between marker comments in place.

    .venv/bin/python bench/tables.py            # regenerate every marked table
    .venv/bin/python bench/tables.py --check    # exit 1 naming each table that differs from its records

A table sits between ``<!-- table:NAME -->`` and ``<!-- /table:NAME -->``; what is between them is replaced, so
a figure typed by hand there does not survive the next run (``tests/test_tables.py`` runs ``--check``).
A record names its date, commit, machine, load and configuration; one quoted from an older text says so in its
``provenance``. Figures are recomputed from counts where the record holds counts (held-out accuracy from k of n,
paired changes from tasks gained and lost); quoted ones are shown as quoted. Repair cells of different code
versions are shown apart unless a table asks to pool them, and then it says how many versions it pools.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # bench/ scripts import each other by module name

from repair_flaws import CONTROL, FLAWS  # noqa: E402
from repair_table import latest_records, table, tables_by_config  # noqa: E402

from meta_agent.heldout_stats import clopper_pearson, format_change, format_interval, tango_interval  # noqa: E402

RESULTS = ROOT / "bench" / "results"
REPAIR_RESULTS = ROOT / "bench" / "repair_results.jsonl"
PAGES = ("README.md", "docs/*.md", "bench/README.md")
MARKER = re.compile(r"(<!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table:(?P=name) -->)", re.S)


def stamp(config: dict) -> dict:
    """What every record carries besides its figures: date and time (UTC), the commit (``+changes`` when tracked
    files differ), the machine (CPUs and model) and its load average now, and the bench's configuration."""
    import os
    import platform
    import subprocess
    import time

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    return {"date": time.strftime("%Y-%m-%d", time.gmtime()), "time_utc": time.strftime("%H:%M", time.gmtime()),
            "code": git("rev-parse", "HEAD")[:7] + ("+changes" if git("status", "--porcelain", "-uno") else ""),
            "machine": f"{os.cpu_count()} cores, {model or 'cpu model unknown'}",
            "load": "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg()), "config": config}


def append(bench: str, figures: dict, config: dict) -> dict:
    """Append one record of ``bench`` (``bench/results/<bench>.jsonl``): :func:`stamp` plus ``figures``. A bench
    calls this when it finishes; then ``bench/tables.py`` regenerates the pages that quote it."""
    record = {"bench": bench, **stamp(config), **figures}
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / f"{bench}.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
    return record


def records(name: str) -> list[dict]:
    path = RESULTS / f"{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _source(record: dict) -> str:
    when = record["date"] + (f" {record['window_utc']} UTC" if record.get("window_utc") else "")
    return (f"Source: `bench/results/{record['bench']}.jsonl`, {when}, code {record['code']}, {record['machine']}, "
            f"load {record['load']}" + (f"; {record['provenance']}" if record.get("provenance") else "") + ".")


def _accuracy(k: int, n: int) -> str:
    low, high = clopper_pearson(k, n)
    return format_interval(k / n, low, high)


def _change(pair: dict | None, n: int) -> str:
    if not pair:
        return "not recorded"
    gained, lost = pair["gained"], pair["lost"]
    low, high = tango_interval(gained, lost, n)
    return format_change((gained - lost) / n, low, high, low > 0 or high < 0) + f" ({gained} gained, {lost} lost)"


def default_run_summary() -> str:
    """The README's claim: base, each round, and the last round against round 0, from the newest record."""
    r = records("default-run")[-1]
    n, correct = r["exam_n"], r["correct"]
    rounds = sorted((k for k in correct if k != "base"), key=int)
    last = rounds[-1]
    head = ("| policy | held-out accuracy [95%] |\n|---|---|\n"
            f"| base (untrained) | {_accuracy(correct['base'], n)} |\n")
    body = "".join(f"| after round {k} | {_accuracy(correct[k], n)} |\n" for k in rounds)
    return (head + body + f"\nRound {last} vs round 0: **{_change(r['paired'].get(f'{last}-0'), n)}**; "
            f"`*` marks an interval that excludes zero. {n} tasks.\n\n" + _source(r))


def default_run_rounds() -> str:
    """Every record of the default run: one line each, so a re-run that moved a figure shows."""
    lines = ["| date | code | base | round 0 | round 1 | round 2 | last round vs round 0 |",
             "|---|---|---|---|---|---|---|"]
    for r in records("default-run"):
        n, c = r["exam_n"], r["correct"]
        cells = [f"{c[k] / n:.3f}" if k in c else "-" for k in ("base", "0", "1", "2")]
        last = _change(r["paired"].get("2-0"), n)
        lines.append(f"| {r['date']} | {r['code']} | " + " | ".join(cells) + f" | {last} |")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {_source(r)}" for r in records("default-run"))


def compare_arms() -> str:
    r = records("compare-arms")[-1]
    lines = ["| arm | runs | base | round 0 | round 1 | round 2 | last - fixed | last - round 0 | merged / rejected |",
             "|---|---|---|---|---|---|---|---|---|"]
    for a in r["quoted"]:
        lines.append(f"| {a['arm']} | {a['runs']} | {a['base']} | " + " | ".join(a["rounds"])
                     + f" | {a['last_minus_fixed']} | {a['last_minus_round0']} | {a['merged_rejected']} |")
    return "\n".join(lines) + "\n\n" + _source(r)


def throughput() -> str:
    r = records("throughput")[-1]
    lines = ["| goal | measured | bound | what bounds it | bench |", "|---|---|---|---|---|"]
    lines += [f"| {g['goal']} | {g['measured']} | {g['bound']} | {g['by']} | `{g['page']}` |" for g in r["quoted"]]
    return "\n".join(lines) + "\n\n" + _source(r)


def _repair_live() -> list[dict]:
    full = '{"candidates": 2, "heldout": 128, "knobs": []}'
    return [r for r in latest_records(REPAIR_RESULTS)
            if r["tier"] == "live" and r.get("config") == full and r.get("rounds") == 3
            and r.get("status") == "finished"]


def _arm_rows(cells: list[dict]) -> list[list[str]]:
    """The per-arm recall and precision rows of :func:`repair_table.table` over ``cells``."""
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in table(cells, []).splitlines() if line.startswith("|")]
    return [row for row in rows if row[0].startswith("live ") and len(row) == 4]


def repair_summary() -> str:
    """Recall and live precision per arm over the full-size live cells, pooled over code versions (asked for
    here, and said), the flaws the recipes were written for (in-sample) apart from held-out ones."""
    cells = _repair_live()
    versions = sorted({(r.get("code") or "")[:7] or "not recorded" for r in cells})
    in_sample = [r for r in cells if r["flaw"] in FLAWS or r["flaw"] == CONTROL]
    held_out = [r for r in cells if r not in in_sample]
    lines = ["| flaws | arm | recall (flaws repaired on main) | live precision (all merges) "
             "| of merges a later round checked |", "|---|---|---|---|---|"]
    for label, group in ((f"in-sample ({len(FLAWS)})", in_sample),
                         (f"held-out ({len({r['flaw'] for r in held_out})})", held_out)):
        rows = _arm_rows(group) if group else []
        lines += [f"| {label} | {arm.removeprefix('live ')} | " + " | ".join(rest) + " |" for arm, *rest in rows]
        if not rows:
            lines.append(f"| {label.split(' ')[0]} | - | no finished live cell yet | - | - |")
    return ("\n".join(lines) + f"\n\n{len(cells)} live cells (3 rounds, 3 seeds, the seed's knobs), pooled over "
            f"{len(versions)} code versions ({', '.join(versions)}; the tables per version: "
            "[docs/repair-bench.md](docs/repair-bench.md)). Source: "
            "`bench/repair_results.jsonl` via `bench/repair_table.py`.")


def repair_full() -> str:
    """Every configuration's tables, each code version apart."""
    return tables_by_config(latest_records(REPAIR_RESULTS), by_code=True)


ATTACK_SUITES = {
    "harness code in the sandbox (runtime, protocol, CPU)": ["test_hostile_harness.py", "test_harness_protocol.py"],
    "the gate: probe, diagnostics shape, audit, harms": [
        "test_probe.py", "test_probe_verl.py", "test_diagnose_shape.py", "test_audit_every_branch.py",
        "test_harm_checks.py", "test_live_audit.py", "test_findings_ratchet.py", "test_gate3_*.py"],
    "graders of untrusted code (SWE, code)": ["test_swe_attacks*.py", "test_swe_hidden_tests.py", "test_code_grader*.py"],
    "the archive (damaged or lost parts)": ["test_archive_ledger.py"],
}


def attacks() -> str:
    """Attack tests per layer: test functions in the suites that plant a hostile harness, program or file."""
    lines = ["| layer | attack tests | in |", "|---|---|---|"]
    total = 0
    import subprocess

    def committed(*args: str) -> str:  # the commit's test files, not another session's edits in progress
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout

    tracked = [Path(line) for line in committed("ls-tree", "--name-only", "HEAD", "tests/").splitlines()]
    for layer, patterns in ATTACK_SUITES.items():
        files = sorted({f for f in tracked for pattern in patterns if f.match(pattern)})
        count = sum(len(re.findall(r"^\s*def test_", committed("show", f"HEAD:{f.as_posix()}"), re.M))
                    for f in files)
        total += count
        lines.append(f"| {layer} | {count} | " + ", ".join(f"`{f.name}`" for f in files) + " |")
    return ("\n".join(lines) + f"\n| all | {total} | |\n\nCounted from the test files; the suite passes only when "
            "every one of them is stopped.")


DRIFTING = {"attacks"}
"""Tables counted from the tests themselves, which other work adds to: ``--check`` leaves them out unless
``--strict`` (regenerate them when you add an attack test)."""

TABLES: dict[str, Callable[[], str]] = {
    "default-run": default_run_summary, "default-run-history": default_run_rounds, "compare-arms": compare_arms,
    "throughput": throughput, "repair-summary": repair_summary, "repair-full": repair_full, "attacks": attacks,
}


def pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def render(text: str, made: dict[str, str], skip: frozenset[str] = frozenset()) -> str:
    """``text`` with every marked table replaced by its generated body (an unknown or skipped name is left as
    it is)."""
    def body(m: re.Match) -> str:
        name = m["name"]
        if name not in TABLES or name in skip:
            return m.group(0)
        if name not in made:
            made[name] = TABLES[name]().rstrip("\n") + "\n"
        return m.group(1) + made[name] + m.group(4)
    return MARKER.sub(body, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a table differs from its records")
    parser.add_argument("--strict", action="store_true", help="--check the tables counted from tests too")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose pages to regenerate")
    args = parser.parse_args(argv)
    made: dict[str, str] = {}
    stale = []
    skip = frozenset(DRIFTING) if args.check and not args.strict else frozenset()
    for page in pages(args.root):
        text = page.read_text()
        new = render(text, made, skip)
        if new != text:
            stale.append(page.relative_to(args.root))
            if not args.check:
                page.write_text(new)
    unknown = sorted({m["name"] for p in pages(args.root) for m in MARKER.finditer(p.read_text())} - set(TABLES))
    for name in unknown:
        print(f"unknown table {name!r} (known: {', '.join(TABLES)})", file=sys.stderr)
    if args.check and stale:
        print("tables out of step with their records: " + ", ".join(map(str, stale))
              + "; run .venv/bin/python bench/tables.py", file=sys.stderr)
        return 1
    print(("regenerated " if stale else "every table already matches its records") + ", ".join(map(str, stale)))
    return 1 if unknown else 0


if __name__ == "__main__":
    sys.exit(main())
