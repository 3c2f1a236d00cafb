"""An engine that fails while a trusted grader runs is the infrastructure's fault, never a 0 for the answer.

A real HTTP server stands in for a Docker engine that answers its ping and image checks but refuses to
create containers (a full disk, a daemon in trouble).  Before, the code and SWE graders recorded such a
failure as the answer's ``error`` with score 0, so an exam counted right answers wrong (the policy blamed)
and the gate's probe counted constructed right answers as failures (the harness blamed).  Now the grader
tries once more, then raises ``GraderUnavailable`` naming the cause and what to do.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from domains.base import GRADE_ATTEMPTS, run_grader
from domains.code import CodeDomain
from domains.code_tasks import tasks_by_id
from domains.swe import SweDomain
from sandboxes.base import GraderUnavailable, SandboxUnavailable
from swe_env.tasks import TaskNotReady


class FailingEngine(BaseHTTPRequestHandler):
    """Answers what a client asks before it starts work; every container create fails with a 500."""

    creates = 0

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        path = self.path.split("?")[0]
        if path.endswith("/_ping"):
            self._send(200, "OK")
        elif path.endswith("/version"):
            self._send(200, {"ApiVersion": "1.41", "Version": "24.0.0", "MinAPIVersion": "1.12"})
        elif "/images/" in path and path.endswith("/json"):
            self._send(200, {"Id": "sha256:" + "0" * 64, "RepoTags": ["stand-in:latest"]})
        elif path.endswith("/containers/json"):
            self._send(200, [])
        else:
            self._send(500, {"message": f"stand-in engine: no {path}"})

    def do_HEAD(self) -> None:  # noqa: N802
        self._send(200, "OK")

    def do_POST(self) -> None:  # noqa: N802
        if "/containers/create" in self.path:
            type(self).creates += 1
        self._send(500, {"message": "stand-in engine: no space left on device"})

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def engine_fails(monkeypatch: pytest.MonkeyPatch):
    """Call it to point this process's Docker client at the failing stand-in from then on."""
    FailingEngine.creates = 0
    server = ThreadingHTTPServer(("127.0.0.1", 0), FailingEngine)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield lambda: monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()


def right_answer(task: dict) -> str:
    return f"```python\n{task['reference']}\n```"


def test_code_answers_are_not_scored_when_the_engine_fails(engine_fails) -> None:
    task = next(iter(tasks_by_id().values()))
    engine_fails()
    domain = CodeDomain()
    items = [(f"code/{task['source']}", right_answer(task), {"task_id": task["id"]})]
    with pytest.raises(GraderUnavailable) as failed:
        domain.verify_batch(items)
    message = str(failed.value)
    assert "code grader failed 2 times" in message and "no space left on device" in message
    assert "nothing is blamed on the harness" in message and "start_docker.sh" in message and "--resume" in message
    assert FailingEngine.creates == GRADE_ATTEMPTS  # tried once more before giving up
    assert domain._grades == {}  # nothing cached: a later call grades the answer for real
    with pytest.raises(SandboxUnavailable):  # a GraderUnavailable is a user error with its own message
        domain.verify(*items[0])


@pytest.mark.docker
def test_a_swe_patch_is_not_scored_when_the_engine_fails(docker_sandbox, engine_fails) -> None:
    from swe_env.build import check_spec
    from swe_env.checked import load_task
    from swe_env.cross_check import shipped_specs
    from swe_env.feedback import ground_truth

    spec = shipped_specs()[0]
    # checked with the real engine, in whatever task cache the session uses (setup.sh fills the default one;
    # a test's own swe_cache would be left holding this one task, and later SWE tests would find no train task)
    check_spec(spec, log=lambda _: None)
    truth = ground_truth(load_task(spec.id))
    domain = SweDomain()
    engine_fails()
    with pytest.raises(GraderUnavailable, match="SWE grader failed 2 times.*no space left on device"):
        domain.verify(f"swe/{spec.id}", f"```diff\n{truth['gold_patch']}```\n", truth)
    assert FailingEngine.creates == GRADE_ATTEMPTS
    assert domain._grades == {}


def test_run_grader_retries_once_and_keeps_a_task_not_built_as_it_is() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionError("engine hiccup")
        return "graded"

    assert run_grader(flaky, "test") == "graded" and len(calls) == 2

    def not_built() -> str:
        raise TaskNotReady("task x: its image is not built; run `python -m meta_agent tasks build --domain swe`")

    with pytest.raises(TaskNotReady, match="tasks build"):
        run_grader(not_built, "SWE")
