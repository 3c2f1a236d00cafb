"""Views on the wire as columns (``harness_wire.column_frame``, ``views_frame``) reach harness code as the dicts did.

A diagnose chunk and a score request carry their views as columns, and the runtime builds the dicts
(``harness_runtime.harness.views_of``) instead of unmarshalling dicts the host built.  A diagnostic sees the
values, their key order and which values are one object: each must be what the dicts' frame gave it, or a
diagnostic could tell a call sent as columns from one sent as dicts (views ``trajectory_view`` did not make still
go as dicts).  No Docker: the host's encoding and the runtime's decoding, as the two processes run them.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_b_view_frames.py
"""

from __future__ import annotations

import marshal

import pytest

from domains.math import MathDomain
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_runtime.harness import views_of
from sandboxes.harness_views import trajectory_view
from sandboxes.harness_wire import column_frame, diagnose_frame, views_frame
from sandboxes.harness_wire_ids import OpaqueIds


@pytest.fixture(scope="module")
def views() -> list[dict]:
    rows = synthetic_math_rows("b", 0, 6, 4, seed=5, verify=MathDomain().verify)
    return [trajectory_view(r) for r in rows]


def sharing(views: list[dict]) -> dict:
    """Per key (top level and ``extra_info``): for each view, the first view whose value is the same object; and
    whether a view's ids and task are one object top level and in ``extra_info``."""
    def pattern(values: list) -> list[int]:
        first: dict = {}
        return [first.setdefault(id(v), i) for i, v in enumerate(values)]

    shape = {k: pattern([v[k] for v in views]) for k in views[0] if k != "extra_info"}
    shape |= {"extra." + k: pattern([v["extra_info"][k] for v in views]) for k in views[0]["extra_info"]}
    shape["one object"] = [[v[k] is v["extra_info"][k] for k in ("traj_id", "group_id", "task_id")] for v in views]
    return shape


def test_a_diagnose_chunk_as_columns_is_the_chunk_as_dicts(views):
    ids, memo = OpaqueIds(), {}
    chunk = views[3:10]  # cuts a group at each end
    extra = {"reward": [float(i % 3) / 2 for i in range(len(chunk))], "keep": [i % 2 == 0 for i in range(len(chunk))]}
    frame, real, opaque = column_frame(chunk, list(chunk[0]), extra, ids, memo)
    annotated = [v | {"reward": r, "keep": k} for v, r, k in zip(chunk, extra["reward"], extra["keep"])]
    as_dicts = marshal.loads(diagnose_frame(ids.views(annotated, memo)))  # the same memo: the same opaque ids
    as_columns = views_of(marshal.loads(frame))
    assert as_columns == as_dicts and len(as_columns) == 7
    assert [list(v) for v in as_columns] == [list(v) for v in as_dicts]
    assert [list(v["extra_info"]) for v in as_columns] == [list(v["extra_info"]) for v in as_dicts]
    assert sharing(as_columns) == sharing(as_dicts)
    assert all(x == [True, True, True] for x in sharing(as_columns)["one object"])
    assert real == [v["traj_id"] for v in chunk] and opaque == [v["traj_id"] for v in as_columns]
    assert not {v["traj_id"] for v in chunk} & set(opaque)  # the archive's ids never travel
    assert len({v["group_id"] for v in as_columns}) == 3  # groups of 4 cut to 1 + 4 + 2 stay groups


def test_views_trajectory_view_did_not_make_go_as_dicts(views):
    ids = OpaqueIds()
    reordered = [v | {"extra_info": dict(reversed(list(v["extra_info"].items())))} if i == 2 else v
                 for i, v in enumerate(views[:4])]
    assert column_frame(reordered, list(reordered[0]), {}, ids, {}) is None
    bare = [{"traj_id": "t1", "group_id": "g", "response": "x"}]  # no extra_info
    assert column_frame(bare, list(bare[0]), {}, ids, {}) is None
    decoded = views_of(marshal.loads(views_frame(reordered, ids)))
    assert [list(v["extra_info"]) for v in decoded] == [list(v["extra_info"]) for v in reordered]
    assert [v["response"] for v in decoded] == [v["response"] for v in reordered]
    assert all(v["traj_id"] != r["traj_id"] and v["extra_info"]["traj_id"] == v["traj_id"]
               for v, r in zip(decoded, reordered))


def test_a_score_requests_views_decode_to_the_views_with_one_draw_of_opaque_ids(views):
    ids = OpaqueIds()
    first, second = (views_of(marshal.loads(views_frame(views, ids))) for _ in range(2))
    for decoded in (first, second):
        stripped = [{k: x for k, x in v.items() if k not in ("traj_id", "group_id", "extra_info")} for v in decoded]
        assert stripped == [{k: x for k, x in v.items() if k not in ("traj_id", "group_id", "extra_info")}
                            for v in views]
        assert [v["extra_info"]["task_id"] for v in decoded] == [v["task_id"] for v in views]
        assert len({v["group_id"] for v in decoded}) == 6 and len({v["traj_id"] for v in decoded}) == 24
    assert not {v["traj_id"] for v in first} & {v["traj_id"] for v in second}  # drawn afresh per request
