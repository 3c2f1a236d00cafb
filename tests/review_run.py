"""One demo run shared by the review tests (show, the HTML report): built once per session, then read.

Built through the real CLI (``python -m meta_agent demo``): a sample archive, the recipe agent's fix and
a reward hack, each backtested in Docker; the fix is merged and the hack rejected.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_BUILT: dict[str, Path] = {}


def cli(*args: str, columns: int = 80, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m meta_agent *args`` as a user runs it, output piped (so plain), in a ``columns``-wide terminal."""
    return subprocess.run([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env={**os.environ, "COLUMNS": str(columns), **(env or {})})


def demo_run(tmp_path_factory) -> Path:
    """The session's demo run folder (do not change it: copy it first)."""
    if "demo" not in _BUILT:
        run = tmp_path_factory.mktemp("review") / "demo"
        proc = cli("demo", "--run-dir", str(run))
        assert proc.returncode == 0, proc.stderr[-3000:]
        _BUILT["demo"] = run
    return _BUILT["demo"]
