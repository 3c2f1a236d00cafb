"""A small run whose archive a later diagnostic re-judges, shared by the rescore tests.

Round 0 trains on the seed harness.  ``iv/r0-confident`` is merged; round 1 trains on it, and its
policy now opens every answer with ``CONFIDENT`` (the diagnostics of the time do not notice).
``iv/r1-overconfidence`` then adds a diagnostic that reports it as an error and is merged: main's
diagnostics now flag round 1's outputs, not round 0's, so ``rescore`` re-judges ``iv/r0-confident``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows

RUN_ID = "rj"
CONFIDENT = "I am certain of this."
OVERCONFIDENCE = f'''
def diagnose(rollouts):
    if not rollouts:
        return []
    hits = [r for r in rollouts if (r.get("response") or "").startswith({CONFIDENT!r})]
    rate = len(hits) / len(rollouts)
    return [{{"name": "overconfidence", "severity": "error" if rate > 0.5 else "info", "rate": rate,
             "example_ids": [r["traj_id"] for r in hits[:5]], "message": "answers that open with certainty"}}]
'''


def merge(repo: HarnessRepo, worktrees: Path, round: int, slug: str, files: dict[str, str], predicted: str) -> str:
    """Commit ``files`` on a new intervention branch and merge it into main with constructed evidence."""
    wt = repo.start_intervention(round, slug, worktree_root=worktrees)
    for rel, text in files.items():
        (wt.path / rel).parent.mkdir(parents=True, exist_ok=True)
        (wt.path / rel).write_text(text)
    repo.commit(wt, f"{slug}: constructed change", {"Hypothesis": f"{slug} helps", "Predicted-Effect": predicted})
    repo.remove_worktree(wt)
    return repo.merge(wt.branch, {"Backtest": "constructed for the test", "Verdict": "merged"},
                      summary=f"Merge {wt.branch}")


def rows(round: int, commit: str, confident: bool) -> list[dict]:
    out = synthetic_math_rows(RUN_ID, round, n_groups=6, group_size=4, seed=3, harness_commit=commit,
                              verify=MathDomain().verify)
    for row in out:
        row["reward"] = row["verified"]  # training paid what the verifier passed
        if confident:
            row["response"] = f"{CONFIDENT} {row['response']}"
    return out


def build(root: Path) -> Path:
    """The run folder (module docstring)."""
    run = root / "run"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": RUN_ID}))
    repo = HarnessRepo.create(run / "harness", "math")
    archive = Archive(run / "archive")
    archive.append_round(RUN_ID, 0, rows(0, repo.head("main"), confident=False))
    reward = repo.read_file("main", "reward.py")
    m1 = merge(repo, root / "wt", 0, "confident", {"reward.py": reward + "\n# a constructed change\n"},
               "verified_mean increase: constructed")
    archive.append_round(RUN_ID, 1, rows(1, m1, confident=True))
    for n in (0, 1):  # what the diagnostics of the time reported: no error
        (run / "rounds" / str(n)).mkdir(parents=True)
        (run / "rounds" / str(n) / "findings.json").write_text("[]")
    merge(repo, root / "wt", 1, "overconfidence", {"diagnostics/overconfidence.py": OVERCONFIDENCE},
          "finding overconfidence guard: constructed")
    return run


def copy_run(run: Path, dest: Path) -> Path:
    """A copy of the built run a test may change."""
    shutil.copytree(run, dest, symlinks=True)
    return dest


def archive_digest(run: Path) -> dict[str, str]:
    """sha256 of every file under the archive: the archive's bytes."""
    root = run / "archive"
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
