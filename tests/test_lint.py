"""The linter is part of the test command: ruff (pinned in the dev extra, configured in pyproject.toml's
``[tool.ruff]``) over every Python file of the repository that git does not ignore -- the packages,
``bench/``, ``scripts/`` and ``tests/``.  A failure names each violation as ``path:line:col: code message``.

    .venv/bin/ruff check .           # what this test runs
    .venv/bin/ruff check --fix .     # the violations ruff can fix itself (unused imports, f-strings)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_no_violation():
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--no-cache", "."],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "error:" not in proc.stderr.lower(), proc.stderr  # a broken config is not a clean tree
    assert proc.returncode == 0, "ruff check . found:\n" + proc.stdout


def test_ruff_lints_every_tracked_python_file():
    """The lint covers the packages, bench/, scripts/ and tests/, and nothing git ignores (.venv, runs/)."""
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--show-files", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    linted = {Path(line).resolve().relative_to(ROOT).parts[0] for line in proc.stdout.splitlines() if line}
    for folder in ("meta_agent", "harness_repo", "rl_backend", "sandboxes", "swe_env", "bench", "scripts", "tests"):
        assert folder in linted, f"ruff does not lint {folder}/: {sorted(linted)}"
    assert not linted & {".venv", ".venv-verl", "runs", "build"}, sorted(linted)
