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

import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]  # bench/ scripts import each other by module name

import records as bench_records  # noqa: E402
from repair_flaws import CONTROL, FLAWS  # noqa: E402
from repair_table import flaw_sets, held_out_recall, latest_records, table, tables_by_config  # noqa: E402

from meta_agent.heldout_stats import clopper_pearson, format_change, format_interval, tango_interval  # noqa: E402

RESULTS = ROOT / "bench" / "results"
REPAIR_RESULTS = ROOT / "bench" / "repair_results.jsonl"
PAGES = ("README.md", "docs/*.md", "bench/README.md")
MARKER = re.compile(r"(<!-- table:(?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- /table:(?P=name) -->)", re.S)


stamp = bench_records.stamp  # what a record carries besides its figures (bench/records.py)


def records(name: str) -> list[dict]:
    return bench_records.read(name)


def _source(record: dict) -> str:
    when = record["date"] + (f" {record['window_utc']} UTC" if record.get("window_utc") else
                             f" {record['time_utc']} UTC" if record.get("time_utc") else "")
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


def _verl_entry(r: dict) -> str | None:
    """verl's reward worker with this entry, measured at the default 4,096 rows of one ``compute_score_batch``."""
    if r["config"].get("loop_rows") != 4096:
        return None
    m = r["figures"]["measures"]
    one = m["reward entry, sandboxed (1 worker), one call at a time"].split(" ")[0]
    batched = m["reward entry, sandboxed (1 worker), calls in flight batched"].split(" ")[0]
    noop = m["verl reward loop worker, reward doing nothing"].split(" ")[0]
    return (f"entry {one}-{batched}/s; in verl's reward worker "
            f"{m['verl reward loop worker, this entry'].split(' ')[0]}/s (a no-op reward there: {noop}/s)")


def _generation(kind: str) -> Callable[[dict], str | None]:
    """The ``shared`` path's ratio at batch 64, the size the goal is stated at."""
    def pick(r: dict) -> str | None:
        calls = [c for c in r["figures"]["calls"] if c["call"] == kind and c["path"] == "shared" and c["batch"] == 64]
        return (f"{calls[0]['ratio']:.2f} (ceiling {calls[0]['ceiling']:.2f}; matmul "
                f"{r['figures']['matmul_gflops']} GFLOP/s)") if calls else None
    return pick


def _backtest_1m(r: dict) -> tuple[str, str, str] | None:
    """The sandboxed backtest at 1M trajectories: wall and CPU ratios, and what bounds it in that record."""
    m = r["figures"].get("1,000,000 trajectories")
    if m is None:
        return None
    wall = m["sandboxed / in-process runtime pipeline (wall)"]
    cpu = m["in-process pipeline / sandboxed run (CPU s: the ratio a shared machine's load moves least)"]
    met = "met" if float(wall.rstrip("x")) >= 0.8 else "not met"
    return (f"{wall} wall, {cpu} CPU", met, "one group per request, each served by a fresh process; "
            f"host + container CPU {m['CPU s of the sandboxed run: host + container (runtime and harness workers)']} s")


THROUGHPUT: dict[str, tuple[str, Callable[[dict], str | tuple[str, str, str] | None]]] = {
    "sandboxed backtest >= 0.8x of in-process at 1M": ("bench_backtest", _backtest_1m),
    "verl reward >= 20,000 traj/s per worker": ("bench_verl", _verl_entry),
    "exam >= 0.3 of the compute limit": ("bench_generation", _generation("exam")),
    "rollouts >= 0.3 of the compute limit": ("bench_generation", _generation("rollout")),
}
"""Goals a bench's own record can answer: the bench, and what its record measured at the size the goal names
(None for a record of another size: it is shown in that bench's own table, never in the goal's)."""


def throughput() -> str:
    """The goals: each from the newest record of its bench at the goal's size, else the quoted figure as quoted."""
    quoted = records("throughput")[-1]
    lines = ["| goal | measured | bound | what bounds it | bench |", "|---|---|---|---|---|"]
    sources, quoted_used = [], False
    for g in quoted["quoted"]:
        bench, pick = THROUGHPUT.get(g["goal"], (g["page"].removesuffix(".py"), lambda r: None))
        fresh = [(r, m) for r in records(bench) if (m := pick(r)) is not None]
        if fresh:
            r, measured = fresh[-1]
            bound, by = g["bound"], g["by"]
            if isinstance(measured, tuple):  # the record says what bounds it too (the quote predates it)
                measured, bound, by = measured
            mark = f"[{len(sources) + 1}]"
            sources.append(f"{mark} {_source(r)}")
            lines.append(f"| {g['goal']} | {measured} {mark} | {bound} | {by} | `{g['page']}` |")
        else:
            quoted_used = True
            lines.append(f"| {g['goal']} | {g['measured']} | {g['bound']} | {g['by']} | `{g['page']}` |")
    notes = ([f"Unmarked figures are quoted. {_source(quoted)}"] if quoted_used else []) + sources
    return "\n".join(lines) + "\n\n" + "\n".join(notes)


def _flat(value: object, key: str = "") -> list[str]:
    """``key=value`` pairs of a record's figures, nested keys joined by ``.``, lists by their items' first field."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _flat(v, f"{key}.{k}" if key else str(k))]
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        def label(v: dict) -> str:
            return " ".join(str(x) for x in v.values() if isinstance(x, str))
        return [pair for v in value
                for pair in _flat({k: x for k, x in v.items() if not isinstance(x, str)}, f"{key}[{label(v)}]")]
    if isinstance(value, str) and "\n" in value:  # a printed table (compare_arms): too big for a cell
        return [f"{key}=({len(value.splitlines())} lines, in the record)"]
    return [f"{key}={value:,.4g}" if isinstance(value, float) else f"{key}={value}"]


def bench_records_table(bench: str) -> str:
    """Every record one bench wrote (``records-<bench>``): when, which code, which machine and load, at which
    size, and what it measured, one line each, never pooled."""
    found = records(bench)
    if not found:
        return f"No record of `{bench}` yet: run `bench/{bench}.py` (it appends to `bench/results/{bench}.jsonl`)."
    lines = ["| date (UTC) | code | machine | load | config | figures |", "|---|---|---|---|---|---|"]
    for r in found:
        config = ", ".join(f"{k}={v}" for k, v in r["config"].items() if not isinstance(v, dict))
        lines.append(f"| {r['date']} {r.get('time_utc', '')} | {r['code']} | {r['machine']} | {r['load']} | "
                     f"{config} | {'; '.join(_flat(r.get('figures', {})))} |")
    return "\n".join(lines) + f"\n\nSource: `bench/results/{bench}.jsonl`."


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
            lines.append(f"| {label.split(' ')[0]} | - | no full-size (3-round) live cell yet; smaller ones: "
                         "docs/repair-bench.md | - | - |")
    return ("\n".join(lines) + f"\n\n{len(cells)} live cells (3 rounds, 3 seeds, the seed's knobs), pooled over "
            f"{len(versions)} code versions ({', '.join(versions)}; the tables per version: "
            "[docs/repair-bench.md](docs/repair-bench.md)). Source: "
            "`bench/repair_results.jsonl` via `bench/repair_table.py`.")


def repair_heldout() -> str:
    """Each held-out flaw set's recall when it was still held out, and since (every record, not the newest)."""
    records = [json.loads(line) for line in REPAIR_RESULTS.read_text().splitlines() if line.strip()]
    return (held_out_recall(records, flaw_sets(ROOT / "bench")) + "\n\nEach set was written by a session that read "
            "no recipe, search or check code, and run once at the recipe set it was planted against (offline, the "
            "small size: one GRPO step of 2 groups of 4, 1 seed) before any recipe was written for it; \"since\" "
            "is the newest offline recipe-arm run of the same flaws at a later recipe set. Source: "
            "`bench/repair_results.jsonl` via `bench/repair_table.py`.")


def repair_full() -> str:
    """Every configuration's tables, each code version apart."""
    return tables_by_config(latest_records(REPAIR_RESULTS, per_code=True), by_code=True)


ATTACK_SUITES = {
    "harness code in the sandbox (runtime, protocol, CPU)": ["test_hostile_harness.py", "test_harness_protocol.py"],
    "the gate: probe, diagnostics shape, audit, harms": [
        "test_probe.py", "test_probe_verl.py", "test_diagnose_shape.py", "test_audit_every_branch.py",
        "test_harm_checks.py", "test_live_audit.py", "test_findings_ratchet.py", "test_gate3_*.py"],
    "graders of untrusted code (SWE, code)": [
        "test_swe_attacks*.py", "test_swe_hidden_tests.py", "test_code_grader*.py"],
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


def recipes() -> str:
    """The recipe set as the code holds it: each rule, what it does (its docstring's first sentence) and the
    failure modes it answers (``REMEDIES``); then the modes no recipe may edit (``NO_SAFE_EDIT``), with why."""
    from meta_agent.agents import recipes as recipe_set

    answers: dict[str, list[str]] = {}
    for mode, names in recipe_set.REMEDIES.items():
        for name in names:
            answers.setdefault(name, []).append(f"`{mode}`")
    lines = [f"Recipe set {recipe_set.RECIPES_VERSION}.", "", "| recipe | what it does | failure modes it answers |",
             "|---|---|---|"]
    for rule in recipe_set.RULES:
        name = rule.__name__.replace("_", "-")
        doc = " ".join((rule.__doc__ or "").split())
        first = re.split(r"(?<=[.)])\s+(?=[A-Z(])", doc, maxsplit=1)[0].replace("|", "/")
        lines.append(f"| `{name}` | {first} | {', '.join(answers.get(name, [])) or '-'} |")
    lines += ["", "| failure mode with no safe recipe | why |", "|---|---|"]
    lines += [f"| `{mode}` | {why} |" for mode, why in recipe_set.NO_SAFE_EDIT.items()]
    return "\n".join(lines) + ("\n\nGenerated from `meta_agent/agents/recipes.py` (`RULES`, `REMEDIES`, "
                                "`NO_SAFE_EDIT`). SWE and code rounds add rules of their own (`swe_recipes.py`, "
                                "`code_recipes.py`), which fire only on their domain's digest.")


DRIFTING = {"attacks"}
"""Tables counted from the tests themselves, which other work adds to: ``--check`` leaves them out unless
``--strict`` (regenerate them when you add an attack test)."""

TABLES: dict[str, Callable[[], str]] = {
    "default-run": default_run_summary, "default-run-history": default_run_rounds, "compare-arms": compare_arms,
    "throughput": throughput, "repair-summary": repair_summary, "repair-heldout": repair_heldout,
    "recipes": recipes,
    "repair-full": repair_full, "attacks": attacks,
}


def pages(root: Path = ROOT) -> list[Path]:
    return sorted({p for pattern in PAGES for p in root.glob(pattern)})


def _maker(name: str) -> Callable[[], str] | None:
    if name.startswith("records-"):
        return lambda: bench_records_table(name.removeprefix("records-"))
    return TABLES.get(name)


def render(text: str, made: dict[str, str], skip: frozenset[str] = frozenset()) -> str:
    """``text`` with every marked table replaced by its generated body (an unknown or skipped name is left as
    it is)."""
    def body(m: re.Match) -> str:
        name, maker = m["name"], _maker(m["name"])
        if maker is None or name in skip:
            return m.group(0)
        if name not in made:
            made[name] = maker().rstrip("\n") + "\n"
        return m.group(1) + made[name] + m.group(4)
    return MARKER.sub(body, text)


def main(argv: list[str] | None = None) -> int:
    parser = bench_records.BenchParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a table differs from its records")
    parser.add_argument("--strict", action="store_true", help="--check the tables counted from tests too")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose pages to regenerate")
    args = parser.parse_args(argv)
    if not (args.root / "README.md").is_file():
        bench_records.refuse(f"--root {args.root} holds no README.md: give the checkout whose pages to regenerate")
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
    unknown = sorted({m["name"] for p in pages(args.root) for m in MARKER.finditer(p.read_text())
                      if _maker(m["name"]) is None})
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
