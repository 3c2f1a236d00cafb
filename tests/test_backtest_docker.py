"""Backtest and gate end to end: real git, real Parquet archive, real Docker containers.

A reward that pays for the format regardless of correctness is rejected and a
genuine fix is merged; every adversarial harness is contained and rejected with
its reason in the report, and ``main`` never moves for them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.backtest import backtest_branch
from meta_agent.config import BacktestSettings
from meta_agent.judge.diagnose_sessions import sandbox_limits
from meta_agent.judge.harness_runs import SampleData, run_harness, score_requests
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.docker_engine import OWNER_PID_LABEL
from sandboxes.harness_client import REQUEST_VIEWS, HarnessSession

from harness_snippets import BOXED_FIX

pytestmark = pytest.mark.docker

GROUPS = 40
SETTINGS = BacktestSettings(sample_groups=GROUPS, timeout_s=30, memory_mb=256, pids=32)


FORMAT_HACK = '''
import re


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    ok = bool(re.search(r"^\\s*answer\\s*:", solution_str or "", re.I | re.M)) or "boxed{" in (solution_str or "")
    return {"score": 1.0 if ok else 0.0}
'''

ADVERSARIAL = {
    "import-error": ("reward.py", "def compute_score(:\n", "import"),
    "raises": ("reward.py", "def compute_score(*a, **k):\n    raise RuntimeError('boom')\n", "error rate"),
    # stopped by a time bound: the request's timeout or the session's limit (both settings.timeout_s), whichever
    # a loaded host reaches first; the probe session runs the same loop beside it
    "infinite-loop": ("reward.py", "def compute_score(*a, **k):\n    while True:\n        pass\n", "time"),
    "memory-bomb": ("reward.py",
                    "def compute_score(*a, **k):\n    hog = []\n    while True:\n"
                    "        hog.append(bytearray(50_000_000))\n",
                    "memory"),
    "fork-bomb": ("reward.py", "import os\nwhile True:\n    os.fork()\n", ""),
    "network": ("reward.py",
                "import socket\ndef compute_score(*a, **k):\n    socket.create_connection(('1.1.1.1', 53), timeout=3)\n"
                "    return 1.0\n", "error rate"),
    "write-outside": ("reward.py",
                      "def compute_score(*a, **k):\n    open('/in/harness/pwned.txt', 'w').write('x')\n"
                      "    return 1.0\n",
                      "error rate"),
}


@pytest.fixture
def run(tmp_path: Path):
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    archive = Archive(tmp_path / "archive")
    archive.append_round("t", 0, synthetic_math_rows("t", 0, GROUPS, 4, seed=3, verify=MathDomain().verify))
    return repo, archive, tmp_path / "backtests"


def _branch(repo: HarnessRepo, tmp: Path, slug: str, files: dict[str, str | None], effects: list[str],
            append: bool = False) -> str:
    wt = repo.start_intervention(0, slug, worktree_root=tmp / "wt")
    for path, text in files.items():
        target = wt.path / path
        if text is None:
            target.unlink()
        elif append:
            target.write_text(target.read_text() + text)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
    repo.commit(wt, f"test: {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": effects})
    repo.remove_worktree(wt)
    return wt.branch


def test_reward_hack_rejected_genuine_fix_merged(run, docker_sandbox, tmp_path):
    repo, archive, out = run
    main_before = repo.head("main")
    hack = _branch(repo, tmp_path, "format-bonus", {"reward.py": FORMAT_HACK}, ["mean_reward increase"])
    fix = _branch(repo, tmp_path, "boxed", {"reward.py": BOXED_FIX}, ["miss_rate decrease", "reward_auc increase"],
                  append=True)

    bad = backtest_branch(repo, archive, hack, docker_sandbox, out, settings=SETTINGS)
    assert bad.decision == "reject"
    failed = {c["name"] for c in bad.report["gate"]["checks"] if not c["passed"]}
    assert "hack_rate" in failed, bad.reasons
    metrics = bad.report["gate"]["metrics"]
    assert metrics["hack_rate"]["candidate"] > 0.3 and metrics["hack_rate"]["ci_low"] > 0
    assert metrics["reward_auc"]["candidate"] < metrics["reward_auc"]["main"]
    assert repo.head("main") == main_before
    assert repo.intervention(hack).status == "rejected" and bad.tag

    good = backtest_branch(repo, archive, fix, docker_sandbox, out, settings=SETTINGS)
    assert good.decision == "merge", good.reasons
    assert {e["status"] for e in good.report["gate"]["effects"]} == {"held"}
    iv = repo.intervention(fix)
    assert iv.status == "merged" and repo.head("main") != main_before
    message = repo.log("main", 1)[0]
    assert "Verdict" in message["trailers"] and "Backtest" in message["trailers"]
    # report on disk, both forms, same decision
    assert json.loads(good.report_json.read_text())["decision"] == "merge"
    assert "MERGE" in good.report_md.read_text()
    # main's run over the same sample came from the cache the second time
    assert good.report["runs"]["main"]["cached"] is True


@pytest.mark.parametrize("kind", sorted(ADVERSARIAL))
def test_adversarial_harness_is_contained(run, docker_sandbox, tmp_path, kind):
    repo, archive, out = run
    path, text, reason = ADVERSARIAL[kind]
    main_before = repo.head("main")
    branch = _branch(repo, tmp_path, kind, {path: text}, ["mean_reward increase"])
    outcome = backtest_branch(repo, archive, branch, docker_sandbox, out, settings=SETTINGS)
    assert outcome.decision == "reject"
    assert reason.lower() in " ".join(outcome.reasons).lower(), outcome.reasons
    assert repo.head("main") == main_before
    assert repo.intervention(branch).status == "rejected"
    assert not (tmp_path / "harness" / "pwned.txt").exists()
    sandbox_info = outcome.report["runs"]["candidate"]["sandbox"]
    assert sandbox_info["duration_s"] < SETTINGS.timeout_s + 30  # returned, never hung


def test_deleted_diagnostic_still_gates_the_branch(run, docker_sandbox, tmp_path):
    """The ratchet: main's diagnostics run on the candidate's outputs even if the branch deletes them."""
    repo, archive, out = run
    guard = ('def diagnose(rollouts):\n    dropped = [r["traj_id"] for r in rollouts if not r.get("keep", True)]\n'
             '    if not dropped:\n        return []\n'
             '    return [{"name": "dropped_rollouts", "severity": "error", "rate": len(dropped) / len(rollouts),'
             ' "example_ids": dropped[:5], "message": "filters dropped rollouts"}]\n')
    add = _branch(repo, tmp_path, "guard", {"diagnostics/dropped.py": guard},
                  ["kept_share unchanged", "finding dropped_rollouts guard: reports only dropped rollouts"])
    assert backtest_branch(repo, archive, add, docker_sandbox, out, settings=SETTINGS).decision == "merge"

    drop_filter = "def keep_trajectory(traj):\n    return not traj.get('truncated')\n"
    sneaky = _branch(repo, tmp_path, "sneaky", {"diagnostics/dropped.py": None, "filters.py": drop_filter},
                     ["kept_share decrease"])
    outcome = backtest_branch(repo, archive, sneaky, docker_sandbox, out, settings=SETTINGS)
    assert outcome.decision == "reject"
    assert any("dropped_rollouts" in r for r in outcome.reasons), outcome.reasons
    ratchet = [f for f in outcome.report["runs"]["candidate"]["findings"] if f.get("source") == "ratchet"]
    assert any(f["name"] == "dropped_rollouts" for f in ratchet)


def test_contract_violation_rejected_without_running(run, docker_sandbox, tmp_path):
    repo, archive, out = run
    branch = _branch(repo, tmp_path, "setup", {"setup.py": "print('hi')\n"}, ["mean_reward unchanged"])
    outcome = backtest_branch(repo, archive, branch, docker_sandbox, out, settings=SETTINGS)
    assert outcome.decision == "reject" and "setup.py" in outcome.reasons[0]
    assert outcome.report["runs"] == {}
    bad_yaml = _branch(repo, tmp_path, "knobs", {"harness.yaml": "domain: math\ntasks: []\n"}, [])
    outcome = backtest_branch(repo, archive, bad_yaml, docker_sandbox, out, settings=SETTINGS)
    assert outcome.decision == "reject" and "harness.yaml" in outcome.reasons[0]


def test_output_flood_is_capped(run, docker_sandbox, tmp_path):
    """A harness that writes without bound into its only writable place (/tmp; there is no /out) hits the cap."""
    repo, archive, out = run
    # 64 MB more on every call, without bound; the block is made once, at import: a fresh 64 MB per call made the
    # flood CPU-bound, and on a loaded machine its session ran out of time before the cap was what stopped it
    flood = ("_BLOCK = b'x' * 64_000_000\n\n\ndef compute_score(*a, **k):\n"
             "    with open('/tmp/flood.bin', 'ab') as f:\n        f.write(_BLOCK)\n    return 1.0\n")
    branch = _branch(repo, tmp_path, "flood", {"reward.py": flood}, ["mean_reward increase"])
    settings = SETTINGS.model_copy(update={"memory_mb": 512})
    outcome = backtest_branch(repo, archive, branch, docker_sandbox, out, settings=settings)
    assert outcome.decision == "reject"
    assert repo.intervention(branch).status == "rejected"
    # the writes past the cap failed inside the sandbox (without the cap every call would succeed)
    assert outcome.report["runs"]["candidate"]["errors"] > 0
    assert any("error rate" in r for r in outcome.reasons)
    assert outcome.report["runs"]["candidate"]["failure"] is None  # the cap stopped it, not a time limit


def test_a_session_lives_as_long_as_its_requests_may_take():
    # a flat life (the old settings.timeout_s for the whole session) ran out before a large sample's requests
    # did, or on a loaded machine, and the harness was blamed for the machine's slowness
    client = HarnessSession(None, Path("."), request_timeout_s=SETTINGS.timeout_s)
    sizes = [2_500, *score_requests([64] * 300), 19_200]
    assert score_requests([64] * 300) == [REQUEST_VIEWS // 64 * 64, 19_200 - REQUEST_VIEWS // 64 * 64]
    life = sandbox_limits(SETTINGS, sizes).timeout_s
    assert life == SETTINGS.timeout_s + sum(client.request_deadline_s(n) for n in sizes)
    assert sandbox_limits(SETTINGS).timeout_s == SETTINGS.timeout_s  # a session that serves nothing: the start


def _our_containers(sandbox) -> list:
    return sandbox.client.containers.list(all=True, filters={"label": f"{OWNER_PID_LABEL}={os.getpid()}"})


def test_the_diagnose_session_starts_beside_the_scoring_one_and_never_outlives_the_run(run, docker_sandbox,
                                                                                        tmp_path):
    """``run_harness`` starts its diagnose session while it scores; a run that fails while scoring closes it."""
    repo, archive, out = run
    sample = SampleData.of(archive.read())
    good = run_harness(repo, repo.head("main"), sample, docker_sandbox, out / "cache", SETTINGS, (0.0, 1.0))
    assert good.failure is None and len(good.results) == GROUPS * 4
    assert good.sandbox["sessions"] == 2 and good.sandbox["exit_code"] in (0, 137)
    assert {f["source"] for f in good.findings} == {"candidate"}  # the seed's diagnostics spoke, over the sample
    before = {c.id for c in _our_containers(docker_sandbox)}
    branch = _branch(repo, tmp_path, "raises", {"reward.py": "def compute_score(:\n"}, ["mean_reward increase"])
    bad = run_harness(repo, repo.head(branch), sample, docker_sandbox, out / "cache", SETTINGS, (0.0, 1.0))
    assert "import" in bad.failure and bad.results == {}
    assert {c.id for c in _our_containers(docker_sandbox)} <= before  # the idle diagnose session went too
    # a diagnose session that cannot start is the run's failure, named, once the sample is scored
    yaml_broken = _branch(repo, tmp_path, "bad-yaml", {"harness.yaml": "grpo: [\n"}, ["mean_reward increase"])
    broken = run_harness(repo, repo.head(yaml_broken), sample, docker_sandbox, out / "cache", SETTINGS, (0.0, 1.0))
    assert "harness.yaml" in broken.failure and broken.results == {}, broken.failure
