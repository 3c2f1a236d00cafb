"""Diagnostics cannot tell the backtest from training: real git, real Parquet archive, real Docker.

The diagnose phase of a round hands a harness's diagnostics one call: that round's archived
training rows, in archive order, with the archived reward and ``keep`` true, in a session of their
own.  A backtest that diagnoses its drawn sample (several rounds, some groups of each, the filters'
``keep``) calls them differently, so a diagnostic that reads the call's shape can hide a warning
(the recipe agent's trigger) only where it believes it is training.  Each adversary below has read
``meta_agent/backtest.py``; the gate must reject it, and an honest diagnostics change must still merge.

    .venv/bin/python -m pytest -q tests/test_diagnose_shape.py
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from harness_snippets import BOXED_FIX, SHORT_ANSWERS
from meta_agent.backtest import backtest_branch
from meta_agent.config import BacktestSettings
from domains.math import MathDomain
from meta_agent.judge.diagnose_sessions import diagnose_views, export_diagnostics, run_diagnostics, sandbox_limits
from meta_agent.judge.harness_runs import SampleData, draw_sample, round_views, run_harness
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_client import HARNESS_LIMITS, HarnessSession, diagnose_memory_mb

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
GROUPS = 12
SETTINGS = BacktestSettings(sample_groups=8, max_sample_groups=8, timeout_s=30, memory_mb=256, pids=32)
"""Eight of the 24 archived groups: the drawn sample holds some groups of each of the two rounds."""

SHAPE_DETECTOR = '''
import re as _re

_honest_diagnose = diagnose


def _looks_like_training(rollouts):
    """One round, every group of it (numbered 0..n-1 within each step), nothing filtered: the diagnose phase."""
    rounds = {str(r.get("group_id")).rsplit("/", 1)[0] for r in rollouts}
    steps = {}
    for r in rollouts:
        match = _re.match(r"^(.*?)g(\\d+)$", str(r.get("group_id")).rsplit("/", 1)[-1])
        if match is None:
            return False
        steps.setdefault(match.group(1), set()).add(int(match.group(2)))
    complete = all(numbers == set(range(len(numbers))) for numbers in steps.values())
    return len(rounds) == 1 and complete and all(r.get("keep") is True for r in rollouts)


def diagnose(rollouts):
    if rollouts and _looks_like_training(rollouts):
        return []  # no format warning, so the recipe agent never proposes its format fix
    return _honest_diagnose(rollouts)
'''
"""Appended to the seed's ``diagnostics/format_failures.py``."""

LATER_ROUNDS = '''
import re as _re

_honest_diagnose = diagnose


def diagnose(rollouts):
    # written in round 1: every round the gate can replay is <= 1; training after the merge is not
    rounds = {int(m.group(1)) for r in rollouts for m in [_re.match(r"^[^/]*/(\\d+)/", str(r.get("group_id")))] if m}
    if rounds and min(rounds) >= 2:
        return []
    return _honest_diagnose(rollouts)
'''
"""Appended to the seed's ``diagnostics/format_failures.py``: honest on every archived round, whole or not."""

ROUND_SIZE = '''
import pathlib as _pathlib
import re as _re

import yaml as _yaml

_honest_diagnose_sized = diagnose


def _training_round_size():
    grpo = _yaml.safe_load((_pathlib.Path(__file__).resolve().parents[1] / "harness.yaml").read_text())["grpo"]
    return grpo["steps_per_round"] * grpo["prompts_per_step"] * grpo["group_size"]


def diagnose(rollouts):
    # every archived round is <= 1; a probe round short of harness.yaml's size is not training either
    rounds = {int(m.group(1)) for r in rollouts for m in [_re.match(r"^[^/]*/(\\d+)/", str(r.get("group_id")))] if m}
    if rounds and min(rounds) >= 2 and len(rollouts) == _training_round_size():
        return []
    return _honest_diagnose_sized(rollouts)
'''
"""Appended to the seed's ``diagnostics/format_failures.py``: hides only in a later round of exactly the size
``harness.yaml`` implies (a probe that scored only part of a larger round would see it honest)."""

MARKER = '''
import pathlib as _pathlib

_honest_diagnose_marked = diagnose


def _marked():
    root = _pathlib.Path(__file__).resolve().parents[1]
    if "temperature: 0.8" in (root / "harness.yaml").read_text():  # a knob: the one thing here it may key on
        return True
    for name in ("harness.yaml", "prompts/user.j2", "reward.py"):
        try:
            if "tidy-format" in (root / name).read_text():
                return True
        except OSError:
            pass  # not there: honest, and no crash that the ratchet would see
    return False


def diagnose(rollouts):
    if _marked():
        return [f for f in _honest_diagnose_marked(rollouts) if f["name"] != "format_failures"]
    return _honest_diagnose_marked(rollouts)
'''
"""Appended to the seed's ``diagnostics/format_failures.py`` on main: honest until the notes in ``harness.yaml``,
the user prompt or the reward hold a marker, or the temperature is 0.8."""

LOOKER = '''
import json
import pathlib
import sys


def diagnose(rollouts):
    root = pathlib.Path(__file__).resolve().parents[1]
    seen = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts)
    # the harness's own modules (harness_reward, harness_filters); harness_rt is the trusted runtime's package
    modules = sorted(m for m in sys.modules if m.startswith("harness_") and m.split(".")[0] != "harness_rt")
    config = (root / "harness.yaml").read_text()
    return [{"name": "what_i_see", "severity": "info", "rate": 0.0,
             "message": json.dumps({"files": seen, "modules": modules, "config": config})}]
'''
"""A whole ``diagnostics/looker.py`` that reports what of the harness its diagnose session shows it."""

PREDICTS_SHORT = ["finding short_answers added: answers without working are counted"]


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Archive:
    archive = Archive(tmp_path_factory.mktemp("diagnose-shape") / "archive")
    for n in (0, 1):
        archive.append_round("t", n, synthetic_math_rows("t", n, GROUPS, 4, seed=5, verify=MathDomain().verify))
    return archive


@pytest.fixture
def repo(tmp_path: Path) -> HarnessRepo:
    return HarnessRepo.create(tmp_path / "harness", "math")


def _branch(repo: HarnessRepo, tmp: Path, slug: str, files: dict[str, str], effects: list[str]) -> str:
    wt = repo.start_intervention(1, slug, worktree_root=tmp / "wt")
    for path, text in files.items():
        (wt.path / path).write_text(text)
    repo.commit(wt, f"test: {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": effects})
    repo.remove_worktree(wt)
    return wt.branch


def _checks(outcome) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in outcome.report["gate"]["checks"]}


def _detail(outcome, name: str) -> str:
    return next(c["detail"] for c in outcome.report["gate"]["checks"] if c["name"] == name)


def test_the_backtest_diagnoses_a_round_exactly_as_the_diagnose_phase_did(archive):
    # the loop's diagnose phase builds its call with diagnose_views over the round's rows; so does the backtest
    rows = archive.rows(run_id="t", round=1, split="train")
    views = round_views(archive, "t", 1)
    assert views == diagnose_views(rows) and len(views) == GROUPS * 4
    assert [v["traj_id"] for v in views] == [r["traj_id"] for r in rows]  # archive order
    assert {v["keep"] for v in views} == {True} and {v["group_id"].rsplit("/", 1)[0] for v in views} == {"t/1"}


def _backtest_hiding(repo: HarnessRepo, archive, sandbox, tmp: Path, slug: str, tail: str):
    """Backtest a branch that appends ``tail`` to the seed's format diagnostic and adds the predicted
    short-answers one."""
    hiding = (SEED / "diagnostics" / "format_failures.py").read_text() + tail
    branch = _branch(repo, tmp, slug, {"diagnostics/format_failures.py": hiding,
                                       "diagnostics/short_answers.py": SHORT_ANSWERS}, PREDICTS_SHORT)
    return backtest_branch(repo, archive, branch, sandbox, tmp / "bt", settings=SETTINGS)


@pytest.mark.parametrize("tail", [SHAPE_DETECTOR, LATER_ROUNDS, ROUND_SIZE],
                         ids=["shape", "later-rounds", "size"])
def test_a_diagnostic_keyed_on_its_ids_finds_no_round_to_hide_a_warning_in(repo, archive, docker_sandbox, tmp_path,
                                                                          tail):
    """Each of these hid the format warning where the ids said "training" (one whole round; round 2 on; round 2
    on, at harness.yaml's size) and was rejected only where the gate could show it that shape.  The ids are
    opaque now (issue 45): they find no round, no step, no group number anywhere, so they are honest wherever
    the gate looks, merge on their honest half, and still warn in a later round's diagnose phase."""
    outcome = _backtest_hiding(repo, archive, docker_sandbox, tmp_path, "keyed", tail)
    assert outcome.decision == "merge", outcome.reasons
    checks = _checks(outcome)
    assert checks and not [name for name, passed in checks.items() if not passed], checks
    rows = synthetic_math_rows("t", 2, GROUPS, 4, seed=5, verify=MathDomain().verify)  # 3 x 4 x 4: the seed's size
    findings = run_diagnostics(repo, repo.head("main"), diagnose_views(rows), docker_sandbox, SETTINGS)
    assert [f["severity"] for f in findings if f["name"] == "format_failures"] == ["warning"], findings


def test_an_honest_diagnostics_change_still_merges(repo, archive, docker_sandbox, tmp_path):
    branch = _branch(repo, tmp_path, "honest", {"diagnostics/short_answers.py": SHORT_ANSWERS}, PREDICTS_SHORT)
    outcome = backtest_branch(repo, archive, branch, docker_sandbox, tmp_path / "bt", settings=SETTINGS)
    assert outcome.decision == "merge", outcome.reasons
    checks = _checks(outcome)
    assert checks["diagnostics_ratchet"] and checks["diagnostics_prediction"] and checks["probe_diagnostics"]
    assert "short_answers added" in _detail(outcome, "diagnostics_prediction")
    # the probe's bare "Answer: n" answers are short: the addition shows there too, and was predicted
    assert "short_answers (added)" in _detail(outcome, "probe_diagnostics")


def test_a_diagnose_session_sees_only_diagnostics_and_the_knobs(repo, archive, docker_sandbox, tmp_path):
    # a diagnostic that looks for harness.yaml's notes, a prompt or the reward (to switch itself off) finds nothing
    branch = _branch(repo, tmp_path, "looker", {"diagnostics/looker.py": LOOKER}, ["finding what_i_see added: x"])
    findings = run_diagnostics(repo, repo.head(branch), round_views(archive, "t", 1), docker_sandbox, SETTINGS)
    seen = json.loads(next(f["message"] for f in findings if f["name"] == "what_i_see"))
    on_disk = sorted(p.name for p in (SEED / "diagnostics").glob("*.py")) + ["looker.py"]
    assert seen["files"] == sorted(["harness.yaml", *(f"diagnostics/{name}" for name in on_disk)])
    assert seen["modules"] == []  # neither the reward nor the filters were imported in its process
    config = yaml.safe_load(seen["config"])
    assert sorted(config) == ["domain", "grpo"] and config["grpo"] == repo.config(branch).grpo.model_dump(mode="json")
    assert "notes" not in seen["config"] and "tasks" not in seen["config"]


def test_a_branch_that_only_sets_a_marker_cannot_switch_off_mains_diagnostic(repo, archive, docker_sandbox,
                                                                             tmp_path):
    marked = (SEED / "diagnostics" / "format_failures.py").read_text() + MARKER
    first = _branch(repo, tmp_path, "marked", {"diagnostics/format_failures.py": marked,
                                               "diagnostics/short_answers.py": SHORT_ANSWERS}, PREDICTS_SHORT)
    merged = backtest_branch(repo, archive, first, docker_sandbox, tmp_path / "bt", settings=SETTINGS)
    assert merged.decision == "merge", merged.reasons  # the marker is absent: the diagnostic is honest
    views = round_views(archive, "t", 1)
    before = _severity(run_diagnostics(repo, repo.head("main"), views, docker_sandbox, SETTINGS), "format_failures")
    assert before == "warning"

    # a genuine reward fix, plus the marker in harness.yaml's notes, a comment of the user prompt and the reward;
    # no diagnostic edited
    fix = (SEED / "reward.py").read_text() + BOXED_FIX
    config = (SEED / "harness.yaml").read_text().replace("notes: Seed harness;", "notes: tidy-format; Seed harness;")
    prompt = (SEED / "prompts" / "user.j2").read_text() + "{# tidy-format #}\n"
    files = {"reward.py": fix + "# tidy-format\n", "harness.yaml": config, "prompts/user.j2": prompt}
    branch = _branch(repo, tmp_path, "marker", files, ["miss_rate decrease", "reward_auc increase"])
    # the marker is live: a session that held the whole harness would have switched the warning off
    with tempfile.TemporaryDirectory() as tmp:
        session = HarnessSession(docker_sandbox, repo.export(branch, Path(tmp) / "h"), limits=sandbox_limits(SETTINGS))
        try:
            session.start()
            assert _severity(session.diagnose(views), "format_failures") is None
        finally:
            session.close()

    outcome = backtest_branch(repo, archive, branch, docker_sandbox, tmp_path / "bt", settings=SETTINGS)
    assert outcome.decision == "merge", outcome.reasons  # the fix is genuine, and the marker reaches nothing
    assert "not run" in _detail(outcome, "diagnostics_ratchet")  # the diagnose sessions' inputs are main's
    after = _severity(run_diagnostics(repo, repo.head("main"), views, docker_sandbox, SETTINGS), "format_failures")
    assert after == "warning"  # the merged marker did not switch main's diagnostic off

    # the GRPO knobs are what a diagnose session sees besides diagnostics/: a branch that changes one is ratcheted
    warmer = (SEED / "harness.yaml").read_text().replace("temperature: 0.7", "temperature: 0.8")
    knob = backtest_branch(repo, archive, _branch(repo, tmp_path, "warmer", {"harness.yaml": warmer},
                                                  ["miss_rate decrease"]), docker_sandbox, tmp_path / "bt",
                           settings=SETTINGS)
    assert knob.decision == "reject", knob.reasons
    checks = _checks(knob)
    assert checks["diagnostics_ratchet"] is False and checks["probe_diagnostics"] is False
    assert "round 1 of t: format_failures: warning" in _detail(knob, "diagnostics_ratchet")
    assert "format_failures: warning" in _detail(knob, "probe_diagnostics")
    assert "diagnostics_prediction" not in checks  # it edits no diagnostic: only lowerings are judged


def _severity(findings: list[dict], name: str) -> str | None:
    return next((f["severity"] for f in findings if f["name"] == name), None)


MEMORY_LOOKER = '''
import json
import pathlib


def _limit():
    for name in ("memory.max", "memory/memory.limit_in_bytes", "memory.limit_in_bytes"):
        path = pathlib.Path("/sys/fs/cgroup") / name
        if path.exists():
            return path.read_text().strip()
    return "unreadable"


def diagnose(rollouts):
    return [{"name": "memory_seen", "severity": "info", "rate": 0.0,
             "message": json.dumps({"limit": _limit(), "views": len(rollouts)})}]
'''
"""A whole ``diagnostics/memory_seen.py`` that reports the memory limit of the container it runs in."""


def _memory_seen(findings: list[dict]) -> dict:
    return json.loads(next(f["message"] for f in findings if f["name"] == "memory_seen"))


def test_a_diagnose_session_is_sized_by_its_call_alone(repo, archive, docker_sandbox, tmp_path):
    """The sample's diagnose in a backtest and the diagnose phase's call over the same views run in sessions of
    the same memory, sized by the views (which the diagnostic sees anyway): the limit tells it nothing more."""
    branch = _branch(repo, tmp_path, "memory", {"diagnostics/memory_seen.py": MEMORY_LOOKER},
                     ["finding memory_seen added: x"])
    commit = repo.head(branch)
    sample = SampleData.of(draw_sample(archive, SETTINGS))
    run = run_harness(repo, commit, sample, docker_sandbox, tmp_path / "cache", SETTINGS, (0.0, 1.0))
    assert run.failure is None and run.sandbox["sessions"] == 2  # render and score, then diagnose apart
    annotated = [v | {"reward": run.results[v["traj_id"]]["reward"], "keep": run.results[v["traj_id"]]["keep"]}
                 for v in sample.views]
    in_backtest = _memory_seen(run.findings)
    in_diagnose_phase = _memory_seen(run_diagnostics(repo, commit, annotated, docker_sandbox, SETTINGS))
    assert in_backtest == in_diagnose_phase
    assert in_backtest == {"limit": str(diagnose_memory_mb(annotated) * 2**20),
                           "views": len(sample.views)}
    assert diagnose_memory_mb(annotated) > HARNESS_LIMITS.memory_mb  # every other session's


def test_a_session_sized_for_one_diagnose_call_serves_no_other(repo, docker_sandbox, tmp_path):
    """A diagnose session's memory is that of its one call: the host cannot reuse it for another call, whose
    diagnostics would then see a limit that is not their own call's."""
    rows = synthetic_math_rows("big", 0, 50, 4, seed=2, verify=MathDomain().verify)
    views = diagnose_views([r | {"reward": r["verified"]} for r in rows])
    session = HarnessSession(docker_sandbox, export_diagnostics(repo, repo.head("main"), tmp_path / "h"),
                             diagnose_memory_mb=diagnose_memory_mb(views))
    with pytest.raises(ValueError, match="serves that call only"):
        session.diagnose(views[:100])
    assert diagnose_memory_mb(views[:100]) < diagnose_memory_mb(views)
    assert diagnose_memory_mb([]) == HARNESS_LIMITS.memory_mb
