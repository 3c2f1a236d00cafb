"""bench/compare_arms.py end to end on a tiny configuration: two arms, one seed, one round, real training."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--seeds", "1", "--rounds", "1", "--heldout-size", "4", "--candidates", "1",
        "--knob", "steps_per_round=1", "--knob", "group_size=2", "--knob", "prompts_per_step=2",
        "--knob", "max_completion_length=12"]


def _compare(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "bench/compare_arms.py", "--out", str(out), *TINY, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800,
                          env=os.environ | {"COLUMNS": "1000", "PYTHONPATH": str(ROOT)})  # a script in bench/


def _row(stdout: str, arm: str) -> list[str]:
    [line] = [line for line in stdout.splitlines() if line.startswith(f"| {arm} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_two_arms_one_seed_one_round_then_nothing_is_redone(tmp_path: Path, docker_sandbox) -> None:
    out = tmp_path / "compare"
    first = _compare(out, "--arms", "recipe", "fixed")
    assert first.returncode == 0, first.stderr[-3000:]
    header = [c.strip() for c in next(line for line in first.stdout.splitlines()
                                      if line.startswith("| arm |")).strip("|").split("|")]
    assert header[:4] == ["arm", "runs finished", "base", "round 0"]
    fixed, recipe = _row(first.stdout, "fixed"), _row(first.stdout, "recipe")
    assert fixed[1] == recipe[1] == "1/1"
    # the same untrained policy sits the same 4 exam tasks greedily in both arms: the same base figure
    assert fixed[2] == recipe[2] and fixed[2].endswith("]")
    assert fixed[4] == "-" and recipe[4].startswith(("+", "-")) and "[" in recipe[4]  # recipe minus fixed
    assert fixed[5] == "0 / 0"  # the fixed arm proposes nothing, so nothing is merged or rejected
    assert "train" in fixed[6]
    assert fixed[7:] == ["0", "0.0000"]  # no LLM arm, no tokens
    result = out / "fixed" / "seed0" / "rounds" / "0" / "train" / "result.json"
    trained_at = result.stat().st_mtime_ns

    again = _compare(out, "--arms", "fixed", "recipe")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "fixed seed 0: finished" in again.stdout
    assert result.stat().st_mtime_ns == trained_at  # read back, not trained again
    assert _row(again.stdout, "fixed")[:6] == fixed[:6] and _row(again.stdout, "recipe")[:6] == recipe[:6]


def test_llm_arm_without_a_model_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "bench/compare_arms.py", "--out", str(tmp_path), "--arms", "fixed", "llm"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "the llm arm needs --model" in proc.stderr
