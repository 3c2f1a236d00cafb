"""A started sandbox container (``DockerSandbox.start``) watched until ``stop()``: its output and memory polled,
its life capped, and its result read back; and the kill and wait calls that survive a busy engine.

Split from ``sandboxes.docker``, which decides how a container is made (user, capabilities, mounts, limits); this
module only watches one that runs.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import docker.errors
import requests.exceptions
from docker.models.containers import Container

from sandboxes.base import Limits, SandboxResult
from sandboxes.cgroup_usage import find_cgroup
from sandboxes.docker_channel import AttachedChannel
from sandboxes.docker_engine import ENGINE_ERRORS, remove_container
from sandboxes.untrusted import output_over_limits

log = logging.getLogger(__name__)

OUTPUT_POLL_S = 0.05
MEMORY_POLL_S = 0.2
MAX_OUTPUT_BYTES = 1_000_000
"""stdout and stderr are each cut to their last ~1 MB."""


class DockerProcess:
    """One started sandbox container, watched until ``stop()``.

    A background thread samples its memory, kills it when what it wrote under /out
    passes ``limits.output_total_mb`` or ``limits.output_files``, and kills it at the
    end of its life (``limits.timeout_s``).  The output caps are polled every ``OUTPUT_POLL_S``: a writer
    faster than one poll and the kill overshoots them by what it writes meanwhile, and ``stop()`` scans /out once
    more, so a breach between the last poll and the exit is still named; no single file can pass
    ``limits.output_mb`` (the container's ``fsize`` ulimit).
    """

    def __init__(self, container: Container, image: str, output_dir: Path | None, limits: Limits,
                 channel: AttachedChannel | None = None) -> None:
        self.container, self.image, self.output_dir, self.limits = container, image, output_dir, limits
        self.channel = channel
        """stdin/stdout of a container started with ``start_attached`` (else None)."""
        self.started = time.monotonic()
        self.timed_out = False
        self.output_exceeded: str | None = None
        self.peak_bytes: int | None = None
        self._stopped = threading.Event()
        self._result: SandboxResult | None = None
        container.start()
        # the kernel's counters for it, read directly where the engine is local (its stats call is slow)
        self._cgroup = find_cgroup(self.id)
        self._watch = threading.Thread(target=self._watchdog, name=f"watch-{container.name}", daemon=True)
        self._watch.start()

    @property
    def id(self) -> str:
        return str(self.container.id)

    def alive(self) -> bool:
        if self._result is not None:
            return False
        try:
            self.container.reload()
        except ENGINE_ERRORS:
            return False
        return self.container.status in ("created", "running")

    def wait(self) -> None:
        """Block until the command exits or is killed (timeout, output cap)."""
        remaining = self.limits.timeout_s - (time.monotonic() - self.started)
        if wait_exit(self.container, max(remaining, 0.1)) is None:
            self._kill(timed_out=True)
            self.container.wait()

    def stop(self) -> SandboxResult:
        """Kill if still running, collect what happened, remove the container (idempotent)."""
        if self._result is not None:
            return self._result
        self._stopped.set()
        try:
            still_running = self.alive()
            cpu_s = self.cpu_seconds() if still_running else None
            if still_running:
                self._final_memory_sample()
                kill_if_running(self.container)
            exit_code = self.container.wait()["StatusCode"]
            if self.output_dir is not None and not self.output_exceeded:
                # what the last polls missed (a burst between two, a watchdog that stopped): a breach is named
                self.output_exceeded = output_over_limits(self.output_dir, self.limits)
            self.container.reload()
            state = self.container.attrs["State"]
            self._result = SandboxResult(
                exit_code=None if self.timed_out else exit_code,
                stdout=tail(self.container.logs(stdout=True, stderr=False)),
                stderr=tail(self.container.logs(stdout=False, stderr=True)),
                duration_s=time.monotonic() - self.started,
                timed_out=self.timed_out,
                # An OOM kill may show only as exit 137 (SIGKILL) without the flag; callers see both.
                oom_killed=bool(state.get("OOMKilled")),
                peak_memory_mb=self.peak_bytes / 2**20 if self.peak_bytes else None,
                output_exceeded=self.output_exceeded,
                extra={"container_id": self.container.id, "image": self.image, "stopped_by_caller": still_running,
                       "cpu_s": cpu_s},
            )
        finally:
            self._watch.join(timeout=5)
            if self.channel is not None:
                self.channel.close()
            remove_container(self.container)
        return self._result

    def cpu_seconds(self) -> float | None:
        """CPU time the container used so far (all its processes, those that exited too: the cgroup's
        count), or None if the engine does not say or the container is gone."""
        return self.usage()["cpu_s"]

    def usage(self) -> dict:
        """``{"cpu_s": CPU seconds so far, "pids": processes now}`` of the container (None where unknown)."""
        cpu_s = self._cgroup.cpu_s() if self._cgroup is not None else None
        if cpu_s is not None:
            return {"cpu_s": cpu_s, "pids": self._cgroup.pids()}
        try:
            stats = self.container.stats(stream=False, one_shot=True)
        except ENGINE_ERRORS:
            return {"cpu_s": None, "pids": None}
        try:
            cpu_s = stats["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9
        except (KeyError, TypeError):
            cpu_s = None
        pids = (stats.get("pids_stats") or {}).get("current") if isinstance(stats, dict) else None
        return {"cpu_s": cpu_s, "pids": pids if isinstance(pids, int) else None}

    def _kill(self, *, timed_out: bool = False, output: str | None = None) -> None:
        if kill_if_running(self.container):
            self.timed_out = self.timed_out or timed_out
            self.output_exceeded = self.output_exceeded or output

    def _watchdog(self) -> None:
        memory_at, sampling = 0.0, True
        while not self._stopped.wait(OUTPUT_POLL_S):
            try:
                over = output_over_limits(self.output_dir, self.limits) if self.output_dir else None
                if over:
                    self._kill(output=over)
                    return
                if time.monotonic() - self.started > self.limits.timeout_s:
                    self._kill(timed_out=True)
                    return
            except Exception:  # noqa: BLE001 - the engine went away or the container is gone: stop watching
                log.debug("watchdog of %s stopped", self.container.id, exc_info=True)
                return
            if sampling and time.monotonic() - memory_at >= MEMORY_POLL_S:
                memory_at = time.monotonic()
                try:
                    sampling = self._sample_memory()
                except Exception:  # noqa: BLE001 - the engine's stats call failed
                    log.debug("memory sampling of %s failed", self.container.id, exc_info=True)
                    sampling = False
                if not sampling and not self.alive():
                    return  # it exited: nothing more to watch
                # else a figure the engine did not give (under load) ends the sampling, not the output caps

    def _final_memory_sample(self) -> None:
        """One last reading before the kill: the watchdog's samples are MEMORY_POLL_S apart."""
        try:
            self._sample_memory()
        except ENGINE_ERRORS:
            log.debug("last memory sample of %s failed", self.container.id, exc_info=True)

    def _sample_memory(self) -> bool:
        """Record the container's memory (cgroup v1's high-water mark, or v2's usage); False once it exited."""
        if self._cgroup is not None:
            peak = self._cgroup.memory_peak()
            if peak is not None:
                self.peak_bytes = max(self.peak_bytes or 0, peak)
                return True
        stats = self.container.stats(stream=False, one_shot=True)
        memory = stats.get("memory_stats") or {}
        sample = memory.get("max_usage") or memory.get("usage")
        if not sample:  # an exited container reports no memory figures
            return False
        self.peak_bytes = max(self.peak_bytes or 0, sample)
        return True


KILL_EXIT_WAIT_S = 60.0
"""How long a killed container may take to be reported gone after the engine gave up waiting for it."""


def kill_if_running(container: Container) -> bool:
    """Kill a container still running past its time; False if it had exited on its own.

    The engine sends the kill, waits ~10 s for the exit and may then answer 500 though the process is dying
    ("tried to kill container, but did not receive an exit event" while something holds it, "PID ... is zombie"
    until its reaper runs). On a 500 this waits up to ``KILL_EXIT_WAIT_S`` for the exit and fails only if it
    never comes: the engine's impatience is not a reason to fail the caller's round."""
    try:
        container.kill()
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # "is not running": it finished just as the wait gave up
            return False
        if (exc.status_code or 0) < 500 or wait_exit(container, KILL_EXIT_WAIT_S) is None:
            raise
    return True


def wait_exit(container: Container, timeout_s: float) -> int | None:
    """The container's exit code, or None if it is still running after ``timeout_s``."""
    try:
        return container.wait(timeout=timeout_s)["StatusCode"]
    except requests.exceptions.ReadTimeout:
        return None
    except requests.exceptions.ConnectionError as exc:
        # Over a unix socket the SDK reports its read timeout as a ConnectionError.
        if "timed out" in str(exc).lower():
            return None
        raise


def tail(data: bytes) -> str:
    return data[-MAX_OUTPUT_BYTES:].decode("utf-8", errors="replace")
