"""``python -m meta_agent demo``: the gate at work on a sample archive, without training.

Builds a run folder with the math seed harness and an archive of synthetic
rollouts (real reasoning-gym questions, scored by the trusted verifier; main's
reward applied in the sandbox), lets the recipe agent propose from the real
digest, adds one reward-hacking branch (it pays for the answer format whatever
the answer), and backtests every branch: the hack is tagged and kept, a genuine
fix is merged.

The folder is a run like any other: its ``run.json`` is a full run configuration (local backend,
recipe agent, one round) and ``state.json`` records round 0 as done, so ``history``, ``show``,
``report`` and ``--resume --rounds 2`` (which trains round 1 on the merged main) all accept it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.backtest import SampleData, backtest_branch, run_harness
from meta_agent.config import BacktestSettings
from meta_agent.digest import build_digest, render_digest_markdown
from meta_agent.run_config import RunConfig, save_run_config
from meta_agent.run_dir import RunDir, RunDirError, write_json_atomic
from rl_backend.archive import Archive, validate_rows
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.docker import DockerSandbox

FORMAT_BONUS_REWARD = '''"""Pays for a well-formed final answer: an Answer: line or a boxed value."""
import re


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    text = solution_str or ""
    formatted = bool(re.search(r"^\\s*answer\\s*:", text, re.I | re.M)) or "\\\\boxed{" in text
    return {"score": 1.0 if formatted else 0.0, "format_ok": formatted}
'''


def build_sample_run(run_dir: Path, groups: int, sandbox: DockerSandbox,
                     console: Console) -> tuple[RunDir, HarnessRepo]:
    """A run folder whose archive holds one round of synthetic rollouts rewarded by main's harness."""
    rd = RunDir(run_dir.resolve())
    if rd.path.exists():  # a run's folder or any other: the demo writes a fresh run, never into one
        raise RunDirError(f"{run_dir} already exists; the demo builds a new run folder, so pick another "
                          "--run-dir or remove that one")
    try:
        rd.path.mkdir(parents=True)
    except OSError as exc:  # a parent that cannot be made
        raise RunDirError(f"cannot create --run-dir {run_dir} ({exc.strerror}); pick a new folder where you can "
                          "write") from None
    repo = HarnessRepo.create(rd.harness, "math")
    # a real run configuration: the archive stands in for round 0's training, so the run resumes at round 1
    save_run_config(rd.run_json, RunConfig.model_validate({"run_id": rd.path.name, "domain": "math", "backend": "local",
                                                           "agent": "recipe", "rounds": 1, "created": time.time()}))
    console.print(f"sample archive: {groups} groups x 4 synthetic rollouts, verified by the math verifier")
    rows = synthetic_math_rows(rd.path.name, 0, groups, 4, seed=0, harness_commit=repo.head("main"),
                               verify=MathDomain().verify)
    table = validate_rows(rows, "demo")
    run = run_harness(repo, repo.head("main"), SampleData.of(table), sandbox, rd.path / "cache", BacktestSettings(),
                      MathDomain().reward_range)
    if run.failure:
        raise RuntimeError(f"the seed harness failed in the sandbox: {run.failure}")
    for row in rows:
        result = run.results[row["traj_id"]]
        row["reward"], row["reward_info"] = result["reward"], json.dumps(result["reward_info"])
    Archive(rd.archive).append_round(rd.path.name, 0, rows)
    return rd, repo


def run_demo(run_dir: Path, groups: int = 64, console: Console | None = None) -> int:
    console = console or Console(stderr=True)
    sandbox = DockerSandbox()
    rd, repo = build_sample_run(run_dir, groups, sandbox, console)
    archive = Archive(rd.archive)
    rdir = rd.round_dir(0)
    rows = archive.rows(run_id=rd.path.name, round=0)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={"heldout_accuracy": None}, previous=[])
    write_json_atomic(rdir / "digest.json", digest)
    markdown = render_digest_markdown(digest)
    (rdir / "digest.md").write_text(markdown)
    console.print(f"digest: {rdir / 'digest.md'}")

    ctx = AgentContext(round=0, digest=digest, digest_markdown=markdown, history=[], skills=[], repo=repo,
                       worktree_root=rd.path / "worktrees", round_dir=rdir, max_candidates=2)
    proposals = RecipeAgent().propose(ctx)
    console.print(f"recipe agent proposed: {', '.join(p.branch for p in proposals) or 'nothing'}")
    wt = repo.start_intervention(0, "format-bonus", worktree_root=rd.path / "worktrees")
    (wt.path / "reward.py").write_text(FORMAT_BONUS_REWARD)
    repo.commit(wt, "Pay for any well-formed final answer", {
        "Hypothesis": "Rewarding the answer format teaches the policy to always give a final answer",
        "Predicted-Effect": ["mean_reward increase", "no_final_answer_rate decrease"], "Agent": "demo"})
    repo.remove_worktree(wt)

    # the hack first: judged against the seed main, before a genuine fix to the same file moves main
    for iv in sorted(repo.interventions(), key=lambda iv: iv.branch != wt.branch):
        outcome = backtest_branch(repo, archive, iv.branch, sandbox, rdir / "backtests",
                                  settings=BacktestSettings(sample_groups=groups), progress=lambda s: None)
        colour = "green" if outcome.decision == "merge" else "red"
        console.print(f"[bold {colour}]{outcome.decision.upper():6}[/] {iv.branch}: {outcome.report['key_figures']}")
        for reason in outcome.reasons:
            console.print(f"         {reason}")
        console.print(f"         report: {outcome.report_md}")
    write_json_atomic(rdir / "proposals.json", [p.__dict__ for p in proposals])
    main = repo.head("main")
    rd.save_state({"round": 1, "phase": "train", "status": "finished", "policy_ref": None, "last_good_commit": main,
                   "rounds": {"0": {"main_after": main, "demo": "archive of synthetic rollouts, no training"}}})
    console.print(f"review: python -m meta_agent history --run-dir {rd.path}\n"
                  f"        python -m meta_agent show iv/r0-format-bonus --run-dir {rd.path}\n"
                  f"        python -m meta_agent report --run-dir {rd.path}")
    return 0
