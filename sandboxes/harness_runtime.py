"""The one harness runtime: runs *inside* the sandbox and does everything harness code does.

Standard library plus Jinja2's sandboxed environment (the image also offers pyyaml
and math-verify to harness code).  The backtest, the local backend and verl's
reward entry all drive this same file through ``sandboxes.harness_client``, with
the same trajectory view and the same filter order, so the code that is judged is
the code that trains.  It decides nothing: it returns what harness code produced,
and the host validates every byte of it.

Nothing of the host is mounted.  The container runs ``BOOTSTRAP``, which reads one
tar of this file and the harness from stdin into ``/tmp/rt`` and execs

    python3 /tmp/rt/runtime.py /tmp/rt/harness

Requests then arrive on stdin and answers leave on stdout, each framed as an ASCII
length line and that many bytes of JSON.  Operations:

- ``render``   ``{"items": [{"question", "task"}]}`` -> ``{"prompts": [{"messages": [...]} | {"error"}]}``:
  ``prompts/system.j2`` (optional) and ``prompts/user.j2`` rendered with Jinja's
  ``ImmutableSandboxedEnvironment`` and ``StrictUndefined``.
- ``score``    ``{"views": {column: [...]}, "batches": [n, ...], "dynamic_sampling", "mask_truncated"}``:
  many generation batches of trajectory views, in columns, in one request ->
  ``{"reward": [...], "info": [...], "keep": [...], "error": [...]}`` (one entry per view, in order).
  Within each batch, for every group (views sharing ``group_id``, in order of first appearance):
  1. ``reward.compute_score(data_source, response, ground_truth, extra_info=...)`` for every member;
  2. ``filters.keep_trajectory(view)`` for every member (the view now carries ``reward``);
  3. ``filters.keep_group(members)`` (members carry ``reward`` and ``keep``);
  4. with ``mask_truncated``, a truncated trajectory is dropped;
  5. with ``dynamic_sampling``, a group whose kept rewards are all equal is dropped.
  A trajectory whose reward or filter raised is never kept.
- ``diagnose`` ``{"count": n}``, then one more frame: the n views (they carry ``reward`` and ``keep``) as the
  host marshalled them (``harness_wire.diagnose_frame``) -> ``{"findings": [...]}`` from every ``diagnostics/*.py``.
  This process passes those bytes to the diagnose worker as they came, without decoding them.
- ``stop``     ends the server.

Harness code never runs in the process that reads requests.  Four worker processes
(render, two score lanes, diagnose) are forked before the first request is read.  A score lane and the
diagnose worker are prepared snapshots (``snapshot_main``): each request gets a fresh process forked from
its snapshot, which loads the harness anew (a score process its reward and filters, a diagnose process only
its ``diagnostics/``: nothing else of the harness), serves that request and ends.  After every score or
diagnose request the reader kills any process harness code left, drops System V IPC objects and restores
the container's writable places (/tmp, /dev/shm, /dev/mqueue) as they were before the first request
(``sweep``): nothing a request left, no clock it read, no count it kept reaches the next, so the time
between requests and how many came before cannot be seen (issue 45).  A request's processes receive one
group or one diagnose call at a time.  The session's k-th group goes to score lane k mod 2
(counted across requests), so the two lanes score two groups at once on the container's two CPUs: how
many batches a request carries, how large a batch is and who sent it cannot be seen from harness code, and
the reading process is not dumpable (its memory and descriptors are closed to them).  The render worker
imports no harness Python (only its templates, which see nothing but their variables), so it takes a
request's prompts in one message.  Every group, prompts message or diagnose call has its own clock:
one that does not come back within ``CALL_S_BASE`` plus ``CALL_S_PER_ITEM`` per trajectory
or prompt kills the worker, and the request fails as hung.

A harness that fails to import answers every request with ``{"fatal": reason}``.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import gc
import importlib.util
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

RUNTIME_VERSION = 7
"""Bump when what this file does changes: backtest caches are keyed by it."""
MAX_ERROR_CHARS = 2000
MAX_INFO_CHARS = 4000
MAX_FINDINGS = 50
MAX_REQUEST_BYTES = 1 << 30
MAX_WORKER_BYTES = 1 << 28
CALL_S_BASE = 10.0
CALL_S_PER_ITEM = 0.05
"""One group (or prompt) gets 10 s plus 50 ms per trajectory before it counts as hung."""
SCORE_LANES = 2
"""Score workers.  Each is sent every ``SCORE_LANES``-th group of the session, counted across requests, so which
groups one sees does not depend on how the caller split them into requests; two groups are scored at once."""
READ_BYTES = 1 << 16
"""One read from a pipe: a pipe holds 64 KiB, and a larger read costs an allocation of that size per call
(a 1 MiB read made every group's round trip to the score worker ~5x slower)."""

BOOTSTRAP = r"""
import io, os, sys, tarfile
def read(n):
    data = bytearray()
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            sys.exit("runtime bootstrap: stdin ended before the harness arrived")
        data += chunk
    return bytes(data)
line = bytearray()
while not line.endswith(b"\n"):
    line += read(1)
tarfile.open(fileobj=io.BytesIO(read(int(line))), mode="r:").extractall("/tmp/rt")
os.execv(sys.executable, [sys.executable, "/tmp/rt/runtime.py", "/tmp/rt/harness"])
"""
"""Run as ``python3 -c BOOTSTRAP``: reads ``<n>\\n`` and an n-byte tar (``runtime.py``, ``harness/``) from stdin."""


def short_error(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[:MAX_ERROR_CHARS]


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ImportError(f"cannot import {path.name}: {short_error(exc)}") from exc
    return module


_SCALARS = (str, int, float, bool, type(None))


def _flat(value) -> bool:
    """A dict of scalars (most ground truths, extra_info, reward info): copied and checked the quick way."""
    return type(value) is dict and all(type(v) in _SCALARS for v in value.values())


@contextlib.contextmanager
def _bulk():
    """Plain data built in bulk (a unit read from the pipe, a diagnostic's copy of the views) without the cyclic
    collector: it holds no cycles, and each collection would walk every view built so far again (at 250,000
    views, most of the time these steps took).  Never around harness code: its cycles still get collected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _copy(value):
    """An independent copy of plain data (what one call changes, the next does not see); marshal is C-fast."""
    if _flat(value):
        return dict(value)
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return copy.deepcopy(value)


# -- the harness, in a worker process


class Prompts:
    """The prompt templates of one commit, rendered in Jinja's sandbox; no harness Python is imported here.

    Templates see only the variables they are given, so the render worker may take a whole request's
    prompts in one message: nothing in that process can count them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._templates: dict[str, object] | None = None

    def templates(self) -> dict[str, object]:
        if self._templates is None:
            from jinja2 import StrictUndefined
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
            found = {}
            for name in ("system", "user"):
                path = self.root / "prompts" / f"{name}.j2"
                if path.is_file():
                    found[name] = env.from_string(path.read_text())
            if "user" not in found:
                found["user"] = env.from_string("{{ question }}")
            self._templates = found
        return self._templates

    def render_one(self, item: dict) -> dict:
        try:
            templates = self.templates()
        except Exception as exc:  # a template that does not parse fails every prompt
            return {"error": f"parsing prompts: {short_error(exc)}"}
        variables = {"question": item["question"], "task": _copy(item["task"])}
        try:
            messages = []
            if "system" in templates:
                system = templates["system"].render(**variables).strip()
                if system:
                    messages.append({"role": "system", "content": system})
            messages.append({"role": "user", "content": templates["user"].render(**variables).strip()})
            return {"messages": messages}
        except Exception as exc:
            return {"error": f"rendering prompts: {short_error(exc)}"}


class Harness:
    """The harness's Python (reward, filters, diagnostics) of one commit, loaded once for the life of a worker."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reward = load_module(root / "reward.py", "harness_reward")
        if not callable(getattr(self.reward, "compute_score", None)):
            raise ImportError("reward.py must define compute_score(data_source, solution_str, ground_truth, ...)")
        filters = load_module(root / "filters.py", "harness_filters") if (root / "filters.py").is_file() else None
        self.keep_trajectory = getattr(filters, "keep_trajectory", None)
        self.keep_group = getattr(filters, "keep_group", None)

    # -- rewards and filters, one group at a time

    def score_group(self, views: list[dict]) -> list[tuple]:
        """Per member ``(reward, info, keep, error)``: compute_score, keep_trajectory, keep_group."""
        rows = []
        for view in views:
            try:
                raw = self.reward.compute_score(view["data_source"], view["response"], _copy(view["ground_truth"]),
                                                extra_info=_copy(view["extra_info"]))
                reward, info, error = normalise_score(raw)
            except Exception as exc:  # the harness's fault, recorded per trajectory
                reward, info, error = None, {}, f"reward: {short_error(exc)}"
            rows.append([reward, info, True, error])
        annotated = [dict(v, reward=r[0]) for v, r in zip(views, rows)]
        if self.keep_trajectory is not None:
            for view, row in zip(annotated, rows):
                try:  # the annotated views are this group's own (decoded for it): no copy needed
                    row[2] = bool(self.keep_trajectory(view))
                except Exception as exc:
                    row[2] = False
                    row[3] = row[3] or f"keep_trajectory: {short_error(exc)}"
        if self.keep_group is not None:
            members = [dict(v, keep=r[2]) for v, r in zip(annotated, rows)]
            try:
                group_ok = bool(self.keep_group(members))
            except Exception as exc:
                group_ok = False
                for row in rows:
                    row[3] = row[3] or f"keep_group: {short_error(exc)}"
            if not group_ok:
                for row in rows:
                    row[2] = False
        return [tuple(r) for r in rows]


class Diagnostics:
    """The harness's ``diagnostics/*.py`` of one commit; nothing else of the harness is imported here.

    The host sends a diagnose session only ``diagnostics/`` and a ``harness.yaml`` it wrote from the
    validated knobs (``meta_agent.judge.diagnose_sessions.export_diagnostics``), so a finding depends on the
    diagnostics' code, those knobs and the call's views alone."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def diagnose(self, views: list[dict]) -> list[dict]:
        return self.diagnose_frame(marshal.dumps(views))

    def diagnose_frame(self, frame: bytes) -> list[dict]:
        """Findings of every diagnostic over the views marshalled in ``frame``; each diagnostic gets its own
        copy, loaded from the frame, so what one changes the next never sees."""
        findings: list[dict] = []
        folder = self.root / "diagnostics"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
            try:
                module = load_module(path, f"diag_{path.stem}")
                with _bulk():
                    views = marshal.loads(frame)
                for f in list(module.diagnose(views))[:MAX_FINDINGS]:
                    findings.append({
                        "name": str(f.get("name", path.stem))[:200],
                        "severity": str(f.get("severity", "info")),
                        "rate": float(f.get("rate", 0.0)),
                        "example_ids": [str(x)[:200] for x in list(f.get("example_ids", []))[:10]],
                        "message": str(f.get("message", ""))[:500],
                        "diagnostic": path.name,
                    })
            except Exception as exc:
                findings.append({"name": f"{path.stem}:crashed", "severity": "error", "rate": 1.0, "example_ids": [],
                                 "message": short_error(exc), "diagnostic": path.name})
        return findings


def normalise_score(value) -> tuple[float | None, dict, str | None]:
    """verl's contract: a number, or a dict with a number under ``"score"`` (kept whole as the info)."""
    info: dict = {}
    if isinstance(value, dict):
        info = {str(k): v for k, v in value.items()}
        value = value.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, jsonable(info), f"reward is not a number: {type(value).__name__}"
    value = float(value)
    if not math.isfinite(value):
        return None, jsonable(info), f"reward is not finite: {value}"
    return value, jsonable(info), None


def jsonable(info: dict) -> dict:
    """``info`` as plain, bounded JSON (values that are not become their repr)."""
    if len(info) <= 16 and all(type(v) in (int, bool, type(None)) or (type(v) is str and len(v) <= 200)
                               or (type(v) is float and math.isfinite(v)) for v in info.values()):
        return info  # already plain and well under MAX_INFO_CHARS: the common case, without a JSON round trip
    try:
        text = json.dumps(info, allow_nan=False)
    except (TypeError, ValueError):
        info = {k: repr(v)[:200] for k, v in info.items()}
        text = json.dumps(info)
    if len(text) > MAX_INFO_CHARS:
        return {"_truncated": text[:MAX_INFO_CHARS // 4]}
    return json.loads(text)  # plain types only, whatever subclasses the harness returned


def worker_main(kind: str, root: Path, rfd: int, wfd: int) -> None:
    """Serve calls of one kind from the reading process: one unit in, its answer out, then the next.

    A unit is one group (score), one request's prompts (render: templates only, see ``Prompts``) or one
    whole diagnose call; each answer is a marshal frame ``("ok", result)`` or ``("fatal", reason)``, so the
    reader times every unit on its own.  The first frame says whether the harness loaded: ``("ready", None)``
    or ``("fatal", reason)``."""
    harness, fatal = None, None
    try:
        harness = {"render": Prompts, "diagnose": Diagnostics}.get(kind, Harness)(root)
    except Exception as exc:
        fatal = short_error(exc)
    _send(wfd, marshal.dumps(("fatal", fatal) if fatal is not None else ("ready", None)))
    reader = FrameReader(rfd)
    while True:
        frame = reader.frame(MAX_REQUEST_BYTES)
        if not frame:  # the pipe ended, or the request is over (``END``): this process ends with it
            return
        if fatal is not None:
            answer = ("fatal", fatal)
        else:
            try:
                if kind == "diagnose":  # each diagnostic loads its own copy of the views from the frame
                    answer = ("ok", harness.diagnose_frame(frame))
                else:
                    with _bulk():
                        unit = marshal.loads(frame)
                    answer = ("ok", [harness.render_one(item) for item in unit] if kind == "render"
                              else harness.score_group(unit))
            except Exception as exc:
                answer = ("fatal", f"{kind}: {short_error(exc)}")
        try:
            data = marshal.dumps(answer)
        except ValueError as exc:
            data = marshal.dumps(("fatal", f"{kind}: the harness returned data that is not plain: {exc}"))
        _send(wfd, data)
        # the last answer's bytes would stay readable from harness code's caller frames while the next unit
        # runs: its size differs with what the harness returned before, not only with who calls
        del data, answer, frame


# -- a prepared snapshot: a fresh process per request


END = b""
"""The empty frame: the request is over, and the process that served it ends."""
BEGIN = marshal.dumps("begin")
FRESH_KINDS = ("score", "diagnose")
"""The workers that run harness Python: each request gets a fresh process of its own (``snapshot_main``)."""


def snapshot_main(kind: str, root: Path, rfd: int, wfd: int) -> None:
    """A prepared snapshot of ``kind``'s worker: it never runs harness code itself, and forks a fresh process
    per request (``BEGIN``), which loads the harness anew and serves that request's units until ``END``.

    So nothing harness code did in one request survives into the next: no module state, no clock read at
    import, no count of earlier groups (the reader also kills every process it left and restores the files it
    wrote, ``sweep``).  To keep that cheap, the snapshot first lets a throwaway process load the harness and
    imports the library modules it pulled in (never one under /tmp, where the harness lives): each request's
    process finds them imported and only runs the harness's own files again."""
    fatal = _prepare(kind, root)
    _send(wfd, marshal.dumps(("fatal", fatal) if fatal is not None else ("ready", None)))
    reader = FrameReader(rfd)
    while True:
        frame = reader.frame(MAX_REQUEST_BYTES)  # BEGIN; nothing follows it until the request's process answers
        if frame is None:
            return
        pid = os.fork()
        if pid == 0:
            try:
                worker_main(kind, root, rfd, wfd)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        _send(wfd, marshal.dumps(("ended", None)))


def _prepare(kind: str, root: Path) -> str | None:
    """Load the harness once in a throwaway process; import here the library modules it imported.  The reason
    the harness cannot load (score: reward or filters fail to import), or None."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            before = set(sys.modules)
            try:
                if kind == "diagnose":  # a diagnostic that fails to import is a finding, never fatal
                    for path in sorted((root / "diagnostics").glob("*.py")):
                        with contextlib.suppress(BaseException):
                            load_module(path, f"diag_{path.stem}")
                else:
                    Harness(root)
                result = ("ok", sorted(set(sys.modules) - before))
            except Exception as exc:
                result = ("fatal", short_error(exc))
            _send(wfd, marshal.dumps(result))
        finally:
            os._exit(0)
    os.close(wfd)
    try:
        result = _recv(FrameReader(rfd), MAX_WORKER_BYTES)
    except (ValueError, EOFError, TypeError):
        result = None
    os.close(rfd)
    os.waitpid(pid, 0)
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], (list, str))):
        return f"the harness's {kind} process died while loading it"
    if result[0] == "fatal":
        return str(result[1])
    for name in result[1]:
        _preimport(str(name))
    return None


def _preimport(name: str) -> None:
    """Import library module ``name`` here, unless it (or its package) lives under /tmp: harness code does."""
    import importlib
    import importlib.util

    if name.startswith(("harness_", "diag_")):
        return
    try:
        spec = importlib.util.find_spec(name.partition(".")[0])
        places = [spec.origin or ""] + list(spec.submodule_search_locations or []) if spec else ["/tmp"]
        if any(str(p).startswith("/tmp") for p in places):
            return
        importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - only a head start: the request's process imports it if it must
        pass


WRITABLE = ("/tmp", "/dev/shm", "/dev/mqueue")
"""Where harness code can write in the container (its root filesystem is read-only)."""


class Snapshot:
    """What the container's writable places held before any request: restored after every request."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple] = {}
        for top in WRITABLE:
            for path in _walk(top):
                st = os.lstat(path)
                content = Path(path).read_bytes() if _is_file(st) else None
                self.entries[path] = (st.st_mode, content, _stamp(st))

    def restore(self) -> None:
        """Remove what a request's processes added, and put back what they changed or removed."""
        import shutil

        for top in WRITABLE:
            for path in sorted(_walk(top), key=len, reverse=True):
                if path in self.entries:
                    continue
                with contextlib.suppress(OSError):
                    st = os.lstat(path)
                    if _is_dir(st):
                        shutil.rmtree(path)
                    else:
                        os.unlink(path)
        for path, (mode, content, stamp) in sorted(self.entries.items()):
            try:
                st = os.lstat(path)
            except OSError:
                st = None
            if st is not None and _stamp(st) == stamp:
                continue
            with contextlib.suppress(OSError):
                if content is None:
                    os.makedirs(path, exist_ok=True)
                else:
                    if st is not None and not _is_file(st):
                        shutil.rmtree(path) if _is_dir(st) else os.unlink(path)
                    with open(path, "wb") as f:
                        f.write(content)
                os.chmod(path, mode & 0o7777)
                self.entries[path] = (mode, content, _stamp(os.lstat(path)))


def _walk(top: str) -> list[str]:
    out: list[str] = []
    if not os.path.isdir(top):
        return out
    for folder, dirs, files in os.walk(top, followlinks=False):
        out += [os.path.join(folder, name) for name in dirs + files]
    return out


def _is_file(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode)


def _is_dir(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISDIR(st.st_mode)


def _stamp(st: os.stat_result) -> tuple:
    # ctime moves on every write, chmod or utime, and no process can set it back
    return (st.st_mode, st.st_size, st.st_ino, st.st_ctime_ns, st.st_mtime_ns)


def sweep(keep: set[int], snapshot: Snapshot | None) -> None:
    """After a request: kill every process of the container but the runtime's own (``keep``: the reader, its
    workers and snapshots), reap them, drop System V IPC objects, and restore the writable files."""
    me = os.getpid()
    if me != 1 or snapshot is None:  # not alone in a container of its own (``serve``): nothing is ours to sweep
        return
    for _ in range(200):
        strays = [pid for pid in _pids() if pid != me and pid not in keep]
        if not strays:
            break
        for pid in strays:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        _reap()
        import time
        time.sleep(0.001)
    _reap()
    _drop_ipc()
    if snapshot is not None:
        snapshot.restore()


def _pids() -> list[int]:
    """The container's live processes (zombies are dead: only their parent's wait remains)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            out.append(int(name))
    return out


def _reap() -> None:
    """Wait for every finished child of this process (strays are reparented to it: it is the container's init)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _drop_ipc() -> None:
    """System V shared memory, queues and semaphores outlive their makers: remove every one."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return
    for table, remove in (("shm", lambda i: libc.shmctl(i, 0, None)), ("msg", lambda i: libc.msgctl(i, 0, None)),
                          ("sem", lambda i: libc.semctl(i, 0, 0))):
        try:
            lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 1 and fields[1].isdigit():
                remove(int(fields[1]))  # IPC_RMID


# -- the reading process


def _send(fd: int, data: bytes) -> None:
    header = b"%d\n" % len(data)
    # one gathered write: no copy of ``data`` behind its header (a group's answer or unit, ~25,000 a second)
    done = os.writev(fd, [header, data])
    if done < len(header) + len(data):  # a pipe took part of a large frame: the rest as it drains
        view = memoryview(header + data)[done:]
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
                left = deadline - _now()
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


def _recv(reader: FrameReader, limit: int, deadline: float | None = None) -> object | None:
    data = reader.frame(limit, deadline)
    return None if data is None else marshal.loads(data)


def _now() -> float:
    import time
    return time.monotonic()


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
            status = _recv(self.reader, MAX_WORKER_BYTES, _now() + CALL_S_BASE)
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
        _send(self.write_fd, BEGIN)
        self.loaded = False
        self.ready()
        self.serving = True

    def end(self) -> None:
        """End the request's process and wait until it is gone (its snapshot says so)."""
        if not self.serving:
            return
        self.serving = False
        try:
            _send(self.write_fd, END)
            status = _recv(self.reader, MAX_WORKER_BYTES, _now() + CALL_S_BASE)
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

    def call(self, unit: object, size: int, frame: bytes | None = None) -> object:
        """Send one unit (a group, a request's prompts, a diagnose call of ``size`` items) and read its answer on
        its own clock; a unit past its time kills the worker (HarnessHung)."""
        self.send(unit, size, frame)
        return self.answer()

    def send(self, unit: object, size: int, frame: bytes | None = None) -> None:
        """Send one unit, or the ``frame`` that already holds it; its clock starts now.  The caller reads its
        answer (``answer``) before the next.

        A unit goes as marshal version 2, which writes no references: every value arrives as an object of its
        own, so neither the unit's bytes nor which of its values are one object tell how the request that held
        it was encoded (a run of equal prompts in a long request, say).  A diagnose call's views come as the host
        marshalled them (``frame``): one whole call, built the same whoever makes it."""
        self.ready()
        _send(self.write_fd, frame if frame is not None else marshal.dumps(unit, 2))
        self.allowed = CALL_S_BASE + CALL_S_PER_ITEM * size
        self.deadline = _now() + self.allowed

    def answer(self) -> object:
        """The answer to the unit last sent, by that unit's deadline."""
        allowed = self.allowed
        try:
            answer = _recv(self.reader, MAX_WORKER_BYTES, self.deadline)
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
    columns = decode_columns(request["views"])
    keys = list(columns)
    n = len(columns[keys[0]]) if keys else 0
    views = [dict(zip(keys, values)) for values in zip(*(columns[k] for k in keys))]
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

    def scored(members: list[int], rows: object) -> None:
        if not isinstance(rows, list) or len(rows) != len(members):
            raise WorkerDied("the harness's score process answered the wrong number of trajectories")
        for i, row in zip(members, rows):
            if not (isinstance(row, (list, tuple)) and len(row) == 4):
                raise WorkerDied("the harness's score process answered garbage")
            rewards[i], infos[i], keeps[i], errors[i] = row[0], row[1], bool(row[2]), row[3]
        _drop(members, views, rewards, keeps, errors, request)

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
        """Score ``groups`` (indices into ``views``) and hand each answer to ``scored(members, rows)``, in order.

        The session's k-th group goes to worker k mod ``SCORE_LANES``, one group per message, and a worker is
        sent its next only once it has answered: nothing queued in its pipe or its memory tells harness code how
        many groups its caller sent at once, and the other lane's group runs meanwhile."""
        in_flight: collections.deque[tuple[list[int], Worker]] = collections.deque()
        for worker in self.workers if groups else ():  # every lane, whatever the request's size: how many
            worker.begin()  # processes are up does not tell it
        for members in groups:
            worker = self.workers[self.sent % len(self.workers)]
            if len(in_flight) == len(self.workers):  # the oldest in flight is this worker's
                done, owner = in_flight.popleft()
                scored(done, owner.answer())
            worker.send([views[i] for i in members], len(members))
            self.sent += 1
            in_flight.append((members, worker))
        while in_flight:
            done, owner = in_flight.popleft()
            scored(done, owner.answer())
        for worker in self.workers:
            worker.end()


def _drop(members: list[int], views: list[dict], rewards: list, keeps: list, errors: list, request: dict) -> None:
    """The runtime's own rules after the harness's filters: truncation mask, dynamic sampling, errors."""
    if request.get("mask_truncated"):
        for i in members:
            keeps[i] = keeps[i] and not views[i].get("truncated")
    if request.get("dynamic_sampling") and len({rewards[i] for i in members if keeps[i]}) <= 1:
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
        findings = workers["diagnose"].call(None, int(request["count"]), request["frame"])
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
        if request.get("op") == "diagnose":  # its views follow in a frame of their own (see the docstring)
            request["frame"] = requests.frame(MAX_REQUEST_BYTES)
            if request["frame"] is None:
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
        _send(1, data)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: runtime.py HARNESS_DIR (started by BOOTSTRAP)")
    os.umask(0o022)
    sys.exit(serve(Path(sys.argv[1])))
