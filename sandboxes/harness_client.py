"""The host side of the harness runtime: start it in a sandbox, send it batches, trust nothing it answers.

The backtest, the local backend and verl's reward entry all use this one client, so
harness code always runs the same way: in ``sandboxes/harness_runtime/`` (a package), inside
a container with no network and no host mount, as ``nobody``, under memory/pids/time limits.

    with HarnessSession(sandbox, exported_harness_dir) as harness:
        prompts = harness.render([{"question": "2+3?", "task": {...}}])
        scored = harness.score([trajectory_view(row) for row in rows], reward_range=(0.0, 1.0))
        scored = harness.score_batches(batches_of_views, reward_range=(0.0, 1.0))  # many batches per request
        findings = harness.diagnose(views_with_reward_and_keep)

Requests and answers travel over the container's stdin and stdout as length-framed
JSON (views in columns, ``sandboxes.harness_wire``; a diagnose call's views follow its request
as marshal frames of ``DIAGNOSE_CHUNK`` views, which a caller may send as it has them:
``sandboxes.harness_wire_stream``).  Every answer is bounded, parsed strictly
(``sandboxes.untrusted.parse_json``: no NaN) and checked entry by entry (``sandboxes.harness_answers``).
A whole-harness failure (import error, a dead or hung process, a malformed answer) raises
``HarnessFailed`` with the reason; a trajectory the harness could not judge comes back with ``error`` set.
The views harness code sees are built in ``sandboxes.harness_views``; every name of those three
modules that was importable from here still is.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import tarfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NoReturn

from sandboxes import (harness_answers, harness_runtime, harness_views, harness_wire, harness_wire_ids,
                       harness_wire_stream)
from sandboxes.base import Limits, Sandbox, SandboxProcess
from sandboxes.docker import ChannelClosed
# the checks of answers, the views and their encoding live in their own modules; their names stay importable here
from sandboxes.harness_answers import (FLOAT32_MAX, MAX_ERROR_CHARS, MAX_PROMPT_CHARS, SEVERITIES,  # noqa: F401
                                       HarnessFailed, Scored, answer_list, checked_finding, checked_messages,
                                       reward_problem, scored_columns)
from sandboxes.harness_views import (HIDDEN_FROM_HARNESS, VIEW_KEYS, batches, harness_visible,  # noqa: F401
                                     trajectory_view)
from sandboxes.harness_wire import collector_paused, encode_views, views_frame  # noqa: F401
from sandboxes.harness_wire_ids import OpaqueIds
from sandboxes.harness_wire_stream import DIAGNOSE_CHUNK, DiagnoseStream, view_chars  # noqa: F401
from sandboxes.untrusted import UntrustedOutputError, parse_json

log = logging.getLogger(__name__)

RUNTIME_FILE = harness_runtime.PACKAGE
"""The runtime that travels into the container: the package's folder (or, in tests, one ``runtime.py``)."""
RUNTIME_ID = f"v{harness_runtime.RUNTIME_VERSION}-" + hashlib.sha256(b"".join(
    [path.read_bytes() for path in sorted(RUNTIME_FILE.glob("*.py"))]
    + [Path(m.__file__).read_bytes() for m in (harness_answers, harness_views, harness_wire, harness_wire_ids,
                                               harness_wire_stream)])
    + harness_runtime.LAUNCHER.encode() + Path(__file__).read_bytes()).hexdigest()[:8]
"""Names the runtime's code and the host's views, encoding and checks: caches of harness outputs are keyed by it."""
MAX_ANSWER_BYTES = 256 << 20
MAX_HARNESS_BYTES = 32 << 20
REQUEST_VIEWS = 16_384
"""Trajectories per score request (whole batches; a bigger batch travels alone), fewer where their responses and
prompts would take the request past the runtime's frame limit (``MAX_REQUEST_BYTES``: 16,384 SWE responses of 64 KB
are a GiB)."""
VIEW_OVERHEAD_BYTES = 4096
"""What a view takes in a score frame beside its response and prompt (ids, task, ground truth), at most."""
REQUEST_PROMPTS = 16_384
"""Items per render request."""
REQUEST_S_BASE = 30.0
REQUEST_S_PER_ITEM = 0.06
"""A request of n trajectories (or prompts) may take 30 s + 60 ms * n, at most ``request_timeout_s``."""
HARNESS_LIMITS = Limits(timeout_s=4 * 3600, memory_mb=1024, pids=64, tmpfs_mb=64,
                        cpus=float(min(harness_runtime.SCORE_LANES, os.cpu_count() or 1)))
"""The one container every harness session gets, whoever the caller: what harness code can read of it
(cgroup memory and CPU, pids.max, /tmp's size) must not tell a backtest from training.  A CPU per score lane
(``harness_runtime.SCORE_LANES``), where the machine has them: the lanes score two groups at once."""
_OBSERVABLE = (HARNESS_LIMITS.memory_mb, HARNESS_LIMITS.cpus, HARNESS_LIMITS.pids, HARNESS_LIMITS.tmpfs_mb)
DIAGNOSE_BYTES_PER_VIEW = 4096
DIAGNOSE_BYTES_PER_CHAR = 8
"""What a diagnose-only session's memory grows by, beyond ``HARNESS_LIMITS``'s, per view and per character of
its prompt and response: the views travel and decode whole inside the runtime.  Measured with the session's
``peak_memory_mb`` (100,000 math views of 590 bytes of JSON each: 467 MB; with responses ten times as long:
981 MB), with room to spare; the one fixed limit capped the rounds a run could diagnose (a 250,000-trajectory
backtest died there)."""


def diagnose_memory_mb(views: list[dict]) -> int:
    """The memory of a session that serves one diagnose call over ``views``: ``HARNESS_LIMITS``'s and what the
    views need.  A function of what the diagnostics see anyway, so it tells them nothing about the caller."""
    chars = view_chars(views)
    return HARNESS_LIMITS.memory_mb + -(-(len(views) * DIAGNOSE_BYTES_PER_VIEW + chars * DIAGNOSE_BYTES_PER_CHAR)
                                        // 2**20)


@dataclass
class HarnessSession:
    """A long-lived harness runtime in one sandbox for one exported harness commit.

    The runtime and the harness files travel into the container over its stdin (nothing of the host
    is mounted); requests and answers then travel over its stdin and stdout.  Every caller gets the
    same container (``HARNESS_LIMITS``) and the same call shapes inside it, so harness code cannot
    tell a backtest from training by what it can observe.
    """

    sandbox: Sandbox
    harness_dir: Path
    limits: Limits = field(default_factory=lambda: Limits(timeout_s=4 * 3600))
    """Only ``timeout_s`` (the session's whole life, invisible inside) is taken from here; memory, CPU,
    processes and scratch space are always ``HARNESS_LIMITS``'s, which harness code could read."""
    request_timeout_s: float = 300.0
    """The most one request may take; below it, a request gets ``REQUEST_S_BASE`` plus
    ``REQUEST_S_PER_ITEM`` per trajectory or prompt it carries."""
    summary: dict = field(default_factory=dict)
    """What the sandbox saw (exit, duration, limits hit, stderr tail), once closed."""
    runtime_file: Path = RUNTIME_FILE
    """The runtime streamed into the container (tests give a hostile one to check the host's reading)."""
    diagnose_memory_mb: int | None = None
    """Set for a session that serves one diagnose call and nothing else, to :func:`diagnose_memory_mb` of that
    call's views (which ``diagnose`` checks): its container's memory.  Every other session has
    ``HARNESS_LIMITS``'s."""
    _process: SandboxProcess | None = None
    _ids: OpaqueIds = field(default_factory=OpaqueIds, init=False, repr=False)
    """Opaque ids, drawn per request: harness code never sees a run, round, step or group index (issue 45)."""

    def __enter__(self) -> HarnessSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if (self.limits.memory_mb, self.limits.cpus, self.limits.pids, self.limits.tmpfs_mb) != _OBSERVABLE:
            log.debug("harness session: memory/cpus/pids/tmpfs of %s ignored; every session gets %s",
                      self.limits, HARNESS_LIMITS)
        payload = _bundle(Path(self.runtime_file), Path(self.harness_dir))
        limits = replace(HARNESS_LIMITS, timeout_s=self.limits.timeout_s,
                         memory_mb=self.diagnose_memory_mb or HARNESS_LIMITS.memory_mb)
        self._process = self.sandbox.start_attached(["python3", "-c", harness_runtime.BOOTSTRAP], limits=limits)
        try:
            self._process.channel.send(b"%d\n" % len(payload) + payload)
        except OSError as exc:
            self._fail(f"the harness runtime did not take its files: {exc}")

    def close(self) -> dict:
        """Stop the runtime and remove its sandbox; a summary of what the sandbox saw (also kept in ``summary``)."""
        if self._process is not None:
            # the container's CPU time while it still runs (after the stop request it may be gone): the gate
            # compares a candidate's with main's (meta_agent.judge.cpu_cost)
            measure = getattr(self._process, "usage", None)
            usage = measure() if measure is not None else {"cpu_s": None, "pids": None}
            cpu_s = usage["cpu_s"]
            try:
                self._process.channel.send(_frame({"op": "stop"}))
            except OSError:
                pass
            # stop() kills it if the runtime has not exited yet (exit 137): quicker than waiting for it
            result = self._process.stop()
            self.summary = {"exit_code": result.exit_code, "duration_s": round(result.duration_s, 3),
                            "timed_out": result.timed_out, "oom_killed": result.oom_killed,
                            "output_exceeded": result.output_exceeded, "peak_memory_mb": result.peak_memory_mb,
                            "cpu_s": cpu_s if cpu_s is not None else result.extra.get("cpu_s"),
                            "pids_at_close": usage["pids"],
                            "stderr_tail": result.stderr[-2000:]}
            self._process = None
        return self.summary

    # -- operations

    def render(self, items: list[dict]) -> list[list[dict] | str]:
        """Per item ``{"question", "task"}``: the chat messages, or the rendering error as text.

        At most ``REQUEST_PROMPTS`` items per request: the runtime holds a request and its answer whole, and
        250,000 tasks in one overran its memory (``bench/bench_backtest.py --groups 250000``).  Templates see
        nothing but their variables, so how the items travel cannot be seen from harness code."""
        chunks = [items[start:start + REQUEST_PROMPTS] for start in range(0, len(items) or 1, REQUEST_PROMPTS)]
        out: list[list[dict] | str] = []
        answers = self._exchange(len(chunks), lambda i: ({"op": "render", "items": chunks[i]}, len(chunks[i])))
        with closing(answers):  # a bad answer closes it now (``_exchange``), not when the traceback goes
            for chunk, answer in zip(chunks, answers):
                out += [checked_messages(p) for p in answer_list(answer, "prompts", len(chunk))]
        return out

    def score(self, views: list[dict], *, reward_range: tuple[float, float], dynamic_sampling: bool = False,
              mask_truncated: bool = False) -> list[Scored]:
        """Rewards and keep decisions for one generation batch of trajectory views (knobs from harness.yaml)."""
        return self.score_batches([views], reward_range=reward_range, dynamic_sampling=dynamic_sampling,
                                  mask_truncated=mask_truncated)

    def score_batches(self, view_batches: list[list[dict]], *, reward_range: tuple[float, float],
                      dynamic_sampling: bool = False, mask_truncated: bool = False) -> list[Scored]:
        """``score`` of each generation batch, in order, with many batches per request: one flat list."""
        out: list[Scored] = []
        for scored in self.scored_requests(view_batches, reward_range=reward_range,
                                           dynamic_sampling=dynamic_sampling, mask_truncated=mask_truncated):
            out.extend(scored)
        return out

    def scored_requests(self, view_batches: list[list[dict]], *, reward_range: tuple[float, float],
                        dynamic_sampling: bool = False, mask_truncated: bool = False) -> Iterator[list[Scored]]:
        """``score_batches``, one request's results at a time as they come (a caller may use them while the
        runtime scores the next request; the requests are the same)."""
        requests: list[list[list[dict]]] = []
        size = chars = 0
        # responses and prompts, in characters (at most 4 bytes each in the frame), with room for the rest of a
        # view (ids, task, ground truth: small beside them)
        budget = max(0, harness_runtime.MAX_REQUEST_BYTES - REQUEST_VIEWS * VIEW_OVERHEAD_BYTES) // 4
        for batch in view_batches:
            weight = view_chars(batch)
            if requests and size + len(batch) <= REQUEST_VIEWS and chars + weight <= budget:
                requests[-1].append(batch)
                size, chars = size + len(batch), chars + weight
            else:
                requests.append([batch])
                size, chars = len(batch), weight
        sent = [[v for b in request for v in b] for request in requests]

        def score_request(i: int) -> tuple[dict, int, bytes]:
            frame = views_frame(sent[i], self._ids)
            if len(frame) > harness_runtime.MAX_REQUEST_BYTES:  # the runtime would end on it: not the harness's
                what = (f"a generation batch of {len(sent[i]):,} views" if len(requests[i]) == 1 else
                        f"a request of {len(requests[i])} generation batches ({len(sent[i]):,} views)")
                raise ValueError(f"{what} is {len(frame):,} bytes, over the harness runtime's limit of "
                                 f"{harness_runtime.MAX_REQUEST_BYTES:,} for one frame: score smaller batches")
            return {"op": "score", "batches": [len(b) for b in requests[i]], "dynamic_sampling": dynamic_sampling,
                    "mask_truncated": mask_truncated}, len(sent[i]), frame

        with closing(answers := self._exchange(len(requests), score_request)):
            for views, answer in zip(sent, answers):
                yield scored_columns(answer, views, reward_range)

    def diagnose(self, views: list[dict]) -> list[dict]:
        """Findings of the harness's diagnostics over views that carry ``reward`` and ``keep``."""
        stream = self.diagnose_stream(views)
        stream.add(views)
        return stream.findings()

    def diagnose_stream(self, sized_by: list[dict]) -> DiagnoseStream:
        """One diagnose call over as many views as ``sized_by`` holds (with as many characters), whose views the
        caller adds as it has them (``harness_wire_stream``); nothing else may use this session until its
        ``findings`` are read."""
        if self.diagnose_memory_mb not in (None, diagnose_memory_mb(sized_by)):
            raise ValueError("a session sized for one diagnose call serves that call only (diagnose_memory_mb)")
        return DiagnoseStream(self, sized_by)

    # -- transport

    def request_deadline_s(self, items: int) -> float:
        """How long a request of ``items`` trajectories or prompts may take: it scales with the request."""
        return min(self.request_timeout_s, REQUEST_S_BASE + REQUEST_S_PER_ITEM * items)

    def _exchange(self, count: int, make: Callable[[int], tuple]) -> Iterator[dict]:
        """The answers to requests ``make(0)`` .. ``make(count - 1)`` (each a request, the trajectories or
        prompts it carries and, for some, the bytes of a frame that follows it), in order.  One request is in
        flight at a time, as the runtime serves them, but the host's own work overlaps the runtime's: request
        i + 1 is encoded while the runtime works on i and sent as soon as i's answer is in, before that answer
        is parsed and checked."""
        if count == 0:
            return
        in_flight = False
        try:  # (one request alone, as every diagnose, is encoded here: no thread)
            with ThreadPoolExecutor(1, thread_name_prefix="harness-encode") if count > 1 else nullcontext() as encoder:
                waiting = self._send(*self._encode(make, 0))
                in_flight = True
                for i in range(count):
                    upcoming = encoder.submit(self._encode, make, i + 1) if i + 1 < count else None
                    op, data = waiting[0], self._receive(*waiting)
                    in_flight = False
                    if upcoming is not None:  # the runtime starts on it while this answer is checked
                        waiting = self._send(*upcoming.result())
                        in_flight = True
                    yield self._parse(op, data)
        finally:
            if in_flight:  # left with an answer still to come (a bad answer before it): no later request of
                self.close()  # this session may read that answer as its own

    @staticmethod
    def _encode(make: Callable[[int], tuple], i: int) -> tuple[str, bytes, int]:
        with collector_paused():
            request, items, *after = make(i)
            parts = [_frame(request)]
            for data in after:  # its length line, then the bytes as they are: a diagnose frame is copied once, here
                parts += [b"%d\n" % len(data), data]
            return request["op"], b"".join(parts), items

    def _send_parts(self, op: str, parts: list[bytes]) -> None:
        """Bytes of a request that is sent in parts (a diagnose call's chunks), each as it is."""
        if self._process is None:
            raise HarnessFailed("the harness session is not started (or already failed)")
        try:
            for part in parts:
                self._process.channel.send(part)
        except (ChannelClosed, OSError):
            self._fail(f"the harness runtime died during {op}")

    def _send(self, op: str, frame: bytes, items: int) -> tuple[str, float, float]:
        """Send one framed request: (op, the deadline of its answer, the time it is allowed)."""
        if self._process is None:
            raise HarnessFailed("the harness session is not started (or already failed)")
        timeout = self.request_deadline_s(items)
        try:
            self._process.channel.send(frame)
        except (ChannelClosed, OSError):
            self._fail(f"the harness runtime died during {op}")
        return op, time.monotonic() + timeout, timeout

    def _receive(self, op: str, deadline: float, timeout: float) -> bytes:
        """One framed answer's bytes, read by ``deadline``; never more than ``MAX_ANSWER_BYTES``."""
        if self._process is None:
            raise HarnessFailed("the harness session is not started (or already failed)")
        channel = self._process.channel
        try:
            header = channel.read_line(12, deadline)
            if not header.isdigit():
                self._fail(f"unreadable answer to {op}: the frame header is not a length")
            n = int(header)
            if n > MAX_ANSWER_BYTES:
                self._fail(f"unreadable answer to {op}: {n} bytes, over the limit of {MAX_ANSWER_BYTES}")
            return channel.read(n, deadline)
        except TimeoutError:
            self._fail(f"{op} timed out after {timeout:.0f}s")
        except ValueError as exc:
            self._fail(f"unreadable answer to {op}: {exc}")
        except (ChannelClosed, OSError):
            self._fail(f"the harness runtime died during {op}")

    def _parse(self, op: str, data: bytes) -> dict:
        """An answer's bytes as a strictly parsed object; a ``fatal`` answer fails the session."""
        try:
            with collector_paused():
                answer = parse_json(data, f"the answer to {op}")
        except UntrustedOutputError as exc:
            self._fail(f"unreadable answer to {op}: {exc}")
        if not isinstance(answer, dict):
            self._fail(f"malformed answer to {op}: not an object")
        if "fatal" in answer:
            self._fail(f"{str(answer['fatal'])[:MAX_ERROR_CHARS]}")
        return answer

    def _fail(self, reason: str) -> NoReturn:
        summary = self.close()
        why = reason
        if summary.get("oom_killed"):
            why += " (killed: memory limit exceeded)"
        elif summary.get("timed_out"):
            why += " (killed: session time limit)"
        raise HarnessFailed(why)


def _frame(request: dict) -> bytes:
    data = json.dumps(request, separators=(",", ":")).encode()
    return b"%d\n" % len(data) + data


def _bundle(runtime: Path, harness_dir: Path) -> bytes:
    """A tar of the runtime and ``harness/`` (symlinks kept as links, resolved only inside the container).

    The runtime is its package (``harness_rt/``, its ``*.py`` only, and ``harness_runtime.LAUNCHER`` as
    ``runtime.py``) or, given a file, that file as ``runtime.py``."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        if runtime.is_dir():
            for path in sorted(runtime.glob("*.py")):
                tar.add(path, arcname=f"harness_rt/{path.name}")
            launcher = harness_runtime.LAUNCHER.encode()
            info = tarfile.TarInfo("runtime.py")
            info.size, info.mode = len(launcher), 0o644
            tar.addfile(info, io.BytesIO(launcher))
        else:
            tar.add(runtime, arcname="runtime.py")
        tar.add(harness_dir, arcname="harness")
    if buffer.tell() > MAX_HARNESS_BYTES:
        raise HarnessFailed(f"the harness at {harness_dir} holds {buffer.tell()} bytes, over the limit of "
                            f"{MAX_HARNESS_BYTES}: keep data files out of the harness")
    return buffer.getvalue()


