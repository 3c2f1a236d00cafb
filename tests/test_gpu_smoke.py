"""``scripts/gpu_smoke.py`` runs its whole path on a CPU at tiny sizes, so the script a lent GPU runs is tested."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_gpu_smoke_runs_on_cpu_and_reports_what_it_measured():
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_smoke.py"), "--device", "cpu", "--tiny"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("json: "))[6:])
    step = report["step"]
    assert report["failures"] == [] and report["device"] == "cpu"
    # 3 prompts x 4: every third dropped, the last group cut to one kept member, which then trains nothing
    assert (step["trajectories"], step["kept"], step["trained"]) == (12, 7, 6)
    assert step["params_changed"] and step["generated_tokens"] > 0 and step["train_tokens"] > step["generated_tokens"]
    assert report["exam"]["tasks"] == 4 and report["exam"]["budget"] == 16 and report["exam"]["tokens"] > 0
    assert "rl_backend.local.heldout_eval" in report["exam"]["which"]  # this venv has the local extras
    assert "tokens/s" in done.stdout and "advantage rule: held" in done.stdout


def test_gpu_smoke_refuses_cuda_without_a_gpu():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the script would run on it")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_smoke.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "--device cpu --tiny" in done.stderr
