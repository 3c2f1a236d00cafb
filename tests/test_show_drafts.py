"""A stopped candidate's work, parked under ``refs/agent-drafts/`` by resume (``park_unfinished``), is listed by
``history`` and opened by ``show`` (issue 48: ``show`` said it did not exist and ``history`` did not name it)."""

from __future__ import annotations

import time
from pathlib import Path

from harness_repo.repo import HarnessRepo
from meta_agent.run.unfinished import park_unfinished
from meta_agent.run_config import RunConfig, save_run_config
from meta_agent.run_dir import RunDir
from review_run import cli


def test_a_parked_draft_is_listed_by_history_and_opened_by_show(tmp_path: Path) -> None:
    rd = RunDir(tmp_path / "m1")
    rd.path.mkdir()
    repo = HarnessRepo.create(rd.harness, "math")
    save_run_config(rd.run_json, RunConfig.model_validate({"run_id": "m1", "domain": "math", "backend": "local",
                                                           "agent": "llm", "rounds": 2, "created": time.time()}))
    rd.round_dir(1).mkdir(parents=True)
    wt = repo.start_intervention(1, "loosen", worktree_root=tmp_path / "wt")
    (wt.path / "filters.py").write_text("def keep_trajectory(traj):\n    return True\n")  # left uncommitted
    assert park_unfinished(repo, 1) == ["iv/r1-loosen"]  # what a resume does with a killed agent's branch
    history = cli("history", "--run-dir", str(rd.path), columns=250)
    assert history.returncode == 0, history.stderr
    said = " ".join(history.stdout.split())
    assert "parked draft refs/agent-drafts/iv/r1-loosen (" in said and "WIP: stopped candidate" in said
    assert f"open it with: python -m meta_agent show refs/agent-drafts/iv/r1-loosen --run-dir {rd.path}" in said
    for name in ("refs/agent-drafts/iv/r1-loosen", "iv/r1-loosen", "r1-loosen"):
        show = cli("show", name, "--run-dir", str(rd.path), columns=100)
        assert show.returncode == 0, show.stderr
        assert show.stdout.startswith("refs/agent-drafts/iv/r1-loosen  parked draft")
        assert "never backtested or judged" in " ".join(show.stdout.split())
        assert "+def keep_trajectory(traj):" in show.stdout and "WIP: stopped candidate" in show.stdout
    missing = cli("show", "iv/r1-other", "--run-dir", str(rd.path))
    assert missing.returncode == 2 and "is no intervention branch" in missing.stderr
