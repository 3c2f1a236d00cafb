"""One diagnose call whose views travel as they come: cut into chunks of one size, sent while the caller makes more.

``HarnessSession.diagnose`` sends a whole call this way at once; ``run_harness`` opens one
(``HarnessSession.diagnose_stream``) before it scores and adds each prefix of the sample's views as soon as it
is scored, so the views' opaque ids, their marshalling and their way into the container overlap the scoring
instead of following it (about 7 s of a 1M backtest's host time, issue 45).

What the runtime's diagnose worker gets does not depend on that: the chunks are cut by count alone
(``DIAGNOSE_CHUNK`` views each, the last one shorter) whoever calls and however the caller adds the views, the
opaque ids are drawn once per call (one ``memo`` across its chunks), a chunk travels as columns whenever its
views allow (``harness_wire.column_frame``: the runtime builds the same dicts), and the runtime reads every chunk
before the diagnose worker's request process starts (``sandboxes.harness_runtime``).

    stream = session.diagnose_stream(views_the_session_was_sized_for)
    stream.add(first_views)        # sent in whole chunks as they fill
    stream.add(more_views, {"reward": rewards, "keep": keeps})   # extra keys of these views, as columns
    findings = stream.findings()   # the rest sent; the answer read and checked
"""

from __future__ import annotations

import json
import time
from typing import Protocol

from sandboxes import harness_runtime
from sandboxes.harness_answers import HarnessFailed, checked_finding
from sandboxes.harness_views import VIEW_KEYS
from sandboxes.harness_wire import collector_paused, column_frame, diagnose_frame
from sandboxes.harness_wire_ids import OpaqueIds


class Session(Protocol):
    """What a stream uses of its ``sandboxes.harness_client.HarnessSession`` (which imports this module)."""

    _ids: OpaqueIds

    def request_deadline_s(self, items: int) -> float: ...
    def close(self) -> dict: ...
    def _send_parts(self, op: str, parts: list[bytes]) -> None: ...
    def _receive(self, op: str, deadline: float, timeout: float) -> bytes: ...
    def _parse(self, op: str, data: bytes) -> dict: ...

DIAGNOSE_CHUNK = 16_384
"""Views per chunk of a diagnose call (the same for every call: which values are one object, within a chunk,
must not tell who cut it)."""


def view_chars(views: list[dict]) -> int:
    """Characters of the views' prompts and responses (what a diagnose session's memory is sized by)."""
    return sum(len(v.get("prompt") or "") + len(v.get("response") or "") for v in views)


class DiagnoseStream:
    """One diagnose call over exactly the views ``sized_by`` stands for (their count and characters), added in
    order in any number of parts; ``findings`` once they are all added."""

    def __init__(self, session: Session, sized_by: list[dict]) -> None:
        self.session = session
        self.count, self.chars = len(sized_by), view_chars(sized_by)
        self.chunks = max(1, -(-self.count // DIAGNOSE_CHUNK))
        self.memo: dict = {}  # the call's opaque ids, drawn once across its chunks
        self.pending: list[dict] = []
        self.extra: dict[str, list] | None = None  # the pending views' extra columns (``add``)
        self.keys: list[str] | None = None
        self.added = self.added_chars = 0
        self.opened = False  # the request's first frame is sent: the runtime waits for the rest of this call
        self.real: list[str] = []  # the traj ids sent, real and opaque, to map a finding's examples back
        self.opaque: list[object] = []

    def add(self, views: list[dict], extra: dict[str, list] | None = None) -> None:
        """Views of the call, in order after those added before; whole chunks are sent as they fill.  ``extra``:
        more keys of these views, as columns (``run_harness``'s ``reward`` and ``keep``): each view the call
        shows is ``view | {key: extra[key][i], ...}``, without the host building it."""
        if self.added + len(views) > self.count:
            self._refuse(f"a diagnose call over {self.count:,} views was given {self.added + len(views):,}")
        extra = extra or {}
        if any(len(column) != len(views) for column in extra.values()):
            self._refuse(f"a diagnose call's extra columns ({', '.join(extra)}) are not as long as its views")
        if self.extra is None:
            self.extra = {k: [] for k in extra}
        if list(extra) != list(self.extra):
            self._refuse(f"a diagnose call's parts came with other extra columns: {list(extra)}, then "
                         f"{list(self.extra)}")
        self.added += len(views)
        self.added_chars += view_chars(views)
        self.pending += views
        for key, column in extra.items():
            self.extra[key] += column
        while len(self.pending) >= DIAGNOSE_CHUNK:
            self._send(DIAGNOSE_CHUNK)

    def findings(self) -> list[dict]:
        """The rest sent, the runtime's answer read by its deadline (counted from now) and checked."""
        if (self.added, self.added_chars) != (self.count, self.chars):
            self._refuse(f"a diagnose call sized for {self.count:,} views of {self.chars:,} characters was given "
                         f"{self.added:,} of {self.added_chars:,}")
        if self.pending or not self.opened:
            self._send(len(self.pending))
        session = self.session
        timeout = session.request_deadline_s(self.count)
        answer = session._parse("diagnose", session._receive("diagnose", time.monotonic() + timeout, timeout))
        findings = answer.get("findings")
        if not isinstance(findings, list):
            raise HarnessFailed("malformed answer: 'findings' is not a list")
        checked = [checked_finding(f) for f in findings[:500]]
        wanted = {x for f in checked for x in f["example_ids"]}
        real = {o: r for r, o in zip(self.real, self.opaque) if o in wanted}
        for f in checked:  # the trusted side reads examples by the rows' own ids; an unknown one stays as given
            f["example_ids"] = [real.get(x, x) for x in f["example_ids"]]
        return checked

    def _send(self, n: int) -> None:
        """The first ``n`` pending views as one chunk (the request's frame first, if not sent yet)."""
        views, self.pending = self.pending[:n], self.pending[n:]
        extra = {k: column[:n] for k, column in (self.extra or {}).items()}
        for column in (self.extra or {}).values():
            del column[:n]
        with collector_paused():
            if self.keys is None:
                self.keys = list(views[0]) if views else list(VIEW_KEYS)
            columns = column_frame(views, self.keys, extra, self.session._ids, self.memo)
            if columns is not None:
                frame, real, opaque = columns
            else:  # views ``trajectory_view`` did not make: as dicts
                if extra:
                    views = [v | dict(zip(extra, values)) for v, values in zip(views, zip(*extra.values()))]
                dicts = self.session._ids.views(views, self.memo)
                frame = diagnose_frame(dicts, self.keys + list(extra))
                real, opaque = [str(v.get("traj_id")) for v in views], [o.get("traj_id") for o in dicts]
        if len(frame) > harness_runtime.MAX_REQUEST_BYTES:  # the runtime would refuse it and end: not the harness's
            self._refuse(f"a diagnose call over {len(views):,} views is {len(frame):,} bytes, over the harness "
                         f"runtime's limit of {harness_runtime.MAX_REQUEST_BYTES:,} for one frame: diagnose a "
                         f"smaller sample or round")
        self.real += real
        self.opaque += opaque
        parts = [] if self.opened else [_frame({"op": "diagnose", "count": self.count, "chunks": self.chunks})]
        self.session._send_parts("diagnose", [*parts, b"%d\n" % len(frame), frame])
        self.opened = True

    def _refuse(self, why: str) -> None:
        """The caller's error: raised as ValueError, after closing a session the runtime is mid-call in."""
        if self.opened:
            self.session.close()
        raise ValueError(why)


def _frame(request: dict) -> bytes:
    data = json.dumps(request, separators=(",", ":")).encode()
    return b"%d\n" % len(data) + data
