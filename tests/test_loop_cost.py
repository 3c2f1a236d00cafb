"""The gate's cost check: the loop measures seconds per generated token from the round's archived rows.

result.json keeps no rows (the backend streams them into the archive), so the tokens are read from the
archive's ``response_tokens`` column; the seconds are the round's measured ``train_seconds``.
"""

from __future__ import annotations

from pathlib import Path

from meta_agent.budget import Budget, BudgetCaps
from meta_agent.loop import RoundLoop
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows


def _loop(path: Path, caps: BudgetCaps) -> RoundLoop:
    """A loop over a real run folder and archive; the parts the cost figures never touch are left out."""
    path.mkdir()
    run = RunDir(path)
    return RoundLoop(run=run, repo=None, archive=Archive(run.archive), backend=None, domain=None, agent=None,
                     sandbox=None, run_id="r", budget=Budget(caps))


def test_seconds_per_token_divides_train_seconds_by_the_archived_tokens(tmp_path: Path):
    loop = _loop(tmp_path / "run", BudgetCaps(run_compute_hours=2.0))
    rows = synthetic_math_rows("r", 0, n_groups=2, group_size=2, verify=lambda s, r, g: (1.0, {}))
    for i, row in enumerate(rows):
        row["response_tokens"] = 10 * (i + 1)  # 10 + 20 + 30 + 40 = 100 tokens
    loop.archive.append_round("r", 0, rows)
    write_json_atomic(loop.run.round_dir(0) / "train" / "result.json",
                      {"policy_ref": "p", "metrics": [], "eval": {}, "harness_commit": "c", "train_seconds": 50.0})
    # 2 h of compute left (nothing charged yet) = 7200 s; 50 s over 100 tokens = 0.5 s a token
    assert loop._compute_left(0) == {"seconds_left": 7200.0, "seconds_per_token": 0.5}
