"""A worker process, and the prepared snapshot that forks a fresh one per request."""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
from pathlib import Path

from .frames import FrameReader, recv_frame, send_frame
from .harness import Diagnostics, Harness, Prompts, bulk, load_module, short_error
from .limits import MAX_REQUEST_BYTES, MAX_WORKER_BYTES


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
    send_frame(wfd, marshal.dumps(("fatal", fatal) if fatal is not None else ("ready", None)))
    reader = FrameReader(rfd)
    while True:
        frame = reader.frame(MAX_REQUEST_BYTES)
        if not frame:  # the pipe ended, or the request is over (``END``): this process ends with it
            return
        if fatal is not None:
            answer = ("fatal", fatal)
        else:
            try:
                if kind == "diagnose":  # the call's chunks follow their count; each diagnostic in a child
                    chunks = [reader.frame(MAX_REQUEST_BYTES) for _ in range(marshal.loads(frame))]
                    if None in chunks:
                        return
                    answer = ("ok", harness.diagnose_forked(chunks))
                    del chunks
                else:
                    with bulk():
                        unit = marshal.loads(frame)
                    answer = ("ok", [harness.render_one(item) for item in unit] if kind == "render"
                              else harness.score_group(unit))
            except Exception as exc:
                answer = ("fatal", f"{kind}: {short_error(exc)}")
        try:
            data = marshal.dumps(answer)
        except ValueError as exc:
            data = marshal.dumps(("fatal", f"{kind}: the harness returned data that is not plain: {exc}"))
        send_frame(wfd, data)
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
    send_frame(wfd, marshal.dumps(("fatal", fatal) if fatal is not None else ("ready", None)))
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
        send_frame(wfd, marshal.dumps(("ended", None)))


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
            send_frame(wfd, marshal.dumps(result))
        finally:
            os._exit(0)
    os.close(wfd)
    try:
        result = recv_frame(FrameReader(rfd), MAX_WORKER_BYTES)
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
