"""The one harness runtime: runs *inside* the sandbox and does everything harness code does.

A small package whose parts end where their jobs do:

- ``limits``: sizes and clocks (the host reads some of them);
- ``harness``: harness code of one commit in a worker (templates, reward and filters, diagnostics) and the
  checks on what a reward returns;
- ``frames``: length-framed messages on pipes;
- ``snapshot``: a worker process, and the prepared snapshot that forks a fresh one per request;
- ``workers``: the reading process's side of a worker (its pipes, its clock, a request's begin and end);
- ``sweep``: what runs after every request (kill strays, drop System V IPC, restore the writable places);
- ``serve``: the reading process (decode a request, the score lanes, the runtime's own drop rules).

It travels into the container as ``/tmp/rt/harness_rt/`` with ``LAUNCHER`` as ``/tmp/rt/runtime.py``
(``harness_client._bundle``), which imports every part before any harness code runs: a part harness code
rewrites under /tmp later is never read again.

Standard library plus Jinja2's sandboxed environment (the image also offers pyyaml
and math-verify to harness code).  The backtest, the local backend and verl's
reward entry all drive this same runtime through ``sandboxes.harness_client``, with
the same trajectory view and the same filter order, so the code that is judged is
the code that trains.  It decides nothing: it returns what harness code produced,
and the host validates every byte of it.

Nothing of the host is mounted.  The container runs ``BOOTSTRAP``, which reads one
tar of this package, its launcher and the harness from stdin into ``/tmp/rt`` and execs

    python3 -B /tmp/rt/runtime.py /tmp/rt/harness

Requests then arrive on stdin and answers leave on stdout, each framed as an ASCII
length line and that many bytes of JSON.  Operations:

- ``render``   ``{"items": [{"question", "task"}]}`` -> ``{"prompts": [{"messages": [...]} | {"error"}]}``:
  ``prompts/system.j2`` (optional) and ``prompts/user.j2`` rendered with Jinja's
  ``ImmutableSandboxedEnvironment`` and ``StrictUndefined``.
- ``score``    ``{"batches": [n, ...], "dynamic_sampling", "mask_truncated"}``, then one more frame: the views, as
  the host marshalled them (``harness_wire.views_frame``, read by ``harness.views_of``):
  many generation batches of trajectory views, in columns, in one request ->
  ``{"reward": [...], "info": [...], "keep": [...], "error": [...]}`` (one entry per view, in order).
  Within each batch, for every group (views sharing ``group_id``, in order of first appearance):
  1. ``reward.compute_score(data_source, response, ground_truth, extra_info=...)`` for every member;
  2. ``filters.keep_trajectory(view)`` for every member (the view now carries ``reward``);
  3. ``filters.keep_group(members)`` (members carry ``reward`` and ``keep``);
  4. with ``mask_truncated``, a truncated trajectory is dropped;
  5. with ``dynamic_sampling``, a group whose kept rewards are all equal is dropped.
  A trajectory whose reward or filter raised is never kept.
- ``diagnose`` ``{"count": n, "chunks": k}``, then k more frames: the n views (they carry ``reward`` and ``keep``)
  in chunks of ``harness_client.DIAGNOSE_CHUNK`` (the last one shorter), each as the host marshalled it (columns,
  ``harness_wire.column_frame``, or dicts, ``harness_wire.diagnose_frame``: ``harness.views_of`` reads both)
  -> ``{"findings": [...]}`` from every ``diagnostics/*.py``.  The host may send the chunks as their views are
  scored; this process reads them all before the diagnose worker's request process
  starts, and passes their bytes on as they came, without decoding them.  That process loads them once and runs
  each diagnostic in a child forked from it (``Diagnostics.diagnose_forked``).
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

A harness that fails to import answers every request with ``{"fatal": reason}``."""

from __future__ import annotations

from pathlib import Path

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
os.execv(sys.executable, [sys.executable, "-B", "/tmp/rt/runtime.py", "/tmp/rt/harness"])
"""
"""Run as ``python3 -c BOOTSTRAP``: reads ``<n>\\n`` and an n-byte tar (``runtime.py``, ``harness_rt/``,
``harness/``) from stdin."""

LAUNCHER = """import sys
from harness_rt.serve import main  # every part of the runtime, imported before any harness code runs
sys.exit(main(sys.argv))
"""
"""``/tmp/rt/runtime.py`` in the container: the package travels as ``/tmp/rt/harness_rt`` beside it."""
PACKAGE = Path(__file__).resolve().parent
"""This package's folder (``harness_client._bundle`` sends its ``*.py``)."""

from .harness import Diagnostics, Harness, Prompts, short_error  # noqa: E402  (the host's names for the parts)
from .limits import (CALL_S_BASE, CALL_S_PER_ITEM, MAX_ERROR_CHARS, MAX_FINDINGS, MAX_INFO_CHARS,  # noqa: E402
                     MAX_REQUEST_BYTES, MAX_WORKER_BYTES, READ_BYTES, RUNTIME_VERSION, SCORE_LANES)
from .serve import decode_columns  # noqa: E402

__all__ = ["BOOTSTRAP", "CALL_S_BASE", "CALL_S_PER_ITEM", "LAUNCHER", "MAX_ERROR_CHARS", "MAX_FINDINGS",
           "MAX_INFO_CHARS", "MAX_REQUEST_BYTES", "MAX_WORKER_BYTES", "PACKAGE", "READ_BYTES", "RUNTIME_VERSION",
           "SCORE_LANES", "Diagnostics", "Harness", "Prompts", "decode_columns", "short_error"]
