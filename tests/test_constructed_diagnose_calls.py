"""Main's diagnostics on constructed batches run on a real round's long replies, not only on short test rows.

A diagnose session is sized for the one call it serves (``diagnose_memory_mb`` of its views), as the diagnose phase
runs it.  The constructed checks diagnose several batches; sized once for all of them, a session refused every batch
as soon as the views' memory crossed a megabyte, which a verbose base policy's replies do in any real round, and the
diagnostics' checks said "not measured" (12k's unsolved-only-variance lost its repair that way).
"""

from __future__ import annotations

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import CRASH, run_constructed_checks
from test_a2_constructed import round_rows

RAMBLE = "Let me think about this step by step, carefully, writing out every partial sum as I go. " * 24
"""About 2,100 characters: a base policy's reply that runs to its token budget."""
QUESTIONS = [("State the final answer to the following arithmetic problem: 5 + 2 =", "7",
              [RAMBLE + "8", RAMBLE + "The sum is 8.", RAMBLE + "5 + 3 = 8", RAMBLE]),
             ("Solve the following multiplication: 3 * 4. Give only the result as your final answer.", "12",
              [RAMBLE + "13", RAMBLE + "The product is 14.", RAMBLE + "3 * 5 = 15", RAMBLE])]


@pytest.mark.docker
def test_the_diagnostics_checks_run_on_long_replies(tmp_path, docker_sandbox) -> None:
    rows = round_rows(QUESTIONS)
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    record = run_constructed_checks(repo, repo.head("main"), rows, MathDomain(), docker_sandbox, BacktestSettings())
    checks = {c["name"]: c for c in record["checks"]}
    assert "not measured" not in checks[CRASH]["detail"], checks[CRASH]
    assert checks[CRASH]["passed"], checks[CRASH]
    assert record["findings"] == [], record["findings"]  # the seed is named for nothing
