"""The Docker implementation of the Sandbox seam (through the ``docker`` SDK).

Each call runs one command in a fresh container and removes it afterwards, come
what may (timeout, exception, Ctrl-C).  The container runs as ``nobody`` with no
network, a read-only root filesystem, read-only inputs, one writable folder
(``/out``, capped in total bytes and files), a small tmpfs ``/tmp``, no
capabilities, and hard memory, CPU, process and wall-time limits.  ``run`` waits
for the command; ``start`` returns a ``DockerProcess`` (``sandboxes.docker_process``) for a long-lived one (the
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

import uuid
from pathlib import Path

import docker
import docker.errors
from docker.models.containers import Container
from docker.types import LogConfig
from docker.types import Mount as DockerMount

from sandboxes.base import Limits, Mount, SandboxResult, SandboxUnavailable
from sandboxes.docker_channel import AttachedChannel, ChannelClosed  # noqa: F401 (ChannelClosed is public here)
from sandboxes.docker_engine import (ENGINE_ERRORS, START_HINT, connect_engine, owner_labels, remove_container,
                                     sweep_once)
from sandboxes.docker_process import MAX_OUTPUT_BYTES, DockerProcess  # noqa: F401 (MAX_OUTPUT_BYTES is public here)
from sandboxes.image import BUILD_HINT, DEFAULT_IMAGE


OUT_DIR = "/out"
SANDBOX_USER = "65534:65534"
"""nobody:nogroup: the sandbox never runs as root, nor as the caller."""
SUPERVISOR_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID")
"""What a trusted supervisor keeps when it starts untrusted code under users of its own (``supervised=True``):
give each child its uid and its folder (SETUID, SETGID, CHOWN), kill it (KILL), remove whatever it left (DAC_OVERRIDE,
FOWNER).  A child that drops to a uid other than 0 loses them all (the kernel clears them on that change)."""
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


def _read_only_bind(mount: Mount) -> DockerMount:
    source = Path(mount.source).resolve()
    if not source.exists():
        raise FileNotFoundError(f"sandbox mount source {source} (for {mount.target}) does not exist")
    if not mount.target.startswith("/") or mount.target.rstrip("/") in ("", OUT_DIR):
        raise ValueError(f"sandbox mount target {mount.target!r} must be an absolute path other than / and {OUT_DIR}")
    return DockerMount(target=mount.target, source=str(source), type="bind", read_only=True)
