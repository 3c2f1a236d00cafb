"""Held-out bad input for the exit-code leftovers of issue 49, written after their fixes froze (b2c2bea).

None of these was in mind while the fixes were built: a budget amount in another spelling, verl_import's other
arguments (a verifier that does not exist, ``--help``), a planted bug of another kind inside ``tasks``, and
``report --out`` given as a nested folder.  One of the ten won against the frozen code (91827a9: a
``--verifier`` module that does not exist exited 1 with ModuleNotFoundError's traceback); fixed after.
"""

from __future__ import annotations

import pytest

from test_cli_exit_codes import NEW, case, refused_in_one_line, run  # noqa: F401 (run: a fixture)
from test_cli_exit_codes_leftovers import _python

BUDGET = [
    case("--budget-cost", "", "--dry-run", "--run-dir", NEW, said=("--budget-cost",), absent=NEW),
    case("--budget-cost", "NaN", "--dry-run", "--run-dir", NEW, said=("--budget-cost",), absent=NEW),
    case("--budget-round-cost", "-0.5", "--dry-run", "--run-dir", NEW, said=("--budget-round-cost",), absent=NEW),
    case("--budget-compute-hours", "2h", "--dry-run", "--run-dir", NEW, said=("--budget-compute-hours",),
         absent=NEW),
]


@pytest.mark.parametrize("args, said, absent", BUDGET)
def test_heldout_budget_spellings_are_refused(run, tmp_path, args, said, absent):  # noqa: F811
    refused_in_one_line(run, tmp_path, args, said, absent)


def _dump(tmp_path):
    folder = tmp_path / "dump"
    folder.mkdir()
    line = '{"input": "q", "output": "a", "gts": "1", "score": 1.0, "step": 1, "uid": "p_0_0"}\n'
    (folder / "1.jsonl").write_text(line)
    return folder


@pytest.mark.parametrize("verifier", [
    "no_such_module_xyz:verify", "domains.no_such_module:verify", "domains.math:no_such_function", "nocolon"])
def test_verl_import_refuses_a_verifier_that_does_not_exist_in_one_line(tmp_path, verifier):
    proc = _python("-m", "rl_backend.verl_import", str(_dump(tmp_path)), "--archive", str(tmp_path / "a"),
                   "--run-id", "r", "--round", "0", "--domain", "math", "--split", "train", "--verifier", verifier)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and "--verifier" in lines[0], proc.stderr[-3000:]
    assert not (tmp_path / "a").exists()  # refused before any archive is opened


def test_verl_import_help_still_shows_the_usage():
    proc = _python("-m", "rl_backend.verl_import", "--help")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:") and "--up-to-step" in proc.stdout


PLANTED = """
import sys
import meta_agent.tasks_cli as tasks_cli

def shipped_specs():  # a planted bug of another kind than the ValueError the leftover named
    return {}["missing"]

tasks_cli.shipped_specs = shipped_specs
raise SystemExit(tasks_cli.main(sys.argv[1:]))
"""


def test_a_keyerror_inside_tasks_build_exits_1_with_its_traceback():
    proc = _python("-c", PLANTED, "build", "--domain", "swe")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" in proc.stderr and "KeyError" in proc.stderr, proc.stderr


def test_report_out_nested_and_new_holds_every_file(run, tmp_path):  # noqa: F811
    out = tmp_path / "a" / "b" / "site"
    proc = _python("-m", "meta_agent", "report", "--run-dir", str(run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == ["curves.png", "index.html", "report.md"]
    assert not (run / "report").exists()
