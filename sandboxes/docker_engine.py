"""The Docker engine and the bookkeeping of sandbox containers: connecting, labelling, removing orphans.

``sandboxes.docker`` runs commands in containers; this module knows which containers are the
project's (``meta_agent.sandbox=1``) and which controller process owns each (pid, start and host labels),
so what a killed controller left running can be found and removed::

    client = connect_engine()                  # SandboxUnavailable saying how to start an engine
    labels = owner_labels()                    # put on every sandbox container at creation
    removed = cleanup_stale(client)            # containers whose controller process is gone
"""

from __future__ import annotations

import logging
import os
import socket

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container

from sandboxes.base import SandboxUnavailable
from sandboxes.processes import identity, running

log = logging.getLogger(__name__)

LABEL = "meta_agent.sandbox"
"""Every sandbox container carries ``meta_agent.sandbox=1``."""
OWNER_PID_LABEL = "meta_agent.owner_pid"
OWNER_HOST_LABEL = "meta_agent.owner_host"
OWNER_START_LABEL = "meta_agent.owner_start"
"""The owner's ``processes.identity``: a pid reused by another process does not keep an orphan alive."""

START_HINT = (
    "Start one with `bash scripts/start_docker.sh` (as root; installs docker.io if needed and starts dockerd), "
    "or run `dockerd > /tmp/dockerd.log 2>&1 &` as root; to use another engine, set DOCKER_HOST "
    "(e.g. DOCKER_HOST=unix:///var/run/docker.sock)."
)

ENGINE_ERRORS = (docker.errors.DockerException, requests.exceptions.ConnectionError)


def _engine_address(client: docker.DockerClient | None = None) -> str:
    if client is not None:
        return str(client.api.base_url)
    return os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")


def connect_engine(client: docker.DockerClient | None = None) -> docker.DockerClient:
    """Return a client that answered a ping (``docker.from_env()`` unless one is given).

    Raises ``SandboxUnavailable`` saying how to start an engine when none answers.
    """
    try:
        client = client or docker.from_env()
        client.ping()
    except ENGINE_ERRORS as exc:
        raise SandboxUnavailable(
            f"cannot reach a Docker engine at {_engine_address(client)}: {exc}. {START_HINT}"
        ) from exc
    return client


def owner_labels() -> dict[str, str]:
    """The labels of a sandbox container started by this process: the project's mark, our pid, start and host."""
    labels = {LABEL: "1", OWNER_PID_LABEL: str(os.getpid()), OWNER_HOST_LABEL: socket.gethostname()}
    start = identity(os.getpid())
    return labels | ({OWNER_START_LABEL: start} if start else {})


def remove_container(container: Container) -> None:
    """Remove ``container`` whatever its state; an engine error is logged, never raised over the caller's."""
    try:
        container.remove(force=True)
    except docker.errors.NotFound:
        pass
    except ENGINE_ERRORS as exc:
        # Do not mask the caller's exception; cleanup_stale() removes it later.
        log.warning("could not remove sandbox container %s: %s", container.id, exc)


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(OWNER_HOST_LABEL) != socket.gethostname():
        return True  # another machine's container: its owner cannot be checked from here
    return running(labels.get(OWNER_PID_LABEL), labels.get(OWNER_START_LABEL))


_swept = False


def sweep_once(client: docker.DockerClient) -> None:
    """The first sandbox of a process removes what killed controllers left running (a SIGKILLed controller
    never closes its harness runtime, which would otherwise wait for requests forever)."""
    global _swept
    if not _swept:
        _swept = True
        cleanup_stale(client)


def cleanup_stale(client: docker.DockerClient | None = None) -> list[str]:
    """Remove sandbox containers whose controller process is gone; return their ids.

    A live controller's containers are never touched, so runs, compares and test suites can share one engine.
    """
    client = connect_engine(client)
    removed = []
    # Sandboxes of live controllers come and go meanwhile: a container gone by now is not an error.
    for container in client.containers.list(all=True, filters={"label": f"{LABEL}=1"}, ignore_removed=True):
        if not _owner_alive(container.labels):
            try:
                container.remove(force=True)
            except docker.errors.NotFound:
                continue
            except docker.errors.APIError as exc:
                # Another process's sweep got there first (409: "removal ... already in progress"): the sweep is
                # best effort and never fails the caller's sandbox.
                log.info("stale sandbox container %s not removed here: %s", container.id, exc)
                continue
            removed.append(container.id)
    return removed
