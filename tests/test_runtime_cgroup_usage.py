"""A sandbox's CPU time, processes and memory peak from its cgroup files, against the engine's own stats.

    .venv/bin/python -m pytest -q tests/test_runtime_cgroup_usage.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sandboxes.base import Limits
from sandboxes.cgroup_usage import find_cgroup

BURN = "import sys\nx = bytearray(40 << 20)\nsum(range(3_000_000))\nprint('ready', flush=True)\nsys.stdin.read()\n"


@pytest.mark.docker
def test_usage_from_the_cgroup_matches_the_engines_stats(docker_sandbox):
    process = docker_sandbox.start_attached(["python3", "-c", BURN], limits=Limits(timeout_s=60))
    try:
        assert process.channel.read_line(100, deadline=_in(30)) == b"ready"
        assert process._cgroup is not None, "this host's engine is local: its cgroup files must be found"
        engine = process.container.stats(stream=False, one_shot=True)
        engine_cpu_s = engine["cpu_stats"]["cpu_usage"]["total_usage"] / 1e9
        usage = process.usage()
        # the process is idle on stdin: its CPU time no longer moves
        assert usage["cpu_s"] == pytest.approx(engine_cpu_s, abs=0.02) and usage["cpu_s"] > 0.05
        assert usage["pids"] == engine["pids_stats"]["current"] == 1
        assert process._cgroup.memory_peak() >= 40 << 20
    finally:
        result = process.stop()
    assert result.peak_memory_mb is not None and result.peak_memory_mb >= 40


def test_an_unknown_or_crafted_container_id_has_no_cgroup(tmp_path: Path):
    """Anything but a plain id of a container with counters falls back to the engine's stats (None here)."""
    (tmp_path / "cpuacct" / "docker" / "x").mkdir(parents=True)  # a folder without a cgroup's files
    assert find_cgroup("0" * 64) is None
    for crafted in ("", "../../..", ".", "a/b"):
        assert find_cgroup(crafted, root=tmp_path) is None
    assert find_cgroup("x", root=tmp_path) is None


def _in(seconds: float) -> float:
    import time
    return time.monotonic() + seconds


def test_the_cgroup_v2_layout_is_read_too(tmp_path: Path):
    """The systemd driver's layout under cgroup v2 (this host runs v1; CI machines may not)."""
    folder = tmp_path / "system.slice" / f"docker-{'ab' * 32}.scope"
    folder.mkdir(parents=True)
    (folder / "cpu.stat").write_text("usage_usec 1500000\nuser_usec 1000000\nsystem_usec 500000\n")
    (folder / "pids.current").write_text("3\n")
    (folder / "memory.current").write_text("1048576\n")
    cgroup = find_cgroup("ab" * 32, root=tmp_path)
    assert cgroup is not None and cgroup.v2
    assert (cgroup.cpu_s(), cgroup.pids(), cgroup.memory_peak()) == (1.5, 3, 1 << 20)
    (folder / "memory.peak").write_text("2097152\n")  # the high-water mark, where the kernel keeps one
    assert cgroup.memory_peak() == 2 << 20
