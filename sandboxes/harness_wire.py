"""The compact encoding of trajectory views on the wire to the harness runtime (host side).

``sandboxes.harness_runtime.decode_columns`` reads it inside the container; ``sandboxes.harness_client``
re-exports :func:`encode_views`.  A diagnose call's views go as marshal frames of columns (:func:`column_frame`),
or of dicts for views ``trajectory_view`` did not make (:func:`diagnose_frame`).
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import marshal
import operator
import threading

from sandboxes.harness_views import VIEW_KEYS
from sandboxes.harness_wire_ids import OPAQUE_KEYS, OpaqueIds


_paused = threading.Lock()
_pauses = [0, False]  # nested pauses in any thread; whether the collector was on before the first


@contextlib.contextmanager
def collector_paused():
    """Build or read a request's plain data (its views and their encoding, an answer's columns) without the
    cyclic collector: that data holds no cycles, and in a process that holds a round's rows every collection
    the allocations trigger walks all of them again (encoding 250,000 views took 2.5 s with it, 1.1 s without).
    Nests, and is shared between threads: the collector is back on when the last pause ends."""
    with _paused:
        if _pauses[0] == 0:
            _pauses[1] = gc.isenabled()
            gc.disable()
        _pauses[0] += 1
    try:
        yield
    finally:
        with _paused:
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()


def diagnose_frame(views: list[dict], keys: list[str] | None = None) -> bytes:
    """A diagnose call's views (or one chunk of them, whose views all have ``keys``) as the runtime hands them to
    its diagnose worker, untouched (marshal version 4).

    Every diagnose call's views are built by one function (``trajectory_view``, plus ``reward`` and ``keep``)
    and cut into chunks of one size, so which of their values are one object is the same whoever calls; version
    4 keeps that, with half the bytes of version 2 and a copy loaded in 0.56 s instead of 0.97 s at 100,000
    views."""
    _same_keys(views, keys if keys is not None else list(views[0]) if views else list(VIEW_KEYS))
    return marshal.dumps(views, 4)


def column_frame(views: list[dict], keys: list[str], extra: dict[str, list], ids: OpaqueIds,
                 memo: dict, version: int = 4) -> tuple[bytes, list[str], list[str]] | None:
    """One diagnose chunk as columns (marshal ``version``): the views' ``keys``, then ``extra``'s (columns of the
    same length, ``reward`` and ``keep``), with opaque ids as ``OpaqueIds.views`` gives them (``memo``: the
    call's); (the frame, the real and the opaque traj ids).  None when the views are not ones
    ``trajectory_view`` made (no ids, an ``extra_info`` that is not a dict of one key order, or a key the views
    do not share): the caller sends those as dicts (:func:`diagnose_frame`).

    The runtime builds the same dicts from it (``harness_runtime.harness.views_of``), every value the object it
    was here (a trajectory's opaque id one object top level and in ``extra_info``, as before), without the host
    copying a million dicts to swap their ids and marshalling them (most of a 1M backtest's host time).  A score
    request's views travel this way too, as version 2 (no references: the runtime's reader sends each group on
    as a copy of its own, so which values were one object is not seen there)."""
    if not views or not {"traj_id", "group_id", "extra_info"} <= set(keys) or set(extra) & set(keys):
        return None
    _same_keys(views, keys)
    try:
        columns = {k: list(map(operator.itemgetter(k), views)) for k in keys}
    except KeyError:  # views of one size but other keys
        return None
    nested = columns["extra_info"]
    order = list(nested[0]) if type(nested[0]) is dict else None
    if order is None or set(map(type, nested)) != {dict} or not all(map(order.__eq__, map(list, nested))):
        return None
    real = list(map(str, columns["traj_id"]))
    traj, group = (ids.column(columns[k], memo) for k in OPAQUE_KEYS)
    columns["traj_id"], columns["group_id"] = traj, group
    subkeys = order + [k for k in OPAQUE_KEYS if k not in order]  # ``{**extra_info, "traj_id": t, "group_id": g}``
    columns["extra_info"] = [traj if k == "traj_id" else group if k == "group_id"
                             else list(map(operator.itemgetter(k), nested)) for k in subkeys]
    columns.update(extra)
    frame = {"keys": list(columns), "columns": list(columns.values()), "nested": {"extra_info": subkeys}}
    return marshal.dumps(frame, version), real, traj


def views_frame(views: list[dict], ids: OpaqueIds) -> bytes:
    """A score request's views, with opaque ids drawn for this request: the marshal frame that follows the request
    (``harness_runtime.serve`` reads it with ``harness.views_of``); columns where :func:`column_frame` takes the
    views, else the dicts."""
    memo: dict = {}
    keys = list(views[0]) if views else list(VIEW_KEYS)
    columns = column_frame(views, keys, {}, ids, memo, version=2)
    return columns[0] if columns is not None else marshal.dumps(ids.views(views, memo), 2)


def _same_keys(views: list[dict], keys: list[str]) -> None:
    if any(map(len(keys).__ne__, map(len, views))):  # (C-level maps: this runs over every view sent)
        view = next(v for v in views if len(v) != len(keys))
        raise ValueError(f"every view needs the same keys; {view.get('traj_id')} has {sorted(view)}")


def encode_views(views: list[dict], ids: OpaqueIds | None = None) -> dict[str, dict]:
    """Views as encoded columns (``harness_runtime.decode_columns`` reads them): the compact form on the wire.

    A column is ``{"same": key}`` when it equals a column the decoder has already decoded, ``{"runs": [[value,
    count], ...]}`` when runs of equal values make it much shorter (a group's prompt, task and ground truth),
    ``{"dicts": {...}}`` for dicts with one key order (``extra_info``, each key a column in turn), else
    ``{"values": [...]}``.  Given the session's ``ids``, every ``traj_id`` and ``group_id`` column (top level
    and in ``extra_info``) travels as opaque ids (``harness_wire_ids``).
    """
    keys = list(views[0]) if views else list(VIEW_KEYS)
    _same_keys(views, keys)
    memo: dict = {}
    opaque = None if ids is None else (lambda column: ids.column(column, memo))
    return _encode_all({k: list(map(operator.itemgetter(k), views)) for k in keys}, {}, opaque)


def _encode_all(columns: dict[str, list], outer: dict[str, list], opaque=None) -> dict[str, dict]:
    """Encode one level of columns in order.  A ``same`` reference may name only what the decoder holds by
    then, looked up as it looks it up: the enclosing levels' earlier columns (``outer``), overridden by this
    level's earlier columns on a shared name."""
    encoded: dict[str, dict] = {}
    done: dict[str, list] = {}
    for key, column in columns.items():
        if opaque is not None and key in OPAQUE_KEYS:
            column = opaque(column)
        encoded[key] = _encode(column, outer | done, opaque)
        done[key] = column
    return encoded


def _encode(column: list, available: dict[str, list], opaque=None) -> dict:
    for name, other in available.items():
        if other is not column and len(other) == len(column) and other == column:
            return {"same": name}
    if column and set(map(type, column)) == {dict}:
        order = list(column[0])
        if order and all(map(order.__eq__, map(list, column))):  # (empty dicts have no columns to count them by)
            return {"dicts": _encode_all({k: list(map(operator.itemgetter(k), column)) for k in order}, available,
                                         opaque)}
    # where a new run starts (C-level comparisons: this runs over every column of every request)
    starts = [0, *itertools.compress(range(1, len(column)), map(operator.ne, column[1:], column[:-1]))]
    if 3 * len(starts) > len(column):
        return {"values": column}
    ends = starts[1:] + [len(column)]
    return {"runs": [[column[a], b - a] for a, b in zip(starts, ends)]}
