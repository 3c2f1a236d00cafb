"""A local container's CPU time, process count and memory high-water mark, read from its cgroup files.

The engine's stats call (``container.stats(stream=False)``) costs 0.3-1 s of the engine's time
per call on a small machine: closing a harness session asked it twice, which was most of a
10,000-trajectory backtest's wall time, and the watchdog's memory samples kept the engine busy
beside the container.  The kernel keeps the same figures in the container's cgroup, which a
process on the engine's host reads in microseconds.  Where the engine is remote or its cgroup
layout is not one of these (``find_cgroup`` returns None), callers fall back to the engine's stats.

The figures are the kernel's own accounting of the container (nothing inside it can write them).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class ContainerCgroup:
    """Where one container's counters live: cgroup v1 (one folder per controller) or v2 (one folder)."""

    cpu_dir: Path
    pids_dir: Path
    memory_dir: Path
    v2: bool

    def cpu_s(self) -> float | None:
        """CPU seconds used so far by every process the container ran (exited ones too)."""
        if self.v2:
            for line in _read(self.cpu_dir / "cpu.stat").splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec":
                    return int(value) / 1e6
            return None
        text = _read(self.cpu_dir / "cpuacct.usage")
        return int(text) / 1e9 if text else None

    def pids(self) -> int | None:
        text = _read(self.pids_dir / "pids.current")
        return int(text) if text else None

    def memory_peak(self) -> int | None:
        """Bytes: the high-water mark where the kernel keeps one, else the current usage."""
        names = ("memory.peak", "memory.current") if self.v2 else ("memory.max_usage_in_bytes",)
        for name in names:
            text = _read(self.memory_dir / name)
            if text:
                return int(text)
        return None


def find_cgroup(container_id: str, root: Path = CGROUP_ROOT) -> ContainerCgroup | None:
    """The cgroup of a running container of the local engine (cgroupfs or systemd driver), or None."""
    if not container_id or "/" in container_id or container_id.startswith("."):
        return None
    v1 = [root / controller / "docker" / container_id for controller in ("cpuacct", "pids", "memory")]
    if all((folder / "tasks").is_file() for folder in v1):
        return ContainerCgroup(*v1, v2=False)
    for folder in (root / "system.slice" / f"docker-{container_id}.scope", root / "docker" / container_id):
        if (folder / "cpu.stat").is_file():
            return ContainerCgroup(folder, folder, folder, v2=True)
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):  # the container exited (its cgroup is gone) or the file is not there
        return ""
