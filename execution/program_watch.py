"""The code grader supervisor's eyes on one program: its pipes read under deadlines and caps, its end awaited,
its outcome turned into the channel's records (``program_runner.py``, the supervisor, does the rest).

Standard library only; copied into the grading container beside ``program_runner.py``.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import time

MAX_VALUE_CHARS = 1800
"""A returned value's JSON longer than this is not kept (the test is an error: output too large); a record
of the shared channel holds at most 4096 bytes and 2000 characters per field."""
MAX_RECORD_CHARS = 3500
MAX_LINE_BYTES = 4 * MAX_VALUE_CHARS + 512
"""The longest frame the driver writes: a value of MAX_VALUE_CHARS ASCII characters (the driver makes a longer one an
error) escaped once more inside the frame; a longer line is not the driver's."""
MAX_PRINT_BYTES = 1 << 20
"""What a program may print (stdout + stderr) before it is killed for output."""
MAX_RESULT_BYTES = 256 << 10
"""What a program may write to its result pipe before it is killed for output."""
STDERR_KEPT = 400
EVENTS = ("syntax_error", "load_error", "no_function")
"""What ends a program before its tests, reported by its driver after ``ready`` (its set-up done, before any of
the program's code) instead of ``loaded``; before ``ready``, only ``setup_error`` (the runner's failure, not the
program's); ``violation`` (the audit hook's) at any time after ``ready``."""


def _reap(pid: int, until: float) -> int | None:
    """The child's exit code (negative: killed by that signal) once it ended before ``until``, else None.

    A process closes its pipes a moment before it becomes a zombie, so the first look usually finds it still
    ending: the wait blocks on a pidfd (readable once the process has ended) instead of sleeping a fixed step,
    which cost about 5 ms per program.  A kernel without ``pidfd_open`` (before 5.3) gets the old 5 ms polls."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here, or already reaped (waitpid below says so)
        pidfd = None
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            left = until - time.monotonic()
            if left <= 0:
                return None
            if pidfd is None:
                time.sleep(min(0.005, left))
            else:
                select.select([pidfd], [], [], left)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def frame(data: bytes) -> bytes:
    """A message to a program's process (``program_driver.read_frame``): 4 bytes of length, then the bytes."""
    return len(data).to_bytes(4, "little") + data


class _Channel(Exception):
    """The program's process wrote a frame that no step of the exchange asked for."""


def watch(pid: int, print_fd: int, result_fd: int, input_fd: int, inputs: list[bytes], limits: dict,
          started: float) -> dict:
    """Watch one program's process to its end: send its inputs one at a time and take its answers.

    The exchange is framed here, not by the program's process: ``ready`` (its set-up, before any program code),
    then ``loaded`` (or the event that ended it), then for each input, sent only once the last one's answer is in,
    exactly one ``result`` carrying that input's index; the test's clock starts when its input is sent.  Any other
    frame (a second answer, an answer nobody asked for, a line that is no frame) is the program's own writing on
    the channel: it is killed, and no test counts (``violation``).  ``input_fd`` is closed here, whatever happens."""
    per_test, startup = float(limits["per_test_s"]), float(limits["startup_s"])
    n = len(inputs)
    tests: list[dict | None] = [None] * n
    event: dict | None = None
    current, deadline = -1, started + startup
    end_of_life = started + startup + per_test * max(n, 1)
    printed, result_bytes, stderr_head = 0, 0, b""
    killed_for = None
    buffer = b""
    phase = "setup"  # setup -> loading -> testing -> answered; or ended (an event the driver reports last)
    ready = False
    pending = memoryview(b"")
    sel = selectors.DefaultSelector()
    sel.register(print_fd, selectors.EVENT_READ, "out")
    sel.register(result_fd, selectors.EVENT_READ, "res")
    os.set_blocking(input_fd, False)  # a program that stops reading its inputs must not stop the supervisor

    def send() -> None:
        """Write what is left of the current input; the rest waits for the pipe to drain (the selector)."""
        nonlocal pending
        try:
            while pending:
                pending = pending[os.write(input_fd, pending):]
        except BlockingIOError:
            pass
        except OSError:  # it closed its end (or died): nothing more to send, its deadline decides
            pending = memoryview(b"")
        registered = input_fd in sel.get_map()
        if pending and not registered:
            sel.register(input_fd, selectors.EVENT_WRITE, "in")
        elif registered and not pending:
            sel.unregister(input_fd)

    def next_input() -> None:
        nonlocal current, deadline, pending, phase, input_fd
        if current + 1 < n:
            current += 1
            deadline = time.monotonic() + per_test
            pending = memoryview(inputs[current])
            send()
        else:  # every answer is in: its inputs end, and it has one more test's time to end too
            phase = "answered"
            deadline = time.monotonic() + per_test
            if input_fd in sel.get_map():
                sel.unregister(input_fd)
            os.close(input_fd)
            input_fd = -1

    def take(line: bytes) -> None:
        nonlocal event, phase, ready
        if len(line) > MAX_LINE_BYTES:
            raise _Channel(f"a line of {len(line)} bytes")
        record = _record(line)
        kind = record.get("event")
        if phase == "setup":  # only the driver has run: its own first frame, once
            if kind in ("ready", "setup_error"):
                ready = kind == "ready"
                phase = "loading" if ready else "ended"
                event = None if ready else {"kind": kind, "detail": str(record.get("detail", ""))[:300]}
            return
        if kind == "violation" and phase != "ended":  # the audit hook's, as it ends the process
            event, phase = {"kind": kind, "detail": str(record.get("detail", ""))[:300]}, "ended"
        elif phase == "loading" and kind == "loaded":
            phase = "testing"
            next_input()
        elif phase == "loading" and kind in EVENTS:
            event, phase = {"kind": kind, "detail": str(record.get("detail", ""))[:300]}, "ended"
        elif phase == "testing" and kind == "result" and type(record.get("i")) is int and record["i"] == current:
            tests[current] = {"value": record.get("value"), "error": record.get("error")}
            next_input()
        else:
            what = repr(kind[:40]) if isinstance(kind, str) else "a line that is no frame"
            if kind == "result":
                what += f" for input {str(record.get('i'))[:20]}"
            raise _Channel(f"{what} while {phase}" + (f" input {current}" if phase == "testing" else ""))

    try:
        while sel.get_map():
            now = time.monotonic()
            if now > min(deadline, end_of_life):
                killed_for = "timeout"
                break
            for key, _ in sel.select(timeout=min(deadline, end_of_life) - now):
                if key.data == "in":
                    send()
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    continue
                if key.data == "out":
                    printed += len(chunk)
                    if len(stderr_head) < STDERR_KEPT:
                        stderr_head += chunk[:STDERR_KEPT - len(stderr_head)]
                    continue
                result_bytes += len(chunk)
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    take(line)
                if len(buffer) > MAX_LINE_BYTES:
                    raise _Channel(f"a line of more than {MAX_LINE_BYTES} bytes")
            if printed > MAX_PRINT_BYTES or result_bytes > MAX_RESULT_BYTES:
                killed_for = "output_limit"
                break
    except _Channel as exc:
        event = {"kind": "violation", "detail": f"wrote on its result channel: {exc}"[:300]}
        tests = [None] * n  # none of its answers is taken: which ones it wrote itself cannot be told
        kill_group(pid)
    finally:
        if input_fd >= 0:
            os.close(input_fd)
    exit_code = None
    if not killed_for:  # it closed its pipes; it may still be alive (sleeping), so its wait has the same deadline
        exit_code = _reap(pid, min(deadline, end_of_life))
        killed_for = None if exit_code is not None else "timeout"
    if killed_for:
        kill_group(pid)
        exit_code = _reap(pid, time.monotonic() + 5.0)
    sel.close()
    return {"exit": exit_code, "killed_for": killed_for, "current": current, "event": event, "ready": ready,
            "tests": tests, "printed": printed,
            "stderr": stderr_head.decode("utf-8", "replace")}


def _record(line: bytes) -> dict:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError):  # nested past the parser's depth: no frame of the driver's, never our failure
        return {}
    return record if isinstance(record, dict) else {}


def kill_group(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def report(send, outcome: dict) -> None:
    """One ``test`` record per returned value or error, then the ``program`` record, each within the channel's caps."""
    index = outcome["index"]
    for i, test in enumerate(outcome.get("tests") or []):
        if test is None:
            continue
        value, error = test.get("value"), test.get("error")
        if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            value, error = None, "output too large"
        record = {"p": index, "i": i, "value": value if isinstance(value, str) else None,
                  "error": None if error is None else str(error)[:200]}
        if len(json.dumps(record)) > MAX_RECORD_CHARS:
            record.update(value=None, error="output too large")
        send("test", **record)
    if "runner_error" in outcome:
        send("program", p=index, runner_error=outcome["runner_error"])
        return
    event = outcome.get("event") or {}
    send("program", p=index, exit=outcome["exit"], killed_for=outcome["killed_for"], current=outcome["current"],
         event=event.get("kind"), detail=str(event.get("detail") or "")[:300],
         stderr=str(outcome.get("stderr") or "")[:300], duration_s=outcome.get("duration_s"))
