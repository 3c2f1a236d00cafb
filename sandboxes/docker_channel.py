"""The stdin/stdout channel of one attached sandbox container, demultiplexed from the engine's stream.

What it returns is the sandbox's output: callers parse it as hostile input.
"""

from __future__ import annotations

import socket
import time


class ChannelClosed(Exception):
    """The attached command's stdout ended (it exited or was killed) or the engine dropped the stream."""


class AttachedChannel:
    """The stdin/stdout of one attached container, as the engine multiplexes it (no TTY).

    ``send`` writes bytes to the command's stdin.  ``read(n, deadline)`` returns exactly ``n`` bytes of
    its stdout, or raises ``ChannelClosed`` when the stream ends and ``TimeoutError`` past ``deadline``
    (``time.monotonic()``).  What it returns is the sandbox's output: callers parse it as hostile.
    """

    HEADER = 8
    """The engine's frame header: stream type (1 = stdout), three zero bytes, big-endian payload length."""

    def __init__(self, raw: object) -> None:
        self._raw = raw
        sock = getattr(raw, "_sock", raw)
        self._sock: socket.socket = sock
        self._buffer = bytearray()  # stdout payload bytes received and not yet read
        self._frame_left = 0  # payload bytes of the current engine frame still to come
        self._frame_type = 1
        self._pending = bytearray()  # raw socket bytes not yet parsed

    def send(self, data: bytes) -> None:
        self._sock.settimeout(None)
        self._sock.sendall(data)

    def read(self, n: int, deadline: float) -> bytes:
        while len(self._buffer) < n:
            self._fill(deadline)
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out

    def read_line(self, limit: int, deadline: float) -> bytes:
        """Bytes up to (not including) the next newline; more than ``limit`` before it raises ValueError."""
        while True:
            end = self._buffer.find(b"\n", 0, limit + 1)
            if end >= 0:
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                return line
            if len(self._buffer) > limit:
                raise ValueError(f"no line end within {limit} bytes")
            self._fill(deadline)

    def _fill(self, deadline: float) -> None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no answer in time")
        self._sock.settimeout(left)
        try:
            chunk = self._sock.recv(1 << 20)
        except socket.timeout as exc:
            raise TimeoutError("no answer in time") from exc
        except OSError as exc:
            raise ChannelClosed(f"the stream broke: {exc}") from exc
        if not chunk:
            raise ChannelClosed("the command's output ended")
        self._pending += chunk
        self._demultiplex()

    def _demultiplex(self) -> None:
        pending = self._pending
        while pending:
            if self._frame_left == 0:
                if len(pending) < self.HEADER:
                    return
                self._frame_type = pending[0]
                self._frame_left = int.from_bytes(pending[4:8], "big")
                del pending[:self.HEADER]
                continue
            take = min(self._frame_left, len(pending))
            if self._frame_type == 1:  # stdout; stderr goes to the logs, not here
                self._buffer += pending[:take]
            del pending[:take]
            self._frame_left -= take

    def close(self) -> None:
        for closer in (getattr(self._raw, "close", None), self._sock.close):
            try:
                if closer is not None:
                    closer()
            except OSError:
                pass
