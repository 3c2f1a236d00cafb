"""Runs the verl tests in ``.venv-verl`` when this interpreter has no verl (CI's ``.venv``).

verl 0.9.1 pins transformers 5.10, so ``scripts/setup.sh`` installs it with the project into its own
virtual environment; the tests that need it (``VERL_TESTS``) skip themselves elsewhere, and this test
runs them there and reports their outcome: the inner pass and skip counts are printed and recorded
(``record_property``), and an inner skip fails this test -- in the verl venv every precondition (verl,
Docker, the sandbox image) is there, so a skip means a test silently stopped testing.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"
VERL_TESTS = ["tests/test_verl_config.py", "tests/test_verl_reward.py", "tests/test_verl_sampler.py",
              "tests/test_verl_agent_loop.py", "tests/test_verl_metrics.py", "tests/test_verl_submit.py",
              "tests/test_verl_advantage_parity.py", "tests/test_verl_failure_attribution.py",
              "tests/test_verl_dry_run.py", "tests/test_verl_handoff.py", "tests/test_code_verl_dry_run.py",
              "tests/test_verl_optim_carry.py", "tests/test_verl_metering.py"]
INNER_TIMEOUT_S = 1500
"""The inner run's limit; this test's own pytest-timeout mark is above it, so this one is the limit that applies."""


def inner_counts(output: str) -> dict[str, int]:
    """pytest's final summary line (``3 passed, 1 skipped, 2 warnings in 9.1s``) as counts; {} without one."""
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed|error|errors|skipped)\b", line)
             and re.search(r" in [\d.]+s", line)]
    if not lines:
        return {}
    return {word: int(n) for n, word in re.findall(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)", lines[-1])}


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.timeout(INNER_TIMEOUT_S + 120)
@pytest.mark.skipif(importlib.util.find_spec("verl") is not None, reason="verl is here: its tests run directly")
def test_verl_tests_pass_in_the_verl_venv(record_property):
    if not VERL_PYTHON.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{VERL_PYTHON} is missing: scripts/setup.sh makes it", pytrace=False)
        pytest.skip(f"{VERL_PYTHON} is missing: run scripts/setup.sh")
    done = subprocess.run([str(VERL_PYTHON), "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider",
                           "-o", f"timeout={INNER_TIMEOUT_S}", *VERL_TESTS],
                          cwd=REPO, capture_output=True, text=True, timeout=INNER_TIMEOUT_S)
    counts = inner_counts(done.stdout)
    for name, n in counts.items():
        record_property(f"inner_{name}", n)
    print(f"verl venv: {counts}")
    # the inner run's own failure lines first: its durations table (PYTEST_ADDOPTS reaches it) can push the
    # failure out of the tail
    failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED ", "ERROR "))]
    tail = "\n".join(failed) + "\n...\n" + done.stdout[-6000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert counts.get("passed", 0) > 0, f"no inner test passed: {counts}\n{tail}"
    skipped = [line for line in done.stdout.splitlines() if line.startswith("SKIPPED")]
    assert not counts.get("skipped") and not skipped, "inner tests skipped in the verl venv:\n" + "\n".join(skipped)


def test_inner_counts_read_pytests_summary():
    assert inner_counts("..s.\n===== 3 passed, 1 skipped, 6 warnings in 9.10s =====") == {"passed": 3, "skipped": 1}
    assert inner_counts("F\n1 failed, 2 passed, 1 error in 0.5s") == {"failed": 1, "passed": 2, "error": 1}
    assert inner_counts("collected nothing\nno tests ran in 0.01s") == {}
    assert inner_counts("Traceback ...") == {}


def test_every_test_module_that_needs_verl_is_run_in_the_verl_venv():
    """A module that skips itself without verl and is missing from ``VERL_TESTS`` would never run anywhere
    (``tests/test_code_verl_dry_run.py`` was such a module until this test)."""
    needing = sorted(f"tests/{p.name}" for p in (REPO / "tests").glob("test_*.py")
                     if re.search(r"importorskip\(\s*[\"']verl[\"']", p.read_text()))
    assert len(needing) >= 12 and sorted(VERL_TESTS) == needing
