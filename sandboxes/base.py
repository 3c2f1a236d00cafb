"""The Sandbox seam: run one command over read-only inputs with one writable output folder.

Everything untrusted (harness code) runs behind this protocol.  Callers never
talk to Docker directly.

    sandbox = DockerSandbox()
    result = sandbox.run(
        ["python3", "/in/runner.py"],
        mounts=[Mount(Path("harness"), "/in/harness")],
        output_dir=Path("out"),
        limits=Limits(timeout_s=60),
    )
    if not result.ok: print(result.reason)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class SandboxUnavailable(RuntimeError):
    """No sandbox engine can be reached; the message says how to start one."""


class GraderUnavailable(SandboxUnavailable):
    """A trusted grader could not run its container: the engine failed, not the answer, so nothing was graded.

    Raised instead of scoring the answers 0, which would blame the policy (a lower exam) or the harness
    (a probe's right answers counted as failures) for an infrastructure fault."""


@dataclass(frozen=True)
class Mount:
    """A host path made visible, read-only, at ``target`` inside the sandbox."""

    source: Path
    target: str


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed command."""

    timeout_s: float = 120.0
    """Wall-clock limit; the sandbox is killed and removed past it."""
    memory_mb: int = 1024
    """Hard memory limit (no swap)."""
    cpus: float = 1.0
    """CPU quota in cores."""
    pids: int = 64
    """Maximum number of processes/threads alive at once (fork bombs stop here)."""
    tmpfs_mb: int = 64
    """Size of the writable scratch /tmp; the rest of the filesystem is read-only."""
    output_mb: int = 128
    """Largest file the command may write (in /out or anywhere else); past it the write fails.

    Kept below ``output_total_mb`` so one file at its cap plus the small result files beside it
    fail writes deterministically instead of racing the total-size kill."""
    output_total_mb: int = 256
    """Everything under /out together; past it the sandbox is killed (checked every ~50 ms)."""
    output_files: int = 1000
    """Files and folders under /out together; past it the sandbox is killed."""


@dataclass
class SandboxResult:
    """What happened to one sandboxed command."""

    exit_code: int | None
    """Process exit code; None when it was killed for a timeout."""
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    oom_killed: bool = False
    peak_memory_mb: float | None = None
    output_exceeded: str | None = None
    """Why the sandbox was killed for what it wrote under /out (too many bytes or files), else None."""
    extra: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.oom_killed and not self.output_exceeded

    @property
    def reason(self) -> str:
        """One line saying why the command failed ('' when it did not)."""
        if self.timed_out:
            return f"timed out after {self.duration_s:.1f}s"
        if self.oom_killed:
            return "killed: memory limit exceeded"
        if self.output_exceeded:
            return f"killed: {self.output_exceeded}"
        if self.exit_code != 0:
            tail = (self.stderr.strip().splitlines() or [""])[-1]
            return f"exit code {self.exit_code}: {tail}"[:500]
        return ""


class SandboxProcess(Protocol):
    """A command started with ``Sandbox.start`` and still under the sandbox's limits."""

    def alive(self) -> bool:
        """Whether the command is still running (False once it exited or was killed)."""
        ...

    def stop(self) -> SandboxResult:
        """Kill the command if it still runs, remove its sandbox, and say what happened."""
        ...


class Sandbox(Protocol):
    """Runs commands in isolation: no network, read-only inputs, one writable output folder."""

    def run(
        self,
        command: list[str],
        *,
        mounts: list[Mount],
        output_dir: Path,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
    ) -> SandboxResult:
        """Run ``command``; ``output_dir`` (host) appears at ``/out`` inside, writable."""
        ...

    def start(
        self,
        command: list[str],
        *,
        mounts: list[Mount],
        output_dir: Path,
        limits: Limits = Limits(),
        env: dict[str, str] | None = None,
    ) -> SandboxProcess:
        """Start a long-lived ``command`` (``limits.timeout_s`` bounds its whole life); ``stop()`` it when done."""
        ...

    def start_attached(self, command: list[str], *, limits: Limits = Limits(),
                       env: dict[str, str] | None = None) -> SandboxProcess:
        """Start ``command`` with nothing of the host mounted; it talks over stdin/stdout (``process.channel``)."""
        ...
