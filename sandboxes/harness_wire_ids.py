"""Opaque identifiers: what harness code sees of a trajectory's and a group's id (issue 45).

Archived ids name the run, the round, the step and the group (``t-r3-s0-g2-1``, ``t/3/s0-g2``); a reward that
read them could behave on rounds the gate replays and probes and pay wrong answers from a later round on.  So
every id that reaches harness code (``traj_id`` and ``group_id``, at the top of a view and in its
``extra_info``) is replaced on the wire by 16 random hex digits, drawn afresh for each request (each score
request, each diagnose call): within a request one id always gets one opaque id (a group stays a group, and
a trajectory's id in ``extra_info`` is its view's), nothing of it survives into the next request or session,
and every opaque id looks alike whoever calls.  The host keeps the real ids: it reads answers by position,
and maps a finding's example ids back (:func:`real_ids`).

    ids = OpaqueIds()
    memo = {}                                                  # one per request
    ids.column(["t-r3-s0-g2-1", "t-r3-s0-g2-1"], memo)         # ['5c0f...', '5c0f...'] (16 hex digits each)
"""

from __future__ import annotations

import itertools
import operator
import os

OPAQUE_KEYS = ("traj_id", "group_id")
"""The view keys (top level and ``extra_info``) whose values harness code sees only as opaque ids."""
OPAQUE_CHARS = 16


class OpaqueIds:
    """Opaque ids for the requests of one session: random, one draw per distinct id of a request (``memo``)."""

    def column(self, values: list, memo: dict | None = None) -> list[str]:
        """``values`` as opaque ids; equal values map to one object.  ``memo`` holds the ids already drawn for
        this request (across its columns); the work is C-level maps but for one slice per distinct id (a
        million views in a fraction of a second)."""
        memo = {} if memo is None else memo
        new = list(itertools.filterfalse(memo.__contains__, dict.fromkeys(values)))
        if new:
            digits = os.urandom(OPAQUE_CHARS // 2 * len(new)).hex()
            memo.update(zip(new, map(digits.__getitem__, map(slice, range(0, len(digits), OPAQUE_CHARS),
                                                                  range(OPAQUE_CHARS, len(digits) + 1, OPAQUE_CHARS)))))
        return list(map(memo.__getitem__, values))

    def views(self, views: list[dict], memo: dict | None = None) -> list[dict]:
        """Copies of ``views`` (one request's, or one part of it with that request's ``memo``) with opaque ids, top
        level and ``extra_info``; a trajectory's id and its copy in ``extra_info`` stay one object, as
        ``trajectory_view`` made them."""
        memo = {} if memo is None else memo
        try:
            traj, group = (self.column(list(map(operator.itemgetter(k), views)), memo) for k in OPAQUE_KEYS)
            return [{**v, "traj_id": t, "group_id": g, "extra_info": {**v["extra_info"], "traj_id": t, "group_id": g}}
                    for v, t, g in zip(views, traj, group)]
        except (KeyError, TypeError):  # a view without the usual ids (not one ``trajectory_view`` made)
            return [self._one_view(v, memo) for v in views]

    def _one_view(self, view: dict, memo: dict) -> dict:
        copy = dict(view)
        for key in OPAQUE_KEYS:
            if key in copy:
                copy[key] = self.column([copy[key]], memo)[0]
        extra = copy.get("extra_info")
        if isinstance(extra, dict) and extra.keys() & set(OPAQUE_KEYS):
            extra = dict(extra)
            for key in OPAQUE_KEYS:
                if key in extra:
                    extra[key] = self.column([extra[key]], memo)[0]
            copy["extra_info"] = extra
        return copy


def real_ids(sent: list[dict], opaque: list[dict], wanted: set[str]) -> dict[str, str]:
    """Opaque traj_id -> the real one, for the ids in ``wanted`` (a finding's example ids) among ``sent``
    (``opaque``: ``OpaqueIds.views(sent)``)."""
    return {o["traj_id"]: str(v["traj_id"]) for v, o in zip(sent, opaque) if o.get("traj_id") in wanted}
