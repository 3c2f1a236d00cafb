"""The reading process's side of one worker: its pipes, its clock, the begin and end of a request."""

from __future__ import annotations

import marshal
import os
import signal
import sys
from pathlib import Path

from .frames import FrameReader, now, recv_frame, send_frame
from .limits import CALL_S_BASE, CALL_S_PER_ITEM, MAX_ERROR_CHARS, MAX_WORKER_BYTES
from .snapshot import BEGIN, END, FRESH_KINDS, snapshot_main, worker_main


class Worker:
    """One forked worker process and its two pipes."""

    def __init__(self, kind: str, root: Path, keep_open: list[int]) -> None:
        to_worker, from_reader = os.pipe()[::-1]
        from_worker, to_reader = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: only its two pipes, stderr, and /dev/null on stdin and stdout
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                os.dup2(2, 1)
                for fd in [to_worker, from_worker, *keep_open]:
                    os.close(fd)
                sys.stdout = sys.stderr
                (snapshot_main if kind in FRESH_KINDS else worker_main)(kind, root, from_reader, to_reader)
            finally:
                os._exit(0)
        os.close(from_reader)
        os.close(to_reader)
        self.kind, self.pid, self.write_fd, self.read_fd = kind, pid, to_worker, from_worker
        os.set_blocking(from_worker, False)  # read on a deadline only (``FrameReader._fill``): this end is the reader's
        self.reader = FrameReader(from_worker)
        self.loaded = False
        self.serving = False  # a request's process is up (``begin``) and not yet ended
        self.failure: str | None = None  # why it could not load the harness at the session's start
        self.allowed, self.deadline = CALL_S_BASE, 0.0  # of the unit last sent (``send``)

    def ready(self) -> None:
        """Wait (once) for the worker's first frame: it loaded the harness, or WorkerDied with the reason why not."""
        if self.failure is not None:  # it failed to load at the session's start (``serve``)
            raise WorkerDied(self.failure)
        if self.loaded:
            return
        try:
            status = recv_frame(self.reader, MAX_WORKER_BYTES, now() + CALL_S_BASE)
        except TimeoutError:
            self.kill()
            raise HarnessHung(f"timed out: the harness's {self.kind} process did not load it within "
                              f"{CALL_S_BASE:.0f}s (hung)") from None
        except (ValueError, EOFError, TypeError) as exc:
            self.kill()
            raise WorkerDied(f"the harness's {self.kind} process answered garbage ({exc})") from None
        if not (isinstance(status, tuple) and len(status) == 2 and status[0] in ("ready", "fatal")):
            raise WorkerDied(f"the harness's {self.kind} process died" if status is None
                             else f"the harness's {self.kind} process answered garbage")
        if status[0] == "fatal":
            raise WorkerDied(str(status[1])[:MAX_ERROR_CHARS])
        self.loaded = True

    def begin(self) -> None:
        """A fresh process from this snapshot for the request that starts (``snapshot_main``); it has loaded
        the harness when this returns (or WorkerDied, HarnessHung)."""
        self.ready()
        send_frame(self.write_fd, BEGIN)
        self.loaded = False
        self.ready()
        self.serving = True

    def end(self) -> None:
        """End the request's process and wait until it is gone (its snapshot says so)."""
        if not self.serving:
            return
        self.serving = False
        try:
            send_frame(self.write_fd, END)
            status = recv_frame(self.reader, MAX_WORKER_BYTES, now() + CALL_S_BASE)
        except TimeoutError:
            self.kill()
            raise HarnessHung(f"timed out: the harness's {self.kind} process did not end within "
                              f"{CALL_S_BASE:.0f}s (hung)") from None
        except (ValueError, EOFError, TypeError, OSError) as exc:
            self.kill()
            raise WorkerDied(f"the harness's {self.kind} process answered garbage ({exc})") from None
        if status != ("ended", None):  # None: the snapshot is gone (harness code killed its parent)
            self.kill()
            raise WorkerDied(f"the harness's {self.kind} process died" if status is None
                             else f"the harness's {self.kind} process answered garbage at its end")

    def call(self, unit: object, size: int, frames: list[bytes] | None = None) -> object:
        """Send one unit (a group, a request's prompts, a diagnose call of ``size`` items) and read its answer on
        its own clock; a unit past its time kills the worker (HarnessHung)."""
        self.send(unit, size, frames)
        return self.answer()

    def send(self, unit: object, size: int, frames: list[bytes] | None = None) -> None:
        """Send one unit, or the ``frames`` that already hold it; its clock starts now.  The caller reads its
        answer (``answer``) before the next.

        A unit goes as marshal version 2, which writes no references: every value arrives as an object of its
        own, so neither the unit's bytes nor which of its values are one object tell how the request that held
        it was encoded (a run of equal prompts in a long request, say).  A diagnose call's views come as the host
        marshalled them (``frames``, their count first): one whole call, cut and built the same whoever makes
        it."""
        self.ready()
        if frames is None:
            send_frame(self.write_fd, marshal.dumps(unit, 2))
        else:
            send_frame(self.write_fd, marshal.dumps(len(frames), 2))
            for frame in frames:
                send_frame(self.write_fd, frame)
        self.allowed = CALL_S_BASE + CALL_S_PER_ITEM * size
        self.deadline = now() + self.allowed

    def answer(self) -> object:
        """The answer to the unit last sent, by that unit's deadline."""
        allowed = self.allowed
        try:
            answer = recv_frame(self.reader, MAX_WORKER_BYTES, self.deadline)
        except TimeoutError:
            self.kill()
            raise HarnessHung(f"timed out: the harness's {self.kind} call did not return within "
                              f"{allowed:.0f}s (hung)") from None
        except (ValueError, EOFError, TypeError) as exc:  # it wrote into its own pipe: out of step for good
            self.kill()
            raise WorkerDied(f"the harness's {self.kind} process answered garbage ({exc})") from None
        if answer is None or answer == ("ended", None):  # gone before answering: its snapshot reported the end
            self.serving = False  # nothing left to end; an END now would reach the snapshot as a request
            raise WorkerDied(f"the harness's {self.kind} process died")
        if not (isinstance(answer, tuple) and len(answer) == 2):
            raise WorkerDied(f"the harness's {self.kind} process answered garbage")
        if answer[0] == "fatal":
            raise WorkerDied(str(answer[1])[:MAX_ERROR_CHARS])
        return answer[1]

    def kill(self) -> None:
        self.serving = False
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


class HarnessHung(Exception):
    pass


class WorkerDied(Exception):
    pass
