"""One demo run shared by the review tests (show, the HTML report, the review commands): built once per
session, then read.

Built through the real CLI (``python -m meta_agent demo``): a sample archive, the recipe agent's fix and
a reward hack, each backtested in Docker; the fix is merged and the hack rejected.  The modules that read it
are one xdist work unit (``tests/conftest.py``), so a session builds it once, not once per worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BUILT: dict[str, Path] = {}
_SAID: dict[str, str] = {}
DEMO_COLUMNS = 250
"""The demo's terminal width: wide enough that no verdict line wraps (``tests/test_cli_commands.py`` reads them)."""


def cli(*args: str, columns: int = 80, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m meta_agent *args`` as a user runs it, output piped (so plain), in a ``columns``-wide terminal."""
    return subprocess.run([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COLUMNS": str(columns), **(env or {})})


def demo_run(tmp_path_factory) -> Path:
    """The session's demo run folder (do not change it: copy it first)."""
    if "demo" not in _BUILT:
        run = tmp_path_factory.mktemp("review") / "demo"
        proc = cli("demo", "--run-dir", str(run), columns=DEMO_COLUMNS)
        assert proc.returncode == 0, proc.stderr[-3000:]
        _BUILT["demo"], _SAID["demo"] = run, proc.stdout + proc.stderr
    return _BUILT["demo"]


def demo_said(tmp_path_factory) -> str:
    """What the session's demo printed (stdout, then stderr) at ``DEMO_COLUMNS`` columns."""
    demo_run(tmp_path_factory)
    return _SAID["demo"]
