"""Read what a sandbox left behind as hostile input: regular files only, bounded, parsed strictly.

A harness shares the sandbox with whatever wrote ``/out``, so a file there may be a
symlink to a host file, a FIFO that never ends, a device, a file the size of the
disk, or JSON built to crash the reader.  Every host-side read of sandbox output
goes through here; anything wrong raises ``UntrustedOutputError`` with a reason that
is shown as the candidate's failure, never as a controller crash or hang.

    data = read_json(out / "status.json", max_bytes=1 << 20)
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

from sandboxes.base import Limits

class UntrustedOutputError(Exception):
    """A sandbox output file is missing, not a regular file, too large or malformed."""


def read_bytes(path: Path, max_bytes: int) -> bytes:
    """The content of ``path`` if it is a regular file of at most ``max_bytes``.

    Opened without following a symlink and without blocking on a FIFO, then checked
    with ``fstat`` on the open descriptor (no race between check and read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise UntrustedOutputError(f"{path.name} is missing") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UntrustedOutputError(f"{path.name} is a symlink; only regular files are read") from exc
        raise UntrustedOutputError(f"{path.name} cannot be opened: {exc.strerror}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedOutputError(f"{path.name} is not a regular file (mode {stat.filemode(info.st_mode)})")
        if info.st_size > max_bytes:
            raise UntrustedOutputError(f"{path.name} has {info.st_size} bytes, over the limit of {max_bytes}")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:  # it grew after fstat (a process still writing)
            raise UntrustedOutputError(f"{path.name} grew past the limit of {max_bytes} bytes while being read")
        return data
    finally:
        os.close(fd)


def parse_json(data: bytes, what: str) -> Any:
    """Strict JSON (no NaN/Infinity) from untrusted bytes; absurd nesting is a RecursionError, caught."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UntrustedOutputError(f"{what} is not UTF-8: {exc}") from exc
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise UntrustedOutputError(f"{what} is not valid JSON: {str(exc)[:200]}") from exc


def read_json(path: Path, max_bytes: int) -> Any:
    """``parse_json(read_bytes(path, max_bytes))``."""
    return parse_json(read_bytes(path, max_bytes), path.name)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def output_over_limits(root: Path, limits: Limits) -> str | None:
    """Why what lies under ``root`` breaks the output limits (symlinks not followed), or None."""
    max_bytes, max_files = limits.output_total_mb << 20, limits.output_files
    total, count = 0, 0
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            count += 1
            if count > max_files:
                return f"more than {max_files} files under /out"
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
            if total > max_bytes:
                return f"more than {limits.output_total_mb} MB written under /out"
    return None
