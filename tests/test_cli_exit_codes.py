"""One exit-code rule for every subcommand of ``python -m meta_agent``: bad input exits 2 with one line.

Bad input -- a missing run, file or folder, an unknown branch or name, ``main`` as a branch, a flag value
out of range -- exits 2 and prints exactly one line on stderr that names what is wrong (no traceback, no
usage block).  Work that fails exits 1.  Each case runs the real command line in a subprocess, as a user
would, with no ``COLUMNS`` so that a message hard-wrapped at 80 columns counts as several lines.  Every
input here is refused before training, Docker or the network is reached.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from meta_agent.cli import SUBCOMMANDS
from meta_agent.run_dir import RunDir
from test_loop import _tiny_run

ROOT = Path(__file__).resolve().parents[1]
R, T = "{run}", "{tmp}"  # placeholders: a real (tiny, untrained) run folder and an empty scratch folder


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "META_AGENT_DEBUG")}
    return subprocess.run([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """A run folder with a harness repo and run.json, never trained: enough for every refusal."""
    path = tmp_path_factory.mktemp("exit-codes") / "run"
    _tiny_run(path)
    return path


def case(*args: str, said: tuple[str, ...], absent: str | None = None, xfail: str | None = None):
    """One bad command line, the texts its one line must hold, a path it must not create; ``xfail``: how main
    refused it wrongly when this test was written (a traceback, exit 1, a usage block, the run created)."""
    marks = [pytest.mark.xfail(strict=True, reason=xfail)] if xfail else []
    return pytest.param(args, said, absent, marks=marks, id=" ".join(args))


USAGE = "argparse prints its usage block before the error line"
NEW, MISSING = f"{T}/new", f"{T}/missing"
CASES = [
    # the round loop (no subcommand)
    case("--domain", "nope", "--run-dir", NEW, said=("unknown domain 'nope'", "math"), absent=NEW),
    case("--rounds", "abc", "--run-dir", NEW, said=("--rounds", "'abc'"), absent=NEW),
    case("--sample-groups", "1", "--run-dir", NEW, said=("--sample-groups", "at least 2"), absent=NEW),
    case("--candidates", "-1", "--run-dir", NEW, said=("--candidates",), absent=NEW),
    case("--budget-tokens", "-5", "--run-dir", NEW, said=("--budget-tokens",), absent=NEW),
    case("--agent", "llm", "--run-dir", NEW, said=("--agent llm needs --model",), absent=NEW),
    case("--resume", said=("--resume needs --run-dir",)),
    case("--resume", "--run-dir", MISSING, said=(f"{MISSING} does not exist",), absent=MISSING),
    case("--resume", "--run-dir", T, said=("holds no run",)),
    case("--run-dir", R, said=("already holds a run", "--resume")),
    case("--from-branch", "main", "--run-dir", NEW, said=("--from-branch and --from-run go together",), absent=NEW),
    case("--from-run", MISSING, "--from-branch", "main", "--run-dir", NEW, said=(f"{MISSING} does not exist",),
         absent=NEW),
    case("--from-run", R, "--from-branch", "iv/nope", "--run-dir", NEW, said=("iv/nope", "--from-branch"), absent=NEW),
    case("--model-path", MISSING, "--run-dir", NEW, "--dry-run", said=("--model-path", MISSING), absent=NEW),
    case("frobnicate", said=("unknown command 'frobnicate'",)),
    case("histroy", "--run-dir", R, said=("did you mean history?",)),
    # backtest
    case("backtest", "iv/x", "--run-dir", MISSING, said=(f"{MISSING} does not exist",), absent=MISSING),
    case("backtest", "iv/nope", "--run-dir", R, said=("'iv/nope' is no intervention branch",)),
    case("backtest", "main", "--run-dir", R, said=("main", "intervention branch")),
    case("backtest", "iv/x", "--run-dir", R, "--groups", "1", said=("--groups", "at least 2")),
    case("backtest", "iv/x", "--run-dir", R, "--seed", "abc", said=("--seed", "'abc'")),
    case("backtest", "iv/x", "--run-dir", R, "--workers", "2", said=("--workers", "--groups all")),
    case("backtest", "iv/x", "--run-dir", R, "--workers", "0", "--groups", "all", said=("--workers", "at least 1")),
    case("backtest", "--run-dir", R, said=("branch",)),
    # history, show
    case("history", "--run-dir", MISSING, said=(f"{MISSING} does not exist",), absent=MISSING),
    case("history", "--run-dir", T, said=("holds no run",)),
    case("history", said=("--run-dir",)),
    case("show", "nope", "--run-dir", R, said=("'nope' is no intervention branch",)),
    case("show", "7", "--run-dir", R, said=("'7' is no round",)),
    case("show", "iv/x", "--run-dir", MISSING, said=(f"{MISSING} does not exist",), absent=MISSING),
    # demo
    case("demo", "--run-dir", R, said=("already holds a run",)),
    case("demo", "--run-dir", f"{T}/demo", "--groups", "0", said=("--groups", "0"), absent=f"{T}/demo"),
    case("demo", "--run-dir", f"{T}/demo", "--groups", "x", said=("--groups", "'x'"), absent=f"{T}/demo"),
    # report
    case("report", said=("report needs --run-dir",)),
    case("report", "--run-dir", R, "--compare", R, said=("not both",)),
    case("report", "--run-dir", MISSING, said=(f"{MISSING} does not exist",), absent=MISSING),
    case("report", "--compare", MISSING, R, "--out", f"{T}/out", said=(f"{MISSING} does not exist",),
         absent=f"{T}/out"),
    # import-trajectories
    case("import-trajectories", f"{T}/missing.json", "--format", "mini-swe-agent", "--archive", f"{T}/archive",
         "--run-id", "imp", said=(f"{T}/missing.json",), absent=f"{T}/archive"),
    case("import-trajectories", T, "--format", "mini-swe-agent", "--archive", f"{T}/archive", "--run-id", "imp",
         said=(T,), absent=f"{T}/archive"),
    case("import-trajectories", f"{T}/bad.yaml", "--format", "nope", "--archive", f"{T}/archive", "--run-id", "imp",
         said=("--format", "'nope'"), absent=f"{T}/archive"),
    case("import-trajectories", f"{T}/bad.yaml", "--format", "mini-swe-agent", "--archive", f"{T}/archive",
         "--run-id", "imp", said=(f"{T}/bad.yaml",), absent=f"{T}/archive"),
    # rescore
    case("rescore", "--run-dir", MISSING, said=(f"{MISSING} does not exist",), absent=MISSING),
    case("rescore", "--run-dir", R, "--workers", "0", said=("--workers", "at least 1")),
    # tasks
    case("tasks", said=("command",)),
    case("tasks", "frob", said=("'frob'",)),
    case("tasks", "check", f"{T}/missing.yaml", said=(f"{T}/missing.yaml",)),
    case("tasks", "check", f"{T}/bad.yaml", said=(f"{T}/bad.yaml", "not valid YAML")),
    case("tasks", "list", said=("--domain",)),
    case("tasks", "build", "--domain", "code", said=("--domain", "'code'")),
    case("tasks", "import-swebench", f"{T}/missing.json", "--repo-path", MISSING, said=("--repo-path",)),
]


@pytest.mark.parametrize("args, said, absent", CASES)
def test_bad_input_exits_2_with_one_line(run, tmp_path, args, said, absent):
    refused_in_one_line(run, tmp_path, args, said, absent)


def refused_in_one_line(run: Path, tmp_path: Path, args: tuple[str, ...], said: tuple[str, ...],
                        absent: str | None) -> None:
    """Exit 2, one stderr line holding every one of ``said``, no traceback, ``absent`` not created."""
    (tmp_path / "bad.yaml").write_text("x: [\n")  # neither valid YAML nor JSON
    (tmp_path / "afile").write_text("not a folder\n")
    fill = {R: str(run), T: str(tmp_path)}

    def real(text: str) -> str:
        for key, value in fill.items():
            text = text.replace(key, value)
        return text

    proc = _cli(*map(real, args))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1, proc.stderr[-3000:]
    assert "error:" in lines[0], lines[0]
    for text in said:
        assert real(text) in lines[0], f"{real(text)!r} not in: {lines[0]}"
    if absent is not None:
        assert not Path(real(absent)).exists(), f"{real(absent)} was created by a refused command"
    assert RunDir(run).state() == {}  # the shared run was never touched: no state.json


def test_every_subcommand_has_a_bad_input_case():
    """A new subcommand without a case here fails: the rule covers every one."""
    covered = {c.values[0][0] for c in CASES}
    assert set(SUBCOMMANDS) | {"tasks"} <= covered, sorted(set(SUBCOMMANDS) - covered)
    assert any(c.values[0][0].startswith("--") for c in CASES)  # the round loop itself


def test_a_run_held_by_another_controller_is_failed_work_exit_1(run):
    """Not bad input: the command was right, the work could not go on (another controller holds the run)."""
    with RunDir(run).lock():
        proc = _cli("--resume", "--run-dir", str(run))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[-1].startswith("error:") and "in use by controller" in lines[-1], proc.stderr[-3000:]
    assert RunDir(run).state() == {}
