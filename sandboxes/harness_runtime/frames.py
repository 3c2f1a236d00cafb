"""Length-framed messages on pipes: ``<n>\\n`` then n bytes, written in one gathered write, read in large chunks."""

from __future__ import annotations

import marshal
import os
import select
from time import monotonic as now

from .limits import READ_BYTES


def send_frame(fd: int, data: bytes) -> None:
    header = b"%d\n" % len(data)
    # one gathered write: no copy of ``data`` behind its header (a group's answer or unit, ~25,000 a second)
    done = os.writev(fd, [header, data])
    while done < len(header):  # a pipe took part of a large frame: the rest as it drains, never copied whole
        done += os.writev(fd, [header[done:], data])
    view = memoryview(data)[done - len(header):]
    while view:
        view = view[os.write(fd, view):]


class FrameReader:
    """Length-framed messages (``<n>\\n`` then n bytes) from one descriptor, read in large chunks."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = bytearray()

    def _fill(self, deadline: float | None) -> bool:
        if deadline is not None:
            try:  # an answer already waiting (the other lane's, read while this one worked) needs no select
                chunk = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                left = deadline - now()
                if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                    raise TimeoutError from None
                chunk = os.read(self.fd, READ_BYTES)
            self.buffer += chunk
            return bool(chunk)
        chunk = os.read(self.fd, READ_BYTES)
        self.buffer += chunk
        return bool(chunk)

    def frame(self, limit: int, deadline: float | None = None) -> bytes | None:
        """The next message's bytes; None when the descriptor ended first."""
        while (end := self.buffer.find(b"\n", 0, 13)) < 0:
            if len(self.buffer) > 12:
                raise ValueError("malformed frame header")
            if not self._fill(deadline):
                return None
        n = int(self.buffer[:end])
        if n > limit:
            raise ValueError(f"a frame of {n} bytes is over the limit of {limit}")
        while len(self.buffer) < end + 1 + n:
            if not self._fill(deadline):
                return None
        data = bytes(self.buffer[end + 1:end + 1 + n])
        del self.buffer[:end + 1 + n]
        return data


def recv_frame(reader: FrameReader, limit: int, deadline: float | None = None) -> object | None:
    data = reader.frame(limit, deadline)
    return None if data is None else marshal.loads(data)

