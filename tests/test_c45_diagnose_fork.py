"""The diagnose worker's request process loads a call's views once and runs each diagnostic in a process forked
from it (issue 45, gate III throughput), against a real Docker engine.

Each diagnostic used to load a copy of its own from the frame, all in the request's process, one after another:
at 1M views, three diagnostics meant three loads of a 440 MB frame.  Now the request's process loads it once
and forks a child per diagnostic, which sees a copy-on-write copy of the views and of everything else.

- what one diagnostic leaves in the process (a builtin, a library module's attribute, a changed view) never
  reaches the next: each starts from the request's process as it was before the first;
- the findings are those of the in-process pipeline (``Diagnostics.diagnose``) on the same views, in the same
  order, a crash still a finding of its own;
- a diagnostic that ends its process (``sys.exit``, ``os._exit``) fails the call as the harness dying, as
  before.

A call's views also travel in chunks of ``DIAGNOSE_CHUNK`` (``sandboxes.harness_wire_stream``), which a backtest
sends while it scores: whatever parts the caller adds them in, the diagnostics see the same views, with the same
values shared between them, as one call given them whole.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_c45_diagnose_fork.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view
from tests.test_harness_protocol import _harness  # the seed harness with files added

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"


@pytest.fixture(scope="module")
def views() -> list[dict]:
    from domains.math import MathDomain
    from rl_backend.synthetic import synthetic_math_rows

    rows = synthetic_math_rows("f", 0, 6, 4, seed=5, verify=MathDomain().verify)
    return [trajectory_view(r) | {"reward": float(i % 2), "keep": i % 3 != 0} for i, r in enumerate(rows)]


LEAVER = '''
import builtins, json

def diagnose(views):
    builtins.LEFT_BY_A = len(views)
    json.LEFT_BY_A = "patched"
    views[0]["response"] = "Answer: scribbled"
    return []
'''
"""Leaves a builtin, a library module's attribute and a changed view behind (sorted first: ``a_...``)."""

READER = '''
import builtins, json

def diagnose(views):
    return [{"name": "left", "rate": 0.0, "example_ids": [views[0]["traj_id"]],
             "message": f"{getattr(builtins, 'LEFT_BY_A', None)} {getattr(json, 'LEFT_BY_A', None)} "
                        f"{views[0]['response'] == 'Answer: scribbled'}"}]
'''


def test_what_one_diagnostic_leaves_in_its_process_never_reaches_the_next(docker_sandbox, tmp_path, views):
    harness = _harness(tmp_path / "h", {"diagnostics/a_leaver.py": LEAVER, "diagnostics/b_reader.py": READER})
    with HarnessSession(docker_sandbox, harness) as session:
        findings = session.diagnose(views)
    left = [f for f in findings if f["name"] == "left"]
    assert [(f["message"], f["example_ids"], f["diagnostic"]) for f in left] == \
        [("None None False", [views[0]["traj_id"]], "b_reader.py")]


CRASHER = '''
def diagnose(views):
    return [{"name": "first", "rate": 0.5}, {"name": "second", "rate": "not a number"}]
'''
"""Its second finding fails the runtime's conversion: the first stays, and a crash finding follows it."""


def test_findings_are_the_in_process_pipelines_in_order_a_crash_its_own_finding(docker_sandbox, tmp_path, views):
    from sandboxes.harness_runtime import Diagnostics

    harness = _harness(tmp_path / "h", {"diagnostics/a_leaver.py": LEAVER, "diagnostics/b_reader.py": READER,
                                        "diagnostics/c_crasher.py": CRASHER})
    with HarnessSession(docker_sandbox, harness) as session:
        sandboxed = session.diagnose(views)
    in_process = Diagnostics(harness).diagnose(views)
    names = [f["name"] for f in sandboxed]
    assert names == ["left", "first", "c_crasher:crashed", "format_failures", "truncation", "zero_variance"]
    assert [f["diagnostic"] for f in sandboxed] == [f["diagnostic"] for f in in_process]
    # the seed's findings and the crash are the same either way; the reader saw a's leftovers only in-process
    same = [(f["name"], f["severity"], f["rate"], f["message"]) for f in sandboxed if f["name"] != "left"]
    assert same == [(f["name"], f["severity"], f["rate"], f["message"]) for f in in_process if f["name"] != "left"]
    assert "ValueError" in sandboxed[2]["message"] and sandboxed[2]["severity"] == "error"
    assert [f["message"] for f in sandboxed if f["name"] == "left"] == ["None None False"]


@pytest.mark.parametrize("ending", ["import sys\nsys.exit(0)", "import os\nos._exit(0)",
                                    "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"])
def test_a_diagnostic_that_ends_its_process_fails_the_call_as_the_harness_dying(docker_sandbox, tmp_path, views,
                                                                                ending):
    body = "def diagnose(views):\n" + "".join(f"    {line}\n" for line in ending.split("\n"))
    harness = _harness(tmp_path / "h", {"diagnostics/a_ender.py": body})
    with HarnessSession(docker_sandbox, harness) as session, \
            pytest.raises(HarnessFailed, match="the harness's diagnose process died"):
        session.diagnose(views)


SHAPE = '''
import hashlib, json

def diagnose(views):
    bare = [{k: v for k, v in view.items() if k not in ("traj_id", "group_id")}
            | {"extra_info": {k: v for k, v in view["extra_info"].items() if k not in ("traj_id", "group_id")}}
            for view in views]
    first = {}
    shared = [first.setdefault(id(view["prompt"]), i) for i, view in enumerate(views)]
    groups = {}
    same_group = [groups.setdefault(view["group_id"], i) for i, view in enumerate(views)]
    text = json.dumps([bare, shared, same_group], sort_keys=True)
    return [{"name": "shape", "rate": 0.0, "message": hashlib.sha256(text.encode()).hexdigest(),
             "example_ids": [views[i]["traj_id"] for i in (0, 5, len(views) - 1)]}]
'''
"""A digest of the views without their opaque ids, of which of them share one ``prompt`` object (a group's do,
within a chunk: where a chunk starts shows there) and of which share a group."""


def test_views_added_in_any_parts_reach_the_diagnostics_as_one_call_would(docker_sandbox, tmp_path, views,
                                                                          monkeypatch):
    import sandboxes.harness_wire_stream as stream

    harness = _harness(tmp_path / "h", {"diagnostics/a_shape.py": SHAPE})
    for f in (harness / "diagnostics").glob("*.py"):
        if f.name != "a_shape.py":
            f.unlink()
    monkeypatch.setattr(stream, "DIAGNOSE_CHUNK", 5)  # 24 views: chunks of 5, 5, 5, 5 and 4
    seen = []
    for parts in ([24], [3, 7, 14], [1] * 24, [10, 0, 14]):
        with HarnessSession(docker_sandbox, harness) as session:
            call = session.diagnose_stream(views)
            start = 0
            for n in parts:
                call.add(views[start:start + n])
                start += n
            seen.append([(f["message"], f["example_ids"]) for f in call.findings()])
    with HarnessSession(docker_sandbox, harness) as session:
        whole = session.diagnose(views)
        monkeypatch.setattr(stream, "DIAGNOSE_CHUNK", 8)  # whole groups: no group's prompt split
        at_8 = session.diagnose_stream(views)
        at_8.add(views)
        aligned = at_8.findings()
    assert aligned[0]["message"] != whole[0]["message"]  # the digest does see where chunks start
    assert seen == [[(whole[0]["message"], [views[0]["traj_id"], views[5]["traj_id"], views[23]["traj_id"]])]] * 4
    assert len(whole) == 1 and len(whole[0]["message"]) == 64


def test_a_stream_given_other_views_than_it_was_opened_for_is_refused_as_the_callers_error(docker_sandbox,
                                                                                           tmp_path, views):
    with HarnessSession(docker_sandbox, SEED) as session:
        call = session.diagnose_stream(views)
        call.add(views[:20])
        with pytest.raises(ValueError, match="a diagnose call over 24 views was given 28"):
            call.add(views[:8])
    with HarnessSession(docker_sandbox, SEED) as session:
        call = session.diagnose_stream(views)
        call.add(views[:23] + [views[23] | {"response": "longer than the view it was sized for"}])
        with pytest.raises(ValueError, match="a diagnose call sized for 24 views of [\\d,]+ characters was given "
                                             "24 of [\\d,]+"):
            call.findings()
