"""A program whose grade was lost to the runner, not to itself, is graded once more (issue 46, Deliver 5).

The real failure here: the batch's container is killed from outside while its programs run (what an engine
restart or an out-of-memory kill of the container does).  The programs whose records had arrived keep their
verdict; each of the others is graded again alone in a fresh container, and an honest one then passes.
"""

from __future__ import annotations

import os
import threading
import time

import pytest

from execution.programs import ProgramJob, grade_programs
from sandboxes.docker_engine import OWNER_PID_LABEL

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
SLOW_HONEST = "import time\ndef f(x):\n    time.sleep(0.5)\n    return {'y': x * 2}\n"
PROGRAMS = 6
KILL_AFTER_S = 3.0
"""After the container starts: six programs of 1.5 s each take about 9 s, so some have ended and some have not."""


@pytest.mark.docker
def test_a_container_killed_mid_batch_costs_no_program_its_grade(docker_sandbox) -> None:
    client = docker_sandbox.client
    mine = {"type": "container", "label": f"{OWNER_PID_LABEL}={os.getpid()}"}
    stream = client.api.events(filters=mine, decode=True)  # followed live, from before the first container
    events: list[dict] = []
    killed: list[str] = []

    def follow() -> None:
        for event in stream:
            events.append(event)
            if event.get("status") == "start" and not killed:
                killed.append(event["id"])
                threading.Timer(KILL_AFTER_S, lambda: client.containers.get(event["id"]).kill()).start()

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        jobs = [ProgramJob(f"p{k}", SLOW_HONEST, entry="f", inputs=INPUTS) for k in range(PROGRAMS)]
        results = grade_programs(jobs, {job.key: EXPECTED for job in jobs}, docker_sandbox, batch_size=PROGRAMS)
        time.sleep(1.0)  # the last events are long sent (each container ran after them): let them arrive
    finally:
        stream.close()
    created = [e["id"] for e in events if e.get("status") == "create"]
    died = {e["id"]: e.get("Actor", {}).get("Attributes", {}).get("exitCode") for e in events
            if e.get("status") == "die"}
    assert killed and killed[0] == created[0], (killed, created)
    assert died[killed[0]] == "137", died  # the batch's container really was killed (SIGKILL), not ended
    regraded = len(created) - 1
    assert 1 <= regraded < PROGRAMS, created  # some programs had their records before the kill, some did not
    for key, result in results.items():
        assert (result.status, result.passed) == ("passed", 3), (key, result.status, result.detail)
