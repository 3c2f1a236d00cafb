"""The runtime travels as a package of parts; harness code that rewrites them changes nothing.

Every part is imported by the launcher before any harness code runs, so a part rewritten under /tmp/rt is never
read again, and the sweep after the request puts the files back.  Real Docker sessions with the math seed.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from rl_backend.synthetic import synthetic_math_rows
from domains.math import MathDomain
from sandboxes import harness_runtime
from sandboxes.harness_client import RUNTIME_FILE, HarnessSession, _bundle, trajectory_view

SEEDS = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds"

REWRITES_THE_RUNTIME = '''

import glob as _glob
import os as _os

_seed_score = compute_score
_BROKEN = "import os\\nos._exit(3)\\n"


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    parts = sorted(_glob.glob("/tmp/rt/harness_rt/*.py")) + ["/tmp/rt/runtime.py"]
    intact = all(open(p).read() != _BROKEN for p in parts)
    wrote = 0
    for path in parts:
        try:
            with open(path, "w") as f:
                f.write(_BROKEN)
            wrote += 1
        except OSError:
            pass
    result = _seed_score(data_source, solution_str, ground_truth, extra_info)
    return {"score": result["score"], "wrote": wrote, "intact": intact}
'''


def test_the_bundle_carries_every_part_and_a_launcher():
    names = tarfile.open(fileobj=io.BytesIO(_bundle(RUNTIME_FILE, SEEDS / "math"))).getnames()
    parts = sorted(p.name for p in RUNTIME_FILE.glob("*.py"))
    assert len(parts) >= 6 and [n for n in names if n.startswith("harness_rt/")] == [f"harness_rt/{p}" for p in parts]
    assert "runtime.py" in names and not [n for n in names if "__pycache__" in n]
    assert "from harness_rt.serve import main" in harness_runtime.LAUNCHER


@pytest.mark.docker
def test_a_reward_that_rewrites_the_runtime_changes_nothing(docker_sandbox, tmp_path):
    root = tmp_path / "harness"
    shutil.copytree(SEEDS / "math", root)
    (root / "reward.py").write_text((root / "reward.py").read_text() + REWRITES_THE_RUNTIME)
    # one group a request: a second would run at once in the other lane and could rewrite the parts first
    rows = synthetic_math_rows("r", 0, 1, 4, seed=3, verify=MathDomain().verify)
    views = [trajectory_view(r) for r in rows]
    with HarnessSession(docker_sandbox, root) as session:
        first = session.score(views, reward_range=(0.0, 1.0))
        second = session.score(views, reward_range=(0.0, 1.0))  # served by the parts imported at the start
        prompts = session.render([{"question": "2+3?", "task": {}}])
    assert [s.reward for s in second] == [s.reward for s in first] and len(second) == len(views)
    assert first[0].reward_info["wrote"] >= 7  # every part and the launcher were rewritten
    # the first call of each request found the parts as shipped: the sweep put them back after request 1
    assert first[0].reward_info["intact"] is True and second[0].reward_info["intact"] is True
    assert prompts[0][-1]["content"].startswith("2+3?")
