"""``rescore`` and ``backtest --groups all`` sharded over a local Ray of 2 workers (one Ray start for both): the same
results as one process, and a worker killed mid-shard retried once, then the command failing with the shard named
and nothing written."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import json

from pydantic import ValidationError

from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.cli import main as cli
from meta_agent.config import BacktestSettings
from domains.math import MathDomain
from meta_agent.judge.harness_runs import run_harness
from meta_agent.judge.rescore import rescore_run
from meta_agent.judge.sharded_backtest import ShardedRunner, batch_parts, sample_all
from meta_agent.judge.shards import ShardFailed
from meta_agent.loop import Events, RoundLoop
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from tests.rescore_run import CONFIDENT, RUN_ID, archive_digest, build, copy_run

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("rescore-ray"))


def _outputs(summary: dict) -> tuple[dict, dict]:
    out = Path(summary["out"])
    tables = {p.relative_to(out).as_posix(): pq.read_table(p).to_pylist() for p in sorted(out.rglob("*.parquet"))}
    kept = {k: summary[k] for k in ("merges", "rounds", "rows", "parts", "failures", "bad_parts")}
    kept["shards"] = [{k: v for k, v in s.items() if k != "resources"} for s in summary["shards"]]  # measurements
    return tables, kept


def test_sharded_and_unsharded_give_identical_results(built, tmp_path, local_ray, docker_sandbox):
    here = copy_run(built, tmp_path / "here")
    sharded = copy_run(built, tmp_path / "sharded")
    one = _outputs(rescore_run(RunDir(here), workers=1))
    shown: list[str] = []
    two = _outputs(rescore_run(RunDir(sharded), workers=2, progress=shown.append))
    assert len(one[0]) == 2 and sum(len(rows) for rows in one[0].values()) == 48
    assert two == one
    assert one[1]["merges"][0]["status"] == "rejudged"
    assert [line.startswith("shard ") for line in shown] == [True, True], shown


def test_a_worker_killed_mid_shard_is_retried_once_then_the_shard_is_named(built, tmp_path, local_ray,
                                                                           docker_sandbox, monkeypatch):
    run = copy_run(built, tmp_path / "run")
    before = archive_digest(run)
    monkeypatch.setenv("META_AGENT_FAILPOINTS", "rescore.part_scored")  # every worker dies after scoring its part
    shown: list[str] = []
    with pytest.raises(ShardFailed) as failed:
        rescore_run(RunDir(run), workers=2, progress=shown.append)
    message = str(failed.value)
    assert "shard run_id=rj/round=" in message and "its worker died 2 times" in message
    named = message.split("shard ", 1)[1].split(":", 1)[0]
    assert [line for line in shown if named in line and "(again)" in line]  # the retry ran, on the same shard
    assert sorted(p.name for p in (run / "rescore").iterdir()) == ["cache"]  # no result, no staging folder
    assert archive_digest(run) == before


# -- backtest --groups all: each arm's scoring sharded by part file (meta_agent.judge.sharded_backtest)

SETTINGS = BacktestSettings()
RANGE = (0.0, 1.0)
DIES_ON_CONFIDENT = f"""
import os

def compute_score(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str.startswith({CONFIDENT!r}):
        os._exit(3)  # only round 1's rows open with it: only that part's shard dies
    return 1.0
"""


def _arm(run) -> tuple:
    return run.results, run.findings, run.prompts, run.failure


def test_a_sharded_backtest_arm_gives_the_unsharded_results(built, tmp_path, local_ray, docker_sandbox):
    repo, archive = HarnessRepo.open(built / "harness"), Archive(built / "archive")
    sample = sample_all(archive, SETTINGS)
    assert len(sample.rows) == 48 and len(set(batch_parts(archive, sample))) == 2  # rounds 0 and 1: two parts
    shown: list[str] = []
    sharded = ShardedRunner(archive, workers=2, progress=shown.append)
    main = repo.head("main")
    first_merge = repo.intervention("iv/r0-confident").merge_commit  # the harness before the new diagnostic
    unsharded = {}
    for commit in (main, first_merge):
        one = unsharded[commit] = run_harness(repo, commit, sample, docker_sandbox, tmp_path / "one", SETTINGS, RANGE)
        two = sharded(repo, commit, sample, docker_sandbox, tmp_path / "two", SETTINGS, RANGE)
        assert _arm(two) == _arm(one)
        assert one.failure is None and len(one.results) == 48 and len(one.prompts) == len(sample.render_items) > 0
        assert two.sandbox["sessions"] == 4  # two shards' sessions, the one that rendered, the one that diagnosed
        assert one.sandbox["sessions"] == 2  # one that rendered and scored, one that diagnosed
    rates = {f["name"]: f["rate"] for f in unsharded[main].findings}
    assert rates["overconfidence"] == 0.5  # main's new diagnostic saw both parts' rows in one call (round 1's: half)
    assert [line.split(":")[0] for line in shown] == [f"{c[:8]} shard {i}/2" for c in (main, first_merge)
                                                      for i in (1, 2)]
    cached = run_harness(repo, main, sample, docker_sandbox, tmp_path / "two", SETTINGS, RANGE)
    # one cache key for both: a sharded run is the same run
    assert cached.cached and _arm(cached) == _arm(unsharded[main])


def test_a_harness_failing_in_one_shard_fails_its_arm_naming_the_part(built, tmp_path, local_ray, docker_sandbox):
    run = copy_run(built, tmp_path / "run")
    repo, archive = HarnessRepo.open(run / "harness"), Archive(run / "archive")
    commit = repo.commit_files({"reward.py": DIES_ON_CONFIDENT}, "a reward that dies on round 1's rows")
    sample = sample_all(archive, SETTINGS)
    runner = ShardedRunner(archive, workers=2)
    failed = runner(repo, commit, sample, docker_sandbox, tmp_path / "c", SETTINGS, RANGE)
    assert failed.failure.startswith("on part run_id=rj/round=1/part-") and failed.results == {}
    assert not list((tmp_path / "c").glob("*.json"))  # a failure is never cached


def test_a_harness_failing_to_render_and_to_diagnose_is_named_alike_sharded_or_not(built, tmp_path, local_ray,
                                                                                    docker_sandbox):
    """Both whole-sample calls fail: the render's process is killed at its memory limit, the diagnose's exits.
    Sharded or not, the arm's failure is the same one, the diagnose's, and nothing is cached."""
    run = copy_run(built, tmp_path / "run")
    repo, archive = HarnessRepo.open(run / "harness"), Archive(run / "archive")
    commit = repo.commit_files({"prompts/user.j2": '{{ "x" * 2000000000 }}',
                                "diagnostics/exits.py": "import os\n\ndef diagnose(rollouts):\n    os._exit(3)\n"},
                               "a template past the memory limit and a diagnostic that exits")
    sample = sample_all(archive, SETTINGS)
    one = run_harness(repo, commit, sample, docker_sandbox, tmp_path / "one", SETTINGS, RANGE)
    two = ShardedRunner(archive, workers=2)(repo, commit, sample, docker_sandbox, tmp_path / "two", SETTINGS, RANGE)
    assert one.failure == "the harness's diagnose process died"
    assert _arm(two) == _arm(one) == ({}, [], [], one.failure)
    assert two.sandbox["sessions"] == 4  # both shards, the render's and the diagnose's: the render ran and failed
    assert not list((tmp_path / "one").glob("*.json")) and not list((tmp_path / "two").glob("*.json"))
    fine = repo.commit_files({"diagnostics/exits.py": "def diagnose(rollouts):\n    return []\n"},
                             "the diagnostic mended, the template not")
    render_only = ShardedRunner(archive, workers=2)(repo, fine, sample, docker_sandbox, tmp_path / "two", SETTINGS,
                                                    RANGE)
    assert render_only.failure == "the harness's render process died (killed: memory limit exceeded)"
    assert render_only.results == {} and render_only.prompts == []


def test_a_backtest_worker_killed_mid_shard_is_retried_once_then_named(built, tmp_path, local_ray, docker_sandbox,
                                                                       monkeypatch):
    repo, archive = HarnessRepo.open(built / "harness"), Archive(built / "archive")
    sample = sample_all(archive, SETTINGS)
    monkeypatch.setenv("META_AGENT_FAILPOINTS", "backtest.shard_scored")  # every worker dies after scoring
    shown: list[str] = []
    with pytest.raises(ShardFailed) as failed:
        ShardedRunner(archive, workers=2, progress=shown.append)(repo, repo.head("main"), sample, docker_sandbox,
                                                                 tmp_path / "cache", SETTINGS, RANGE)
    named = str(failed.value).split("shard ", 1)[1].split(":", 1)[0]
    assert named.startswith("run_id=rj/round=") and "its worker died 2 times" in str(failed.value)
    assert [line for line in shown if named in line and "(again)" in line]
    assert not (tmp_path / "cache").exists()


def test_backtest_groups_all_over_two_workers_from_the_command_line(built, tmp_path, local_ray, docker_sandbox,
                                                                    capfd):
    run = copy_run(built, tmp_path / "run")
    repo = HarnessRepo.open(run / "harness")
    wt = repo.start_intervention(2, "comment", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text((wt.path / "reward.py").read_text() + "\n# a constructed change\n")
    repo.commit(wt, "comment: constructed", {"Hypothesis": "none", "Predicted-Effect": "reward_auc increase: none"})
    repo.remove_worktree(wt)
    assert cli(["backtest", wt.branch, "--run-dir", str(run), "--groups", "all", "--workers", "2", "--dry-run"]) == 0
    report = json.loads((run / "backtests" / wt.branch.replace("/", "_") / "report.json").read_text())
    assert (report["sample"]["trajectories"], report["sample"]["groups"]) == (48, 12)  # every group of both rounds
    shown = capfd.readouterr().err
    assert shown.count(" shard 1/2: ") == shown.count(" shard 2/2: ") == 2, shown  # main's arm, the candidate's


def test_backtest_sharding_options_refused_with_what_to_do(built, capfd):
    run = ["backtest", "iv/r0-confident", "--run-dir", str(built)]
    for groups, message in (("1", "a sample needs at least 2 groups, got 1"),
                            ("most", "'most' is neither a number of groups nor 'all'")):
        with pytest.raises(SystemExit) as refused:  # argparse's usage error
            cli([*run, "--groups", groups])
        assert refused.value.code == 2 and message in capfd.readouterr().err
    assert cli([*run, "--groups", "64", "--workers", "2"]) == 2
    assert "shard a backtest of every group: add --groups all" in capfd.readouterr().err


def test_the_loop_backtests_every_group_over_two_workers(built, tmp_path, local_ray, docker_sandbox):
    """``--sample-groups all --backtest-workers 2``: the loop's backtest phase draws every group the archive holds
    at that moment and shards each arm over the local Ray, as ``backtest --groups all --workers 2`` does."""
    run = copy_run(built, tmp_path / "run")
    rd, repo = RunDir(run), HarnessRepo.open(run / "harness")
    wt = repo.start_intervention(1, "comment", worktree_root=tmp_path / "wt")
    (wt.path / "reward.py").write_text((wt.path / "reward.py").read_text() + "\n# a constructed change\n")
    repo.commit(wt, "comment: constructed", {"Hypothesis": "none", "Predicted-Effect": "reward_auc increase: none"})
    repo.remove_worktree(wt)
    write_json_atomic(rd.round_dir(1) / "train" / "result.json", {"policy_ref": "p", "metrics": [], "eval": {},
                      "harness_commit": repo.head("main"), "train_seconds": 1.0})
    rd.save_state({"round": 1, "phase": "backtest", "policy_ref": "p", "last_good_commit": repo.head("main"),
                   "rounds": {"1": {}}})
    said: list[str] = []
    loop = RoundLoop(run=rd, repo=repo, archive=Archive(rd.archive), backend=None, domain=MathDomain(),
                     agent=RecipeAgent(), sandbox=docker_sandbox, run_id=RUN_ID, candidates=0,
                     settings=BacktestSettings(sample_groups=4, max_sample_groups=4, all_groups=True, workers=2),
                     events=Events(message=said.append))
    loop.run_round(loop.state())
    report = json.loads((rd.round_dir(1) / "backtests" / wt.branch.replace("/", "_") / "report.json").read_text())
    assert (report["sample"]["trajectories"], report["sample"]["groups"]) == (48, 12)  # every group of both rounds
    shards = [line for line in said if " shard " in line]
    assert sum(" shard 1/2: " in line for line in shards) == sum(" shard 2/2: " in line for line in shards) == 2
    assert rd.state()["rounds"]["1"]["interventions"][0]["branch"] == wt.branch


def test_a_run_refuses_backtest_workers_without_every_group():
    with pytest.raises(ValidationError, match="shard a backtest of every group: set all_groups"):
        BacktestSettings(workers=2)
    with pytest.raises(ValidationError, match="shard a backtest of every group"):
        BacktestSettings(ray_address="auto")
