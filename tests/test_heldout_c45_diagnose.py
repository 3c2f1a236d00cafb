"""Held-out set of issue 45's diagnose throughput work, written after it froze (36763f4), against a real Docker engine.

That work runs each diagnostic in a child forked from the diagnose request's process (the views loaded once) and
sends a call's views in chunks of ``DIAGNOSE_CHUNK``, which ``run_harness`` sends while it scores.  Attacks on what
that made different:

- a diagnostic that compares, object for object, what a backtest's streamed call and the diagnose phase's whole
  call show it (which values are one object, which views share a group) must see the same;
- a group cut by a chunk boundary must keep one opaque id;
- views far larger than a pipe's buffer must reach the diagnostics whole (the reader and the request process
  forward chunks in parts);
- a diagnostic that kills the request's process must fail the call as the harness dying;
- a process a diagnostic leaves behind must be gone before the session's next call.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_heldout_c45_diagnose.py
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.judge.diagnose_sessions import run_diagnostics
from meta_agent.judge.harness_runs import SampleData, draw_sample, run_harness
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
SETTINGS = BacktestSettings(sample_groups=8, max_sample_groups=8, timeout_s=30, memory_mb=256, pids=32)

SHARING = '''
import hashlib, json

def _pattern(values):
    first = {}
    return [first.setdefault(id(v), i) for i, v in enumerate(values)]

def diagnose(views):
    keys = sorted(views[0]) if views else []
    extra = sorted(views[0]["extra_info"]) if views else []
    shape = {k: _pattern([v[k] for v in views]) for k in keys if k not in ("reward", "keep")}
    shape.update({"extra." + k: _pattern([v["extra_info"][k] for v in views]) for k in extra})
    groups = {}
    shape["groups"] = [groups.setdefault(v["group_id"], i) for i, v in enumerate(views)]
    bare = [[v["response"], v["reward"], v["keep"], v["task_id"]] for v in views]
    text = json.dumps([shape, bare], sort_keys=True)
    return [{"name": "sharing", "rate": 0.0, "message": hashlib.sha256(text.encode()).hexdigest()}]
'''
"""Which of a call's values are one object (per key, top level and ``extra_info``), which views share a group,
and what each view's response, reward and task are: one digest."""


def _harness(root: Path, files: dict[str, str], keep_seed_diagnostics: bool = True) -> Path:
    for path in SEED.rglob("*"):
        if path.is_file() and (keep_seed_diagnostics or path.parent.name != "diagnostics"):
            target = root / path.relative_to(SEED)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def views() -> list[dict]:
    rows = synthetic_math_rows("d", 0, 6, 4, seed=7, verify=MathDomain().verify)
    return [trajectory_view(r) | {"reward": float(i % 2), "keep": i % 3 != 0} for i, r in enumerate(rows)]


def test_a_backtests_streamed_diagnose_shows_what_the_diagnose_phases_call_shows(docker_sandbox, tmp_path,
                                                                                  monkeypatch):
    import sandboxes.harness_client as client
    import sandboxes.harness_wire_stream as stream

    archive = Archive(tmp_path / "archive")
    for n in (0, 1):
        archive.append_round("t", n, synthetic_math_rows("t", n, 6, 4, seed=3, verify=MathDomain().verify))
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    wt = repo.start_intervention(1, "sharing", worktree_root=tmp_path / "wt")
    (wt.path / "diagnostics" / "sharing.py").write_text(SHARING)
    repo.commit(wt, "test: sharing", {"Hypothesis": "sharing helps", "Predicted-Effect": ["finding sharing added: x"]})
    repo.remove_worktree(wt)
    commit = repo.head(wt.branch)
    monkeypatch.setattr(stream, "DIAGNOSE_CHUNK", 7)  # 32 views: chunks of 7, 7, 7, 7 and 4, cutting groups
    monkeypatch.setattr(client, "REQUEST_VIEWS", 8)  # scored in several requests, streamed prefix by prefix
    sample = SampleData.of(draw_sample(archive, SETTINGS))
    run = run_harness(repo, commit, sample, docker_sandbox, tmp_path / "cache", SETTINGS, (0.0, 1.0))
    assert run.failure is None
    annotated = [v | {"reward": run.results[v["traj_id"]]["reward"], "keep": run.results[v["traj_id"]]["keep"]}
                 for v in sample.views]
    phase = run_diagnostics(repo, commit, annotated, docker_sandbox, SETTINGS)
    streamed = [f["message"] for f in run.findings if f["name"] == "sharing"]
    assert len(sample.views) == 32 and len(streamed) == 1 and len(streamed[0]) == 64
    assert streamed == [f["message"] for f in phase if f["name"] == "sharing"]


GROUP_COUNTER = '''
def diagnose(views):
    sizes = {}
    for v in views:
        sizes[v["group_id"]] = sizes.get(v["group_id"], 0) + 1
        assert v["extra_info"]["group_id"] == v["group_id"]
    return [{"name": "groups", "rate": 0.0, "message": str(sorted(sizes.values()))}]
'''


def test_a_group_cut_by_a_chunk_boundary_keeps_one_opaque_id(docker_sandbox, tmp_path, views, monkeypatch):
    import sandboxes.harness_wire_stream as stream

    monkeypatch.setattr(stream, "DIAGNOSE_CHUNK", 5)  # 24 views in groups of 4: every chunk boundary cuts one
    harness = _harness(tmp_path / "h", {"diagnostics/groups.py": GROUP_COUNTER}, keep_seed_diagnostics=False)
    with HarnessSession(docker_sandbox, harness) as session:
        findings = session.diagnose(views)
    assert [(f["name"], f["message"]) for f in findings] == [("groups", str([4] * 6))]


DIGEST = '''
import hashlib, json

def diagnose(views):
    text = json.dumps([[v["response"], v["prompt"], v["reward"]] for v in views])
    return [{"name": "digest", "rate": 0.0, "message": hashlib.sha256(text.encode()).hexdigest()}]
'''


def test_views_larger_than_a_pipe_reach_the_diagnostics_whole(docker_sandbox, tmp_path, views, monkeypatch):
    import sandboxes.harness_wire_stream as stream

    monkeypatch.setattr(stream, "DIAGNOSE_CHUNK", 2)
    big = [v | {"response": f"Answer: {i}\n" + chr(0x41 + i) * 300_000 + "\u00e9"} for i, v in enumerate(views[:6])]
    harness = _harness(tmp_path / "h", {"diagnostics/digest.py": DIGEST}, keep_seed_diagnostics=False)
    with HarnessSession(docker_sandbox, harness) as session:
        findings = session.diagnose(big)
    text = json.dumps([[v["response"], v["prompt"], v["reward"]] for v in big])
    assert [(f["name"], f["message"]) for f in findings] == [("digest", hashlib.sha256(text.encode()).hexdigest())]


def test_a_diagnostic_that_kills_the_request_process_fails_the_call_as_the_harness_dying(docker_sandbox, tmp_path,
                                                                                         views):
    killer = "import os, signal\n\ndef diagnose(views):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return []\n"
    harness = _harness(tmp_path / "h", {"diagnostics/a_killer.py": killer})
    with HarnessSession(docker_sandbox, harness) as session, \
            pytest.raises(HarnessFailed, match="the harness's diagnose process died"):
        session.diagnose(views)


LEAVER = '''
import os, time

def diagnose(views):
    pid = os.fork()
    if pid == 0:
        os.setsid()
        os.execvp("sleep", ["sleep", "31337"])
    for _ in range(200):  # until it is ``sleep`` (as first written, the next diagnostic looked before the exec)
        if b"31337" in open(f"/proc/{pid}/cmdline", "rb").read():
            break
        time.sleep(0.01)
    return [{"name": "left", "rate": 0.0, "message": "a sleeper"}]
'''

LOOKER = '''
import os

def diagnose(views):
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                found.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode())
            except OSError:
                pass
    return [{"name": "sleepers", "rate": 0.0, "message": str(sum("31337" in c for c in found))}]
'''


def test_a_process_a_diagnostic_leaves_is_gone_before_the_sessions_next_call(docker_sandbox, tmp_path, views):
    harness = _harness(tmp_path / "h", {"diagnostics/a_leaver.py": LEAVER, "diagnostics/b_looker.py": LOOKER},
                       keep_seed_diagnostics=False)
    with HarnessSession(docker_sandbox, harness) as session:
        first = session.diagnose(views)
        second = session.diagnose(views)
    # within a call the sleeper lives on (the next diagnostic may see it); by the next call the sweep ended it
    assert [(f["name"], f["message"]) for f in first] == [("left", "a sleeper"), ("sleepers", "1")]
    assert [(f["name"], f["message"]) for f in second] == [("left", "a sleeper"), ("sleepers", "1")]
