"""Runs the verl tests in ``.venv-verl`` when this interpreter has no verl (CI's ``.venv``).

verl 0.9.1 pins transformers 5.10, so ``scripts/setup.sh`` installs it with the project into its own
virtual environment; the tests that need it (``test_verl_config``, ``test_verl_reward``,
``test_verl_sampler``, ``test_verl_agent_loop``, ``test_verl_metrics``, ``test_verl_submit``) skip
themselves elsewhere, and this test runs them there and reports their outcome.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"
VERL_TESTS = ["tests/test_verl_config.py", "tests/test_verl_reward.py", "tests/test_verl_sampler.py",
              "tests/test_verl_agent_loop.py", "tests/test_verl_metrics.py", "tests/test_verl_submit.py"]


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is here: its tests run directly")
def test_verl_tests_pass_in_the_verl_venv():
    if not VERL_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{VERL_PYTHON} is missing: scripts/setup.sh makes it", pytrace=False)
        pytest.skip(f"{VERL_PYTHON} is missing: run scripts/setup.sh")
    done = subprocess.run([str(VERL_PYTHON), "-m", "pytest", "-q", "-p", "no:cacheprovider", *VERL_TESTS],
                          cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
