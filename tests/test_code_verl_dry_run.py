"""``--backend verl --dry-run --domain code`` through the real CLI: the code seed's plan passes verl 0.9.1's
validators and ours, with the code domain's verifier and sampler wired in.  Needs ``.venv-verl``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from rl_backend.model import ensure_base_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def test_a_code_dry_run_validates_the_code_plan_and_creates_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "meta_agent", "--domain", "code", "--backend", "verl", "--dry-run",
                           "--run-dir", str(run), "--model-path", str(ensure_base_model())], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "validation: VALID" in done.stdout
    # the reward function and the sampler grade with the code domain, not the default math one
    assert done.stdout.count("domain_ref='\"'\"'domains.code:CodeDomain'\"'\"'") == 2, done.stdout[-3000:]
    assert "domains.math" not in done.stdout
    assert not run.exists()  # a dry run creates nothing
