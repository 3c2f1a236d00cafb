"""``--dry-run --backend verl`` as a gate, through the real CLI: exit 0 only when verl's validators, ours and the
preflight checks all pass; it prints the plan's size.  Needs verl 0.9.1 (``.venv-verl``)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from rl_backend.model import ensure_base_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def dry_run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", "--backend", "verl", "--dry-run",
                           "--run-dir", str(tmp_path / "run"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_dry_run_exits_0_on_valid_and_1_on_invalid(tmp_path):
    model = ensure_base_model()
    ok = dry_run(tmp_path, "--model-path", str(model))
    assert ok.returncode == 0, ok.stdout[-3000:] + ok.stderr[-3000:]
    assert "validation: VALID" in ok.stdout and "trajectories per step" in ok.stdout and "per round" in ok.stdout
    assert "modes:" not in ok.stdout  # math trains and sits the exam in one mode

    broken = tmp_path / "broken-model"
    shutil.copytree(model, broken, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    (broken / "config.json").write_text(json.dumps({}))
    bad = dry_run(tmp_path, "--model-path", str(broken))
    assert bad.returncode == 1 and "validation: INVALID" in bad.stdout, bad.stdout[-3000:]
    assert "config.json names no architectures" in bad.stdout

    assert not (tmp_path / "run").exists()  # a dry run creates nothing


def test_an_swe_dry_run_says_the_exam_is_in_another_mode_than_training(tmp_path):
    """SWE on verl trains agent-mode episodes; the exam is the domain's patch-mode prompt: the plan says so."""
    done = dry_run(tmp_path, "--domain", "swe", "--model-path", str(ensure_base_model()))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "modes: training rolls out agent-mode episodes" in done.stdout and "patch mode" in done.stdout
    assert "actor_rollout_ref.rollout.agent.default_agent_loop=swe_agent" in done.stdout
