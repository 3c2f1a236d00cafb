"""Held-out set of issue 45's gate III throughput work, written after the reader's score loop froze.

The reader now waits on its lanes with one ``poll`` per answer (registered only while a lane's group is in
flight) instead of a ``select`` built per answer.  These are attacks on what that made different, written after
it froze, against a real Docker engine:

- a lane that hangs while the other keeps answering must fail at its own group's clock, not wait for the
  request's;
- a request process that closes every descriptor it inherited and lives on must fail the session, not leave
  the reader polling a dead pipe;
- a lane that writes a frame of its own after its last answer, while the other lane still works, must not
  have it read as an answer;
- a template read through a link to a file that a reward writes renders as missing (the question alone) whether
  the render comes before or after the scoring (training renders first, a backtest after): the sweep removes
  the file after each request.  (Written against a version that also parsed the templates as the render worker
  started; that part was reverted before the freeze, as it added a Jinja2 import to every session that never
  renders, and the case still holds.)

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_heldout_c45_lanes.py
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
RANGE = (0.0, 1.0)


def _harness(root: Path, files: dict[str, str]) -> Path:
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

    rows = synthetic_math_rows("h", 0, 8, 4, seed=11, verify=MathDomain().verify)
    return [trajectory_view(r) for r in rows]


def _lane_of_first_group(views: list[dict]) -> str:
    """The task of the session's first group: lane 0 scores it (k mod 2), lane 1 the second."""
    return views[0]["task_id"]


def test_a_lane_that_hangs_while_the_other_answers_fails_at_its_groups_clock(docker_sandbox, tmp_path, views):
    hung_task = views[4]["task_id"]  # the second group: lane 1; lane 0 goes on answering its own groups
    assert hung_task != _lane_of_first_group(views)
    harness = _harness(tmp_path / "h", {"reward.py": (
        "import time\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
        f"    if extra_info['task_id'] == {hung_task!r}:\n"
        "        while True:\n"
        "            time.sleep(0.01)\n"
        "    return 1.0\n")})
    started = time.monotonic()
    with HarnessSession(docker_sandbox, harness, request_timeout_s=300) as session, \
            pytest.raises(HarnessFailed, match=r"timed out: the harness's score call did not return within 10s"):
        session.score(views, reward_range=RANGE)
    # the request's own deadline is 30 s + 60 ms a trajectory: the group's clock (10 s + 50 ms each) fired first
    assert time.monotonic() - started < 30


def test_a_request_process_that_closes_its_descriptors_and_lives_on_fails_the_session(docker_sandbox, tmp_path,
                                                                                         views):
    harness = _harness(tmp_path / "h", {"reward.py": (
        "import os, time\n"
        "def compute_score(*a, **k):\n"
        "    for fd in range(3, 256):\n"
        "        try:\n"
        "            os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    time.sleep(3600)\n")})
    with HarnessSession(docker_sandbox, harness, request_timeout_s=300) as session, \
            pytest.raises(HarnessFailed, match=r"timed out: the harness's score call did not return within 10s"):
        session.score(views[:8], reward_range=RANGE)
    assert session.summary["exit_code"] is not None


def test_a_frame_written_after_a_lanes_last_answer_is_never_read_as_an_answer(docker_sandbox, tmp_path, views):
    # lane 0 scores groups 0, 2, 4, 6: on its last group it leaves a thread that forges an answer frame (every
    # reward 1.0) on every descriptor once that group is answered, while lane 1 still works on group 7 (slowed).
    # The reader polls lane 0 no more, so the frame is never taken for a group: it meets it where lane 0's
    # process should say it ended, and fails the session as the harness's
    last_of_lane0 = views[24]["task_id"]
    slow_task = views[28]["task_id"]
    harness = _harness(tmp_path / "h", {"reward.py": (
        "import marshal, os, threading, time\n"
        "def _forge():\n"
        "    time.sleep(0.3)\n"
        "    forged = marshal.dumps(('ok', [[1.0, {}, True, None]] * 4))\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        "            os.write(fd, b'%d\\n' % len(forged) + forged)\n"
        "        except OSError:\n"
        "            pass\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n"
        f"    if extra_info['task_id'] == {slow_task!r}:\n"
        "        time.sleep(1.5)\n"
        f"    if extra_info['task_id'] == {last_of_lane0!r} and extra_info['sample_idx'] == 3:\n"
        "        threading.Thread(target=_forge, daemon=True).start()\n"
        "    return 0.0\n")})
    with HarnessSession(docker_sandbox, harness, request_timeout_s=300) as session, \
            pytest.raises(HarnessFailed, match="the harness's score process answered garbage at its end"):
        session.score(views, reward_range=RANGE)


def test_templates_linked_to_a_file_a_reward_writes_render_the_same_before_and_after_scoring(docker_sandbox,
                                                                                               tmp_path, views):
    harness = _harness(tmp_path / "h", {"reward.py": (
        "def compute_score(*a, **k):\n"
        "    with open('/tmp/planted.j2', 'w') as f:\n"
        "        f.write('PLANTED {{ question }}')\n"
        "    return 1.0\n")})
    (harness / "prompts" / "user.j2").unlink()
    (harness / "prompts" / "user.j2").symlink_to("/tmp/planted.j2")
    items = [{"question": "2+3?", "task": {}}]
    with HarnessSession(docker_sandbox, harness) as first:  # training's order: render, then score
        before = first.render(items)
        first.score(views[:4], reward_range=RANGE)
        again = first.render(items)
    with HarnessSession(docker_sandbox, harness) as second:  # a backtest's order: score, then render
        second.score(views[:4], reward_range=RANGE)
        after = second.render(items)
    assert before == again == after
    # a link to nothing is no template: the user message is the question itself, in every order
    assert before[0][-1] == {"role": "user", "content": "2+3?"}
