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

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_c45_diagnose_fork.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"


def _harness(root: Path, files: dict[str, str]) -> Path:
    """The seed harness with ``files`` added (or replacing the seed's)."""
    for path in SEED.rglob("*"):
        if path.is_file():
            target = root / path.relative_to(SEED)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    for name, text in files.items():
        (root / name).write_text(text)
    return root


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
