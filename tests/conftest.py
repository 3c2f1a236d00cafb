"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest

from sandboxes.base import SandboxUnavailable
from sandboxes.docker import DockerSandbox, connect_engine
from sandboxes.image import build_image


@pytest.fixture
def ctrl_c_works():
    """SIGINT raises KeyboardInterrupt here and in the controllers this test starts, as in a terminal.

    A suite started in the background by a non-interactive shell (``bash -c 'pytest &'``) inherits SIGINT
    ignored, and so would every controller it spawns; a handler (unlike "ignored") is reset on exec.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def docker_sandbox() -> DockerSandbox:
    """A DockerSandbox on the default image, built offline first if it is missing.

    Without a Docker engine (or without what the offline build needs) the tests
    that use it are skipped, with the reason; under CI (env ``CI`` set) they fail.
    """
    try:
        client = connect_engine()
        build_image(client)
        return DockerSandbox(client=client)
    except (SandboxUnavailable, RuntimeError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the Docker sandbox is required: {exc}", pytrace=False)
        pytest.skip(f"Docker sandbox unavailable: {exc}")


@pytest.fixture(autouse=True)
def _own_skills(tmp_path, monkeypatch):
    """Each test its own skills library: a user's saved skills never change what a test sees."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "skills-library"))


@pytest.fixture(scope="session")
def swe_cache(tmp_path_factory):
    """One SWE task cache (sdists, laid-out repos, check records) per test session, in a tmp folder.

    Task images are content-addressed in the Docker engine, so a session reuses those built before.
    """
    path = tmp_path_factory.mktemp("swe-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("META_AGENT_SWE_CACHE", str(path))
        yield path


@pytest.fixture(scope="module")
def module_dir(request, tmp_path_factory) -> Path:
    """A folder shared by one test module, deleted when the module's tests all passed.

    Module fixtures that train save the 135M policy and its optimizer state (about 1.6 GB a round);
    pytest keeps factory folders until three later sessions have run, which filled the CI disk.
    A module with a failure keeps its folder to look at.
    """
    path = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    failed_before = request.session.testsfailed
    yield path
    if request.session.testsfailed == failed_before:
        shutil.rmtree(path, ignore_errors=True)
