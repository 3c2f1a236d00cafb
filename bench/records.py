"""What every bench shares: its record of a run and its way of refusing bad input.

A bench writes what it measured as one JSON line under ``bench/results/`` (``<bench>.jsonl`` unless
``--record FILE``; ``--no-record`` for a look that leaves no trace), stamped with the date, the commit (and
``+changes`` when tracked files differ from it), the machine (cores, CPU model, memory, GPU or none), the load
average before and after the run, and the bench's configuration. ``bench/tables.py`` builds the pages' tables
from these lines, so no figure is typed by hand.

    parser = records.parser("bench_digest", __doc__)     # --record / --no-record; bad input exits 2, one line
    args = parser.parse_args()
    load = records.load_now()
    ...                                                  # measure
    records.write(args, config={"rows": args.rows}, figures={"total_s": 8.1}, load_before=load)

Bad input (a missing file, an unknown name, a flag value out of range) exits 2 with one line saying what is wrong
and what to do (:func:`refuse`, and :class:`BenchParser` for argparse's own errors); work that fails exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
# Where records are appended unless --record says otherwise.  The test suite points it at a temporary folder
# (tests/conftest.py), so a bench a test runs never adds a record that the pages' tables would then quote.
RECORDS_OUT = Path(os.environ.get("BENCH_RECORDS_DIR") or RESULTS)


class BenchParser(argparse.ArgumentParser):
    """argparse, with its errors on one line (what is wrong; ``--help`` for what is allowed), exit 2."""

    def error(self, message: str) -> NoReturn:
        refuse(f"{message}; see {self.prog} --help", self.prog)


def refuse(message: str, prog: str | None = None) -> NoReturn:
    """Bad input: one line on stderr naming what is wrong and what to do, exit 2 (no traceback)."""
    name = prog or Path(sys.argv[0]).name
    print(f"{name}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1 (sizes, repeats, rounds)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is below 1: give a count of at least 1")
    return value


def record_file(text: str) -> Path:
    """An argparse type: a file the record can be appended to, checked before the work rather than after it."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: give a .jsonl file to append the record to")
    if any(parent.exists() and not parent.is_dir() for parent in path.parents):
        raise argparse.ArgumentTypeError(f"{text} lies under a file: give a .jsonl file in a folder")
    return path


def parser(bench: str, doc: str | None) -> BenchParser:
    """The bench's parser with ``--record FILE`` (default ``bench/results/<bench>.jsonl``) and ``--no-record``."""
    p = BenchParser(description=(doc or bench).split("\n\n")[0])
    p.add_argument("--record", type=record_file, default=RECORDS_OUT / f"{bench}.jsonl",
                   help="the JSON-lines file this run's figures are appended to (default: %(default)s)")
    p.add_argument("--no-record", action="store_true", help="print only; append no record")
    p.set_defaults(bench=bench)
    return p


def load_now() -> str:
    return "{:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def machine() -> str:
    """Cores, CPU model, memory and GPU (or "no GPU"), in words."""
    cpuinfo = Path("/proc/cpuinfo")
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                  if line.startswith("model name")), "") if cpuinfo.exists() else platform.processor()
    meminfo = Path("/proc/meminfo")
    kib = next((int(line.split()[1]) for line in meminfo.read_text().splitlines() if line.startswith("MemTotal")),
               0) if meminfo.exists() else 0
    gpu = "no GPU"
    if shutil.which("nvidia-smi"):
        names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                               text=True).stdout.split("\n")
        gpu = ", ".join(n.strip() for n in names if n.strip()) or gpu
    return (f"{os.cpu_count()} cores, {model or 'cpu model unknown'}, "
            f"{kib / 1024 ** 2:.0f} GiB memory, {gpu}")


def stamp(config: dict, load_before: str | None = None) -> dict:
    """What every record carries besides its figures (date and time in UTC, commit, machine, load, config)."""
    dirty = _git("status", "--porcelain", "-uno")
    load = load_now()
    return {"date": time.strftime("%Y-%m-%d", time.gmtime()), "time_utc": time.strftime("%H:%M", time.gmtime()),
            "code": _git("rev-parse", "HEAD")[:7] + ("+changes" if dirty else ""), "machine": machine(),
            "load": load if load_before is None else f"{load_before} before, {load} after", "config": config}


def append_record(name: str, config: dict, figures: dict[str, Any], path: Path | None = None,
                  load_before: str | None = None) -> dict:
    """Append one record of bench ``name`` to ``path`` (default ``bench/results/<name>.jsonl``, or
    ``$BENCH_RECORDS_DIR/<name>.jsonl`` where that is set) and return it.
    One line, written whole with one call, so a crash leaves the earlier records readable."""
    record = {"bench": name, **stamp(config, load_before), "figures": figures}
    path = Path(path) if path is not None else RECORDS_OUT / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")
    return record


def write(args: argparse.Namespace, config: dict, figures: dict[str, Any], load_before: str | None = None) -> None:
    """Append the record unless ``--no-record``, and say where it went."""
    if args.no_record:
        return
    append_record(args.bench, config, figures, args.record, load_before)
    print(f"recorded in {args.record}")


def read(name_or_path: str | Path) -> list[dict]:
    """The records of a bench (by name, under ``bench/results/``) or of a file, oldest first."""
    path = Path(name_or_path)
    if path.suffix != ".jsonl":
        path = RESULTS / f"{name_or_path}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
