"""The trusted parent inside the container (stdlib only; never imports untrusted code).

    python3 -I -B /grader/grader_parent.py /grader/plan.json

Started as the container's first process, it makes itself non-dumpable (so a same-user child
can neither ptrace it, read its memory, nor open its descriptors through ``/proc``), then, for
each run of the plan, starts ``argv`` with a fresh MAC key on one pipe and a record pipe whose
reading end only this process holds.  It checks every record line as it arrives (length, seq,
keyed-BLAKE2b MAC under the ratcheting key, JSON) and prints each accepted one to its stdout, which only it
can write: the host reads nothing else.  What it finds wrong it prints as its own records:

    {"k": "run_start", "run": 0}           {"k": "flag", "layer": "channel", "why": "..."}
    <the child's records, each with "run">  {"k": "run_end", "run": 0, "exit": 0, "done": true}

The child's stdout and stderr go to the container's stderr (diagnostics only).  Bytes on the
record pipe after the child's ``done`` record, a bad MAC, a gap, or an over-long line are all
``channel`` flags: the runner never writes them.
"""

import hashlib
import hmac
import json
import os
import select
import subprocess
import sys
import time

MAX_LINE = 8192
MAX_RECORDS = 20000


def make_undumpable() -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def emit(record: dict) -> None:
    sys.stdout.write(json.dumps(record, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def ratchet(key: bytes) -> bytes:
    return hashlib.blake2b(b"ratchet", key=key, digest_size=32).digest()  # as grader_channel


def run_one(index: int, argv: list, timeout_s: float, emitted: list) -> None:
    key = os.urandom(32)
    key_r, key_w = os.pipe()
    rec_r, rec_w = os.pipe()
    os.write(key_w, key)  # 32 bytes fit the pipe buffer: no deadlock before the child reads
    os.close(key_w)
    emit({"k": "run_start", "run": index})
    child = subprocess.Popen([*argv, str(key_r), str(rec_w)], pass_fds=(key_r, rec_w), stdin=subprocess.DEVNULL,
                             stdout=2, stderr=2, start_new_session=True)
    os.close(key_r)
    os.close(rec_w)
    deadline = time.monotonic() + timeout_s
    seq, done, buffer, flags = 0, False, b"", 0

    def flag(why: str) -> None:
        nonlocal flags
        flags += 1
        if flags <= 20:
            emit({"k": "flag", "layer": "channel", "run": index, "why": why[:300]})

    exited_at = None
    while True:
        if exited_at is None and child.poll() is not None:
            exited_at = time.monotonic()
        if time.monotonic() > deadline and exited_at is None:
            child.kill()
            continue
        ready, _, _ = select.select([rec_r], [], [], 0.2)
        if not ready:
            if exited_at is not None and time.monotonic() - exited_at > 1.0:
                break  # the runner is gone and nothing more came: a left-over writer does not hold us
            continue
        chunk = os.read(rec_r, 65536)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if done:
                flag(f"{len(line)} bytes on the record pipe after the runner's done record")
                continue
            parts = line.split(b" ", 2)
            if len(line) > MAX_LINE or len(parts) != 3 or not parts[0].isdigit():
                flag(f"malformed record line ({len(line)} bytes)")
                continue
            if int(parts[0]) != seq:
                flag(f"record {int(parts[0])} where {seq} was due (a record was dropped or replayed)")
                continue
            expect = hashlib.blake2b(b"%d " % seq + parts[2], key=key, digest_size=32).hexdigest().encode()
            if not hmac.compare_digest(expect, parts[1]):
                flag(f"record {seq} carries a wrong MAC: not written by the runner")
                continue
            key, seq = ratchet(key), seq + 1
            try:
                record = json.loads(parts[2])
            except ValueError:
                flag(f"record {seq - 1} is not JSON")
                continue
            if not isinstance(record, dict) or not isinstance(record.get("k"), str):
                flag(f"record {seq - 1} has no kind")
                continue
            done = record["k"] == "done"
            if len(emitted) < MAX_RECORDS:
                emitted.append(1)
                emit({**record, "run": index})
        if len(buffer) > MAX_LINE:
            flag("an over-long line on the record pipe")
            buffer = b""
    os.close(rec_r)
    if buffer:
        flag(f"{len(buffer)} bytes without a newline at the end of the record pipe")
    try:
        code = child.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        child.kill()
        code = child.wait()
    try:
        os.killpg(child.pid, 9)  # anything the run left behind (its session) does not outlive it
    except OSError:
        pass
    emit({"k": "run_end", "run": index, "exit": code, "done": done})


def main() -> None:
    with open(sys.argv[1]) as f:
        plan = json.load(f)
    make_undumpable()
    emitted: list = []
    for index, run in enumerate(plan["runs"]):
        run_one(index, run["argv"], float(plan.get("run_timeout_s", 600)), emitted)
    emit({"k": "end"})


main()
