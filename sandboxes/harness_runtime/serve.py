"""The reading process: requests in on stdin, answers out on stdout; harness code never runs here."""

from __future__ import annotations

import collections
import gc
import itertools
import json
import marshal
import math
import os
import select
import signal
import sys
import traceback
from pathlib import Path

from .frames import FrameReader, now, send_frame
from .harness import short_error, views_of
from .limits import MAX_REQUEST_BYTES, SCORE_LANES
from .sweep import Snapshot, sweep
from .workers import HarnessHung, Worker, WorkerDied


def _undumpable() -> None:
    """Close this process to its children (same uid): no /proc/<pid>/mem, fd, environ for harness code."""
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


def decode_columns(encoded: dict[str, dict], decoded: dict[str, list] | None = None) -> dict[str, list]:
    """The plain columns of ``harness_client.encode_views``'s encoding."""
    decoded = {} if decoded is None else decoded
    out: dict[str, list] = {}
    for key, column in encoded.items():
        if "same" in column:
            out[key] = list((decoded | out)[column["same"]])  # this level overrides an outer name
        elif "runs" in column:
            out[key] = list(itertools.chain.from_iterable(itertools.repeat(v, n) for v, n in column["runs"]))
        elif "dicts" in column:
            sub = decode_columns(column["dicts"], decoded | out)
            names = list(sub)
            out[key] = [dict(zip(names, values)) for values in zip(*sub.values())]
        else:
            out[key] = column["values"]
    return out


def score(lanes: Lanes, request: dict) -> dict:
    views = views_of(marshal.loads(request["frames"][0]))
    n = len(views)
    groups: list[list[int]] = []
    start = 0
    for size in request["batches"]:
        by_group: dict[str, list[int]] = {}
        for i in range(start, start + size):
            by_group.setdefault(views[i]["group_id"], []).append(i)
        groups.extend(by_group.values())
        start += size
    if start != n:
        raise ValueError(f"batches cover {start} views of {n}")
    rewards, infos, keeps, errors = [None] * n, [None] * n, [False] * n, [None] * n
    truncated = [bool(v.get("truncated")) for v in views] if request.get("mask_truncated") else None
    dynamic = bool(request.get("dynamic_sampling"))

    def scored(members: list[int], rows: object) -> None:
        if type(rows) is not list or len(rows) != len(members):
            raise WorkerDied("the harness's score process answered the wrong number of trajectories")
        for i, row in zip(members, rows):
            if not (isinstance(row, (list, tuple)) and len(row) == 4):
                raise WorkerDied("the harness's score process answered garbage")
            rewards[i], infos[i], keeps[i], errors[i] = row[0], row[1], bool(row[2]), row[3]
        _drop(members, truncated, dynamic, rewards, keeps, errors)

    lanes.run(groups, views, scored)
    return {"reward": rewards, "info": infos, "keep": keeps, "error": errors}


class Lanes:
    """The score workers, and how many groups this session has sent them (across requests)."""

    def __init__(self, workers: list[Worker]) -> None:
        self.workers = workers
        self.sent = 0

    def ready(self) -> None:
        for worker in self.workers:
            worker.ready()

    def run(self, groups: list[list[int]], views: list[dict], scored) -> None:
        """Score ``groups`` (indices into ``views``) and hand each answer to ``scored(members, rows)``.

        The session's k-th group goes to worker k mod ``SCORE_LANES``, one group per message, and a worker is
        sent its next only once it has answered: nothing queued in its pipe or its memory tells harness code how
        many groups its caller sent at once.  The lanes do not wait for one another: whichever answers first gets
        its own next group (which groups a lane sees, and in what order, stays fixed by k), so one lane that a
        busy machine leaves waiting for a CPU does not hold the others' next groups back.

        This loop runs once per group (25,000 times per 100,000 trajectories), so it does the least it can: one
        ``poll`` over the lanes in flight, one read of the answer it announced, one gathered write of the next."""
        lanes = len(self.workers)
        queues = [collections.deque(groups[(j - self.sent) % lanes::lanes]) for j in range(lanes)]
        self.sent += len(groups)
        for worker in self.workers if groups else ():  # every lane, whatever the request's size: how many
            worker.begin()  # processes are up does not tell it
        in_flight: dict[int, tuple[list[int], Worker, int]] = {}
        poller = select.poll()

        def next_of(lane: int) -> None:
            queue = queues[lane]
            if queue:
                members, worker = queue.popleft(), self.workers[lane]
                worker.send([views[i] for i in members], len(members))
                in_flight[worker.read_fd] = (members, worker, lane)
                poller.register(worker.read_fd, select.POLLIN)

        for lane in range(lanes):
            next_of(lane)
        while in_flight:
            left = min(entry[1].deadline for entry in in_flight.values()) - now()
            # POLLHUP too (a worker gone): its read ends the pipe, and ``answer`` says it died
            ready = [fd for fd, _ in poller.poll(left * 1000.0)] if left > 0 else []
            if not ready:  # the one past its clock fails as hung (``answer``); the others wait on theirs
                ready = [min(in_flight, key=lambda fd: in_flight[fd][1].deadline)]
            for fd in ready:
                members, worker, lane = in_flight.pop(fd)
                poller.unregister(fd)
                scored(members, worker.answer())
                next_of(lane)
        for worker in self.workers:
            worker.end()


def _drop(members: list[int], truncated: list[bool] | None, dynamic: bool, rewards: list, keeps: list,
          errors: list) -> None:
    """The runtime's own rules after the harness's filters: truncation mask, dynamic sampling, errors."""
    if truncated is not None:
        for i in members:
            keeps[i] = keeps[i] and not truncated[i]
    if dynamic and len({rewards[i] for i in members if keeps[i]}) <= 1:
        for i in members:
            keeps[i] = False
    for i in members:
        if errors[i] is not None:
            keeps[i] = False  # a trajectory the harness could not judge never trains


def handle(workers: dict[str, Worker], lanes: Lanes, request: dict) -> dict:
    op = request.get("op")
    if op == "render":
        # the harness's Python never runs in the render process; its import still fails the request as before
        lanes.ready()
        items = request["items"]
        prompts = workers["render"].call(items, len(items))
        if not isinstance(prompts, list) or len(prompts) != len(items):
            raise WorkerDied("the harness's render process answered the wrong number of prompts")
        return {"prompts": prompts}
    if op == "score":
        return score(lanes, request)
    if op == "diagnose":
        workers["diagnose"].begin()
        # the request's process starts once every chunk is here: when they came cannot be seen from it
        findings = workers["diagnose"].call(None, int(request["count"]), request["frames"])
        workers["diagnose"].end()
        for f in findings:
            if not math.isfinite(float(f["rate"])):
                f.update(name=f"{f['diagnostic'].removesuffix('.py')}:crashed", severity="error", rate=1.0,
                         message=f"finding {f['name']!r} has a rate that is not finite")
        return {"findings": findings}
    return {"fatal": f"unknown operation {op!r}"}


def _end_request(forked: list[Worker], keep: set[int], snapshot: Snapshot | None) -> str | None:
    """End every request process still up (a request that failed half way), then ``sweep``; why the session is
    dead now, or None."""
    why = None
    for worker in forked:
        try:
            worker.end()
        except (HarnessHung, WorkerDied) as exc:
            why = why or str(exc)
    sweep(keep, snapshot)
    return why


def serve(root: Path) -> int:
    # Harness code printing to stdout must not mix with the answers: it all goes to stderr (the logs).
    sys.stdout = sys.stderr
    if os.getpid() == 1:  # init ignores, from inside its namespace, every signal it has no handler for: drop
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # Python's, or harness code could end it (KeyboardInterrupt)
    try:
        _undumpable()
    except Exception as exc:  # without prctl the workers could read this process: refuse to serve
        print(f"runtime: cannot make the reader undumpable: {exc}", file=sys.stderr)
        return 2
    # before any harness code runs: what every request starts from.  Only as the container's init (pid 1, as
    # ``BOOTSTRAP`` runs it): anywhere else the sweep would kill and delete what is not the runtime's
    snapshot = Snapshot() if os.getpid() == 1 else None
    forked: list[Worker] = []
    for kind in ("render", *["score"] * SCORE_LANES, "diagnose"):
        forked.append(Worker(kind, root, [fd for w in forked for fd in (w.write_fd, w.read_fd)]))
    workers = {w.kind: w for w in forked if w.kind != "score"}
    lanes = Lanes([w for w in forked if w.kind == "score"])
    keep = {w.pid for w in forked}
    dead: str | None = None
    for worker in forked:  # each snapshot loads the harness once, in a throwaway process; what that left goes
        try:  # before request 1.  A worker that cannot load fails the requests that need it (``Worker.ready``)
            worker.ready()
        except (HarnessHung, WorkerDied) as exc:
            worker.failure = str(exc)
    sweep(keep, snapshot)
    # This process runs no harness code (the workers, forked above, keep their collector) and keeps nothing past
    # a request but its workers; its data is plain (JSON in, marshal to and from the workers, JSON out) and
    # freed by reference counts, so the cyclic collector would only walk each request's views again and again.
    gc.disable()
    requests = FrameReader(0)
    while True:
        data = requests.frame(MAX_REQUEST_BYTES)
        if data is None:
            return 0
        request = json.loads(data)
        if not isinstance(request, dict) or request.get("op") == "stop":
            return 0
        if request.get("op") in ("diagnose", "score"):  # its views follow in frames of their own (the docstring)
            request["frames"] = [requests.frame(MAX_REQUEST_BYTES) for _ in range(int(request.get("chunks", 1)))]
            if None in request["frames"]:
                return 0
        if dead is not None:
            answer = {"fatal": dead}
        else:
            try:
                answer = handle(workers, lanes, request)
            except (HarnessHung, WorkerDied) as exc:
                dead = str(exc)  # a worker that hung, died or failed to import fails every later request
                answer = {"fatal": dead}
            except Exception as exc:
                answer = {"fatal": f"{request.get('op')}: {short_error(exc)}",
                          "traceback": traceback.format_exc()[-4000:]}
            if request.get("op") in ("score", "diagnose"):  # the next request starts from the snapshot
                dead = _end_request(forked, keep, snapshot) or dead
                if dead is not None and "fatal" not in answer:
                    answer = {"fatal": dead}
        try:
            data = json.dumps(answer, allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            data = json.dumps({"fatal": f"{request.get('op')}: the answer is not JSON: {short_error(exc)}"}).encode()
        send_frame(1, data)


def main(argv: list[str]) -> int:
    """The container's entry (``LAUNCHER``, run as ``/tmp/rt/runtime.py HARNESS_DIR``)."""
    if len(argv) != 2:
        raise SystemExit("usage: runtime.py HARNESS_DIR (started by BOOTSTRAP)")
    os.umask(0o022)
    return serve(Path(argv[1]))
