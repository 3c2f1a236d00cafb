"""The Docker implementation of the Sandbox seam (through the ``docker`` SDK).

Each call runs one command in a fresh container and removes it afterwards, come
what may (timeout, exception, Ctrl-C).  The container runs as ``nobody`` with no
network, a read-only root filesystem, read-only inputs, one writable folder
(``/out``, capped in total bytes and files), a small tmpfs ``/tmp``, no
capabilities, and hard memory, CPU, process and wall-time limits.  ``run`` waits
for the command; ``start`` returns a ``DockerProcess`` for a long-lived one (the
harness runtime's server) that the caller ``stop()``s.  What a container leaves
in ``/out`` is hostile input: read it with ``sandboxes.untrusted``.

    sandbox = DockerSandbox()                  # needs the engine and the image
    result = sandbox.run(["python3", "-c", "print(1)"], mounts=[], output_dir=Path("out"))
    assert result.ok and result.stdout == "1\\n"

If the engine is not running: ``bash scripts/start_docker.sh``.  If the image is
missing: ``python -m sandboxes.image build``.  After a controller crash,
``sandboxes.docker_engine.cleanup_stale()`` removes the containers it left behind.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path

import docker
import docker.errors
import requests.exceptions
from docker.models.containers import Container
from docker.types import LogConfig
from docker.types import Mount as DockerMount

from sandboxes.base import Limits, Mount, SandboxResult, SandboxUnavailable
from sandboxes.cgroup_usage import find_cgroup
from sandboxes.docker_channel import AttachedChannel, ChannelClosed  # noqa: F401 (ChannelClosed is public here)
from sandboxes.docker_engine import (ENGINE_ERRORS, START_HINT, connect_engine, owner_labels, remove_container,
                                     sweep_once)
from sandboxes.image import BUILD_HINT, DEFAULT_IMAGE
from sandboxes.untrusted import output_over_limits

log = logging.getLogger(__name__)

OUT_DIR = "/out"
SANDBOX_USER = "65534:65534"
"""nobody:nogroup: the sandbox never runs as root, nor as the caller."""
SUPERVISOR_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What a trusted supervisor keeps when it starts untrusted code under users of its own (``supervised=True``):
give each child its uid and its folder (SETUID, SETGID, CHOWN), kill it (KILL), remove whatever it left (DAC_OVERRIDE,
FOWNER).  A child that drops to a uid other than 0 loses them all (the kernel clears them on that change)."""
OUTPUT_POLL_S = 0.05
MEMORY_POLL_S = 0.2
MAX_OUTPUT_BYTES = 1_000_000
"""stdout and stderr are each cut to their last ~1 MB."""
# The engine keeps logs on disk until the container is removed; cap them so a
# chatty (or hostile) command cannot fill the host disk meanwhile.
_LOG_CONFIG = LogConfig(type=LogConfig.types.JSON, config={"max-size": "10m", "max-file": "2"})


class DockerSandbox:
    """Runs each command in a fresh, locked-down container of ``image``.

    The constructor checks that the engine answers and the image exists, so a
    missing prerequisite shows up before any work is scheduled.
    """

    def __init__(self, image: str = DEFAULT_IMAGE, client: docker.DockerClient | None = None) -> None:
        self.image = image
        self.client = connect_engine(client)
        try:
            self.client.images.get(image)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(self._missing_image_message()) from exc
        except ENGINE_ERRORS as exc:
            raise SandboxUnavailable(f"Docker engine stopped answering: {exc}. {START_HINT}") from exc
        sweep_once(self.client)

    def _missing_image_message(self) -> str:
        return (
            f"sandbox image {self.image} is missing; build it with `{BUILD_HINT}` "
            "(offline, about a minute; `bash scripts/start_docker.sh` first on a fresh machine), "
            "or pass an image that exists"
        )

    def run(
        self,
        command: list[str],
        *,
        mounts: list[Mount],
        output_dir: Path,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
        supervised: bool = False,
    ) -> SandboxResult:
        """Run ``command``; ``output_dir`` (host) appears at ``/out`` inside, writable.

        The container is removed before this returns or raises.
        """
        process = self.start(command, mounts=mounts, output_dir=output_dir, limits=limits, env=env,
                             supervised=supervised)
        try:
            process.wait()
        finally:
            result = process.stop()
        return result

    def start(
        self,
        command: list[str],
        *,
        mounts: list[Mount],
        output_dir: Path,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
        supervised: bool = False,
    ) -> DockerProcess:
        """Start ``command`` in a fresh container and return at once; ``stop()`` removes it.

        ``limits.timeout_s`` bounds the container's whole life: past it, it is killed.  ``supervised``: the
        command is a trusted supervisor that runs untrusted code only as other users (the code grader's
        programs, each under a uid of its own): it starts as uid 0 keeping only ``SUPERVISOR_CAPS``, so that no
        child can signal, trace or read it, instead of as 65534 with none.
        """
        output_dir = Path(output_dir).resolve()
        output_dir.mkdir(parents=True, exist_ok=True)
        output_dir.chmod(0o777)  # the sandbox user is not the caller: it must be able to write here
        binds = [_read_only_bind(m) for m in mounts]
        binds.append(DockerMount(target=OUT_DIR, source=str(output_dir), type="bind", read_only=False))
        try:
            container = self._create(command, binds, limits, env or {}, supervised=supervised)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(self._missing_image_message()) from exc
        except ENGINE_ERRORS as exc:
            if isinstance(exc, docker.errors.APIError) and exc.is_client_error():
                raise  # a bad request (e.g. a mount the engine refuses) is ours to see, not "unavailable"
            raise SandboxUnavailable(f"Docker engine failed to create a container: {exc}. {START_HINT}") from exc
        try:
            return DockerProcess(container, self.image, output_dir, limits)
        except BaseException:
            remove_container(container)
            raise

    def start_attached(self, command: list[str], *, limits: Limits = Limits(),
                       env: dict[str, str] | None = None) -> DockerProcess:
        """Start ``command`` with no mounts at all, talking over its stdin and stdout (``process.channel``).

        Nothing of the host is bound into the container (no ``/out`` either), so its mount table names
        no host path but the engine's own files (``/etc/hosts`` and the like, under the engine's data root).
        Inputs travel over stdin; answers come back on stdout and are hostile input (``AttachedChannel``).
        """
        try:
            container = self._create(command, [], limits, env or {}, stdin_open=True)
        except docker.errors.ImageNotFound as exc:
            raise SandboxUnavailable(self._missing_image_message()) from exc
        except ENGINE_ERRORS as exc:
            raise SandboxUnavailable(f"Docker engine failed to create a container: {exc}. {START_HINT}") from exc
        try:
            # attach before start: nothing the command writes first is lost
            raw = self.client.api.attach_socket(container.id, params={"stdin": 1, "stdout": 1, "stream": 1})
            channel = AttachedChannel(raw)
            try:
                return DockerProcess(container, self.image, None, limits, channel=channel)
            except BaseException:
                channel.close()
                raise
        except BaseException:
            remove_container(container)
            raise

    def _create(self, command: list[str], binds: list[DockerMount], limits: Limits, env: dict[str, str],
                stdin_open: bool = False, supervised: bool = False) -> Container:
        memory = f"{limits.memory_mb}m"
        # uid 0 in a container is the host's uid 0 (no user namespace), so only a supervisor gets it, and only
        # with the few capabilities it needs; the rest of the policy (read-only root, no network, caps) is the same.
        user, cap_add = ("0:0", list(SUPERVISOR_CAPS)) if supervised else (SANDBOX_USER, [])
        return self.client.containers.create(
            self.image,
            command,
            name=f"meta-agent-sbx-{uuid.uuid4().hex[:12]}",
            labels=owner_labels(),
            # Never root, whoever the caller is: an unprivileged uid that owns nothing on the host (a supervisor:
            # root with SUPERVISOR_CAPS only, whose untrusted children drop to uids of their own).
            user=user,
            network_mode="none",
            read_only=True,
            tmpfs={"/tmp": f"size={limits.tmpfs_mb}m,mode=1777"},
            mounts=binds,
            working_dir="/tmp",
            environment={"PYTHONDONTWRITEBYTECODE": "1", "HOME": "/tmp", **env},
            mem_limit=memory,
            memswap_limit=memory,  # equal to mem_limit: no swap, so the limit is a hard one
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
            # caps any single file written (notably in the writable /out) so a harness cannot fill the disk
            ulimits=[docker.types.Ulimit(name="fsize", soft=limits.output_mb << 20, hard=limits.output_mb << 20)],
            cap_drop=["ALL"],
            cap_add=cap_add,
            security_opt=["no-new-privileges"],
            log_config=_LOG_CONFIG,
            stdin_open=stdin_open,
        )


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
        if _wait(self.container, max(remaining, 0.1)) is None:
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
                _kill_if_running(self.container)
            exit_code = self.container.wait()["StatusCode"]
            if self.output_dir is not None and not self.output_exceeded:
                # what the last polls missed (a burst between two, a watchdog that stopped): a breach is named
                self.output_exceeded = output_over_limits(self.output_dir, self.limits)
            self.container.reload()
            state = self.container.attrs["State"]
            self._result = SandboxResult(
                exit_code=None if self.timed_out else exit_code,
                stdout=_tail(self.container.logs(stdout=True, stderr=False)),
                stderr=_tail(self.container.logs(stdout=False, stderr=True)),
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
        if _kill_if_running(self.container):
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


def _read_only_bind(mount: Mount) -> DockerMount:
    source = Path(mount.source).resolve()
    if not source.exists():
        raise FileNotFoundError(f"sandbox mount source {source} (for {mount.target}) does not exist")
    if not mount.target.startswith("/") or mount.target.rstrip("/") in ("", OUT_DIR):
        raise ValueError(f"sandbox mount target {mount.target!r} must be an absolute path other than / and {OUT_DIR}")
    return DockerMount(target=mount.target, source=str(source), type="bind", read_only=True)


KILL_EXIT_WAIT_S = 60.0
"""How long a killed container may take to be reported gone after the engine gave up waiting for it."""


def _kill_if_running(container: Container) -> bool:
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
        if (exc.status_code or 0) < 500 or _wait(container, KILL_EXIT_WAIT_S) is None:
            raise
    return True


def _wait(container: Container, timeout_s: float) -> int | None:
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


def _tail(data: bytes) -> str:
    return data[-MAX_OUTPUT_BYTES:].decode("utf-8", errors="replace")
