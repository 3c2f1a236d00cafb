"""The trajectory archive on real Parquet files: round trips, idempotence, refusals, group sampling."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from rl_backend.archive import Archive, ArchiveError, sample_id, validate_rows
from trajectory.schema import SCHEMA_VERSION, TRAJECTORY_SCHEMA


def make_rows(run_id: str, round: int, n_groups: int, size: int = 4, tasks: tuple[str, ...] = ("chain_sum",),
              split: str = "train", domain: str = "math", prefix: str = "") -> list[dict]:
    """``n_groups`` groups of ``size`` rows; groups cycle through ``tasks``."""
    rows = []
    for g in range(n_groups):
        for k in range(size):
            rows.append({
                "traj_id": f"{prefix}{run_id}-r{round}-g{g}-s{k}", "run_id": run_id, "round": round, "step": g // 2,
                "group_id": f"{prefix}g{g}", "sample_idx": k, "domain": domain, "task_id": tasks[g % len(tasks)],
                "data_source": f"reasoning_gym/{tasks[g % len(tasks)]}", "split": split,
                "prompt": f"What is {g} + {k}?", "response": f"Answer: {g + k}",
                "messages": [{"role": "user", "content": f"What is {g} + {k}?"}],
                "ground_truth": {"answer": str(g + k)}, "reward": float(k % 2), "reward_info": {"k": k},
                "verified": float(k % 2), "verifier_info": json.dumps({"ok": bool(k % 2)}),
                "response_tokens": 3, "truncated": False, "finish_reason": "stop",
                "harness_commit": "abc123", "policy_ref": "ckpt-0",
            })
    return rows


def part_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.parquet"))


def test_append_and_read_round_trip_with_filters(tmp_path: Path):
    archive = Archive(tmp_path / "archive")
    assert archive.runs() == [] and archive.count() == 0 and archive.read().schema == TRAJECTORY_SCHEMA

    path = archive.append_round("run-a", 0, make_rows("run-a", 0, 3))
    assert path.parent == tmp_path / "archive" / "run_id=run-a" / "round=0"
    assert path.name.startswith("part-") and path.suffix == ".parquet"
    archive.append_round("run-a", 1, make_rows("run-a", 1, 2, split="val"))
    archive.append_round("run-b", 0, make_rows("run-b", 0, 1, domain="code"))
    # the partition columns may be left out of the rows: they come from the call
    bare = [{k: v for k, v in r.items() if k not in ("run_id", "round")} for r in make_rows("run-b", 2, 1)]
    archive.append_round("run-b", 2, bare)

    assert archive.runs() == ["run-a", "run-b"]
    assert archive.rounds("run-a") == [0, 1] and archive.rounds("run-b") == [0, 2] and archive.rounds("nope") == []
    assert archive.count() == 4 * (3 + 2 + 1 + 1)
    assert archive.count(run_id="run-a") == 20 and archive.count(run_id="run-a", round=1) == 8
    assert archive.count(split="val") == 8 and archive.count(domain="code") == 4
    assert archive.count(run_id="run-a", domain="code") == 0
    assert not list((tmp_path / "archive").rglob("*.tmp"))  # atomic writes leave no temp files

    table = archive.read(run_id="run-a", round=0)
    assert table.schema == TRAJECTORY_SCHEMA and table.num_rows == 12
    assert set(table.column("schema_version").to_pylist()) == {SCHEMA_VERSION}
    assert pq.read_schema(path).metadata[b"trajectory_schema_version"] == str(SCHEMA_VERSION).encode()
    # JSON columns are stored as strings and parsed by rows()
    assert json.loads(table.column("ground_truth")[0].as_py()) == {"answer": "0"}
    rows = archive.rows(run_id="run-b", round=2)
    assert rows[0]["run_id"] == "run-b" and rows[0]["round"] == 2
    assert rows[0]["messages"] == [{"role": "user", "content": "What is 0 + 0?"}]
    assert rows[0]["verifier_info"] == {"ok": False} and rows[1]["reward_info"] == {"k": 1}

    projected = archive.read(split="val", columns=["traj_id", "verified"])
    assert projected.column_names == ["traj_id", "verified"] and projected.num_rows == 8
    with pytest.raises(ArchiveError, match="unknown column.*nope"):
        archive.read(columns=["traj_id", "nope"])
    with pytest.raises(ArchiveError, match="split 'training' is unknown"):
        archive.read(split="training")


def test_append_is_idempotent_and_never_rewrites(tmp_path: Path):
    archive = Archive(tmp_path)
    rows = make_rows("r", 0, 2)
    first = archive.append_round("r", 0, rows)
    before = first.read_bytes()
    # a resumed round appends the same rows again, with JSON key order and value types changed
    again = [dict(r, ground_truth=json.dumps(r["ground_truth"], indent=2), step=r["step"]) for r in rows]
    assert archive.append_round("r", 0, again) == first
    assert part_files(tmp_path) == [first] and first.read_bytes() == before and archive.count() == 8

    # a superset: only the new rows are written, in a new part file
    more = rows + make_rows("r", 0, 1, prefix="x")
    second = archive.append_round("r", 0, more)
    assert second != first and part_files(tmp_path) == sorted([first, second])
    assert pq.read_table(second).num_rows == 4 and archive.count() == 12
    # recorded across two parts: the answer names the part holding the first row, and nothing is written
    assert archive.append_round("r", 0, more) == first and len(part_files(tmp_path)) == 2

    # same traj_id, different content: refused, naming the id, the field and the recorded file
    changed = [dict(rows[0], response="Answer: 7", reward=0.5)] + make_rows("r", 0, 1, prefix="y")
    with pytest.raises(ArchiveError) as err:
        archive.append_round("r", 0, changed)
    message = str(err.value)
    assert "'r-r0-g0-s0'" in message and "response, reward" in message and str(first) in message
    assert len(part_files(tmp_path)) == 2 and archive.count() == 12  # nothing written, not even the new rows
    assert archive.rows(run_id="r", round=0)[0]["response"] == "Answer: 0"

    # a row that names another partition is refused rather than moved
    with pytest.raises(ArchiveError, match="row 0, field 'round': is 0"):
        archive.append_round("r", 1, rows)
    with pytest.raises(ArchiveError, match="run id must be"):
        archive.append_round("../escape", 0, rows)
    with pytest.raises(ArchiveError, match="no rows"):
        archive.append_round("r", 3, [])


BAD_ROWS = [
    ("missing required", lambda r: r.pop("task_id"), "task_id", "missing (required)"),
    ("required is None", lambda r: r.update(prompt=None), "prompt", "required"),
    ("wrong type int", lambda r: r.update(sample_idx="0"), "sample_idx", "expected int"),
    ("bool is not an int", lambda r: r.update(step=True), "step", "expected int"),
    ("wrong type str", lambda r: r.update(response=b"bytes"), "response", "expected str"),
    ("wrong type float", lambda r: r.update(reward="1.0"), "reward", "expected a float"),
    ("nan reward", lambda r: r.update(reward=float("nan")), "reward", "use None"),
    ("bad JSON", lambda r: r.update(ground_truth="{'answer': 1}"), "ground_truth", "not valid JSON"),
    ("unserialisable", lambda r: r.update(reward_info={"x": object()}), "reward_info", "cannot be serialised"),
    ("verified above 1", lambda r: r.update(verified=1.5), "verified", "outside [0, 1]"),
    ("verified below 0", lambda r: r.update(verified=-0.1), "verified", "outside [0, 1]"),
    ("unknown split", lambda r: r.update(split="test"), "split", "expected one of train, val, heldout"),
    ("empty id", lambda r: r.update(group_id=""), "group_id", "is empty"),
    ("negative", lambda r: r.update(response_tokens=-1), "response_tokens", "non-negative"),
    ("too big", lambda r: r.update(step=2**40), "step", "does not fit int32"),
    ("unknown column", lambda r: r.update(advantage=0.3), "advantage", "not a column"),
    ("other version", lambda r: r.update(schema_version=SCHEMA_VERSION + 1), "schema_version", "leave it out"),
]


@pytest.mark.parametrize("case,mutate,field,problem", BAD_ROWS, ids=[c[0] for c in BAD_ROWS])
def test_malformed_rows_name_source_row_and_field(tmp_path: Path, case, mutate, field, problem):
    rows = make_rows("r", 0, 1, size=3)
    mutate(rows[2])
    with pytest.raises(ArchiveError) as err:
        validate_rows(rows, source="dumps/7.jsonl")
    message = str(err.value)
    assert message.startswith("dumps/7.jsonl: 1 problem(s)"), message
    assert f"row 2, field '{field}'" in message and problem in message and "row 0" not in message

    archive = Archive(tmp_path)
    with pytest.raises(ArchiveError, match=rf"append_round\(run_id='r', round=0\).*\n.*row 2, field '{field}'"):
        archive.append_round("r", 0, rows)
    assert part_files(tmp_path) == []


def test_validate_rows_reports_duplicates_and_many_problems():
    rows = make_rows("r", 0, 1, size=3)
    rows[2]["traj_id"] = rows[0]["traj_id"]
    rows.append("not a row")
    with pytest.raises(ArchiveError) as err:
        validate_rows(rows, source="batch")
    message = str(err.value)
    assert "row 2, field 'traj_id': 'r-r0-g0-s0' duplicates row 0" in message
    assert "row 3: is a str" in message and "2 problem(s)" in message

    # dict/list JSON values are serialised, JSON strings kept, schema_version filled
    table = validate_rows(make_rows("r", 0, 1, size=1), source="ok")
    assert table.schema == TRAJECTORY_SCHEMA
    row = table.to_pylist()[0]
    assert json.loads(row["messages"])[0]["role"] == "user" and row["verifier_info"] == '{"ok": false}'
    assert row["schema_version"] == SCHEMA_VERSION

    many = make_rows("r", 0, 4, size=4)
    for r in many:
        r["split"] = "bogus"
    with pytest.raises(ArchiveError, match=r"16 problem\(s\)(.|\n)*and 6 more"):
        validate_rows(many, source="many")


def _write_by_hand(archive_root: Path, table: pa.Table, run_id: str = "hand", round: int = 0) -> Path:
    folder = archive_root / f"run_id={run_id}" / f"round={round}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "part-byhand.parquet"
    pq.write_table(table, path)
    return path


def test_malformed_and_newer_files_are_named(tmp_path: Path):
    archive = Archive(tmp_path)
    archive.append_round("good", 0, make_rows("good", 0, 1))
    good = validate_rows(make_rows("hand", 0, 1), source="t")

    # a hand-written file with wider integer types and no optional columns is read and cast
    loose = pa.table({name: good.column(name) for name in good.column_names
                      if TRAJECTORY_SCHEMA.field(name).nullable is False})
    loose = loose.set_column(loose.column_names.index("round"), "round", loose.column("round").cast(pa.int64()))
    path = _write_by_hand(tmp_path, loose)
    read = archive.read(run_id="hand")
    assert read.schema == TRAJECTORY_SCHEMA and read.num_rows == 4 and read.column("reward").null_count == 4

    path.write_bytes(b"not parquet at all")
    with pytest.raises(ArchiveError, match=f"{path}: not a readable Parquet file"):
        archive.read()

    _write_by_hand(tmp_path, good.drop_columns(["group_id", "split"]))
    with pytest.raises(ArchiveError) as err:
        archive.read(run_id="hand")
    assert str(path) in str(err.value) and "missing required column(s) group_id, split" in str(err.value)
    assert archive.count(run_id="good") == 4  # other partitions stay readable

    _write_by_hand(tmp_path, good.append_column("advantage", pa.array([0.0] * 4)))
    with pytest.raises(ArchiveError, match="unknown column.*advantage"):
        archive.read()

    _write_by_hand(tmp_path, good.set_column(good.column_names.index("round"), "round", pa.array(["x"] * 4)))
    with pytest.raises(ArchiveError, match="column 'round' has type string"):
        archive.read()

    nulls = good.set_column(good.column_names.index("task_id"), pa.field("task_id", pa.string()),
                            pa.array([None, "a", "b", "c"], pa.string()))
    _write_by_hand(tmp_path, nulls)
    with pytest.raises(ArchiveError, match=f"{path}: required column 'task_id' has null values"):
        archive.read(run_id="hand")

    # newer schema: by file metadata, and by row values in a file without metadata
    newer_meta = good.replace_schema_metadata({b"trajectory_schema_version": str(SCHEMA_VERSION + 1).encode()})
    _write_by_hand(tmp_path, newer_meta)
    with pytest.raises(ArchiveError, match=f"{path}: written with trajectory schema version {SCHEMA_VERSION + 1}"):
        archive.rows(run_id="hand")
    newer_rows = good.set_column(good.column_names.index("schema_version"), TRAJECTORY_SCHEMA.field("schema_version"),
                                 pa.array([SCHEMA_VERSION + 1] * 4, pa.int16()))
    _write_by_hand(tmp_path, newer_rows)
    with pytest.raises(ArchiveError, match="newer than this code's.*upgrade"):
        archive.read(columns=["traj_id"])  # checked even when the column is not asked for
    # appending next to a malformed file is refused too, naming it, and writes nothing
    _write_by_hand(tmp_path, good.drop_columns(["step"]))
    with pytest.raises(ArchiveError, match=f"{path}: missing required column.*step"):
        archive.append_round("hand", 0, make_rows("hand", 0, 1, prefix="z"))
    assert part_files(tmp_path / "run_id=hand") == [path]


def _groups(table: pa.Table) -> Counter:
    return Counter(zip(table.column("run_id").to_pylist(), table.column("round").to_pylist(),
                       table.column("group_id").to_pylist()))


def test_sample_groups_whole_stratified_deterministic(tmp_path: Path):
    archive = Archive(tmp_path)
    # round 0: 30 groups of chain_sum, 10 of products; round 1: 8 groups, 4 of each; group ids repeat per round
    archive.append_round("r", 0, make_rows("r", 0, 40, tasks=("chain_sum",) * 3 + ("products",)))
    archive.append_round("r", 1, make_rows("r", 1, 8, size=3, tasks=("chain_sum", "products")))
    table = archive.read()
    sizes = _groups(table)
    assert len(sizes) == 48

    sample = archive.sample_groups(table, n_groups=12, seed=0)
    groups = _groups(sample)
    assert len(groups) == 12
    assert all(count == sizes[key] for key, count in groups.items())  # never a split group
    task_of = {(r["run_id"], r["round"], r["group_id"]): r["task_id"] for r in table.to_pylist()}
    strata = Counter((key[1], task_of[key]) for key in groups)
    # proportional: 12 * 30/48 = 7.5, 12 * 10/48 = 2.5, 12 * 4/48 = 1 each; every stratum covered
    assert set(strata) == {(0, "chain_sum"), (0, "products"), (1, "chain_sum"), (1, "products")}
    assert 7 <= strata[(0, "chain_sum")] <= 8 and 2 <= strata[(0, "products")] <= 3
    assert strata[(1, "chain_sum")] == strata[(1, "products")] == 1

    # as many groups as strata: one each, though proportional shares would give round 1 nothing
    for seed in range(3):
        four = _groups(archive.sample_groups(table, n_groups=4, seed=seed))
        assert sorted((key[1], task_of[key]) for key in four) == sorted(strata)

    again = archive.sample_groups(table, n_groups=12, seed=0)
    assert again.equals(sample) and sample_id(again) == sample_id(sample) == archive.sample_id(sample)
    # the input order does not matter for which groups are drawn
    shuffled = table.take(pa.array(list(range(table.num_rows))[::-1]))
    assert sample_id(archive.sample_groups(shuffled, n_groups=12, seed=0)) == sample_id(sample)
    drawn = {sample_id(archive.sample_groups(table, n_groups=12, seed=s)) for s in range(6)}
    assert len(drawn) > 3  # seeds give different samples

    # fewer groups than strata: still whole groups, deterministic
    small = archive.sample_groups(table, n_groups=2, seed=3)
    assert len(_groups(small)) == 2 and all(c == sizes[k] for k, c in _groups(small).items())
    # enough groups: everything; filters instead of a table
    assert archive.sample_groups(table, n_groups=100, seed=0).num_rows == table.num_rows
    val = archive.sample_groups({"run_id": "r", "round": 1}, n_groups=4, seed=1)
    assert set(val.column("round").to_pylist()) == {1} and len(_groups(val)) == 4

    with pytest.raises(ArchiveError, match="lacks column"):
        archive.sample_groups(table.select(["traj_id", "run_id"]), n_groups=2, seed=0)
    mixed = table.set_column(table.column_names.index("task_id"), "task_id",
                             pa.array([f"t{i}" for i in range(table.num_rows)]))
    with pytest.raises(ArchiveError, match="different round, task_id"):
        archive.sample_groups(mixed, n_groups=2, seed=0)


def test_sample_id_is_order_free_and_content_sensitive():
    table = validate_rows(make_rows("r", 0, 2), source="t")
    assert sample_id(table) == sample_id(table.take(pa.array([7, 3, 1, 0, 2, 4, 6, 5])))
    assert len(sample_id(table)) == 16
    assert sample_id(table) != sample_id(table.slice(0, 7))


def _backtest_archive(root: Path) -> Archive:
    """Two runs, rounds 0/2/10 (10 sorts before 2 as text); each round also holds held-out rows, groups
    without a verifier outcome, and two groups whose first sample lost its outcome; run b has val groups."""
    archive = Archive(root)
    for run_id, round, n in (("a", 0, 20), ("a", 2, 12), ("a", 10, 9), ("b", 1, 15)):
        rows = make_rows(run_id, round, n, tasks=("chain_sum", "chain_sum", "products"))
        for r in rows:
            if r["group_id"] in ("g0", "g1") and r["sample_idx"] == 0:
                r["verified"] = None
        rows += make_rows(run_id, round, 3, size=1, split="heldout", prefix="h")
        rows += [dict(r, verified=None) for r in make_rows(run_id, round, 4, prefix="u")]
        if run_id == "b":
            rows += make_rows(run_id, round, 5, size=2, split="val", tasks=("products",), prefix="v")
        archive.append_round(run_id, round, rows)
    return archive


# Drawn by draw_sample before pushdown (read all, filter, choose; commit ae7d2ab) from _backtest_archive:
# (run_id, n_groups, seed) -> the chosen groups and the sample_id of their rows.
BEFORE_PUSHDOWN = {
    (None, 8, 0): ("a/0/g17 a/0/g3 a/2/g2 a/2/g4 a/10/g4 a/10/g5 b/1/g3 b/1/g5", "c9334cb46355a61d"),
    (None, 30, 1): ("a/0/g0 a/0/g1 a/0/g11 a/0/g15 a/0/g19 a/0/g2 a/0/g3 a/0/g4 a/0/g5 a/0/g6 a/2/g0 a/2/g2 a/2/g3 "
                    "a/2/g5 a/2/g6 a/2/g7 a/10/g1 a/10/g4 a/10/g5 a/10/g7 b/1/g0 b/1/g11 b/1/g12 b/1/g4 b/1/g5 "
                    "b/1/g6 b/1/g7 b/1/vg1 b/1/vg2 b/1/vg4", "478644e357c0bf4c"),
    ("a", 5, 2): ("a/0/g13 a/0/g3 a/0/g8 a/2/g4 a/10/g7", "52a7642b73d51fa0"),
    ("b", 3, 7): ("b/1/g10 b/1/g11 b/1/g4", "6d179fe015bc85cd"),
}


def test_draw_sample_pushes_filters_down_and_draws_the_same_groups(tmp_path: Path):
    from meta_agent.backtest import BacktestError, draw_sample
    from meta_agent.config import BacktestSettings

    archive = _backtest_archive(tmp_path / "archive")
    # the old way, independently: every row of every file read with pyarrow alone, filtered in memory
    everything = pa.concat_tables(pq.read_table(p, schema=TRAJECTORY_SCHEMA) for p in part_files(tmp_path))
    known = everything.filter(pc.and_(pc.is_valid(everything["verified"]),
                                      pc.not_equal(everything["split"], "heldout")))
    for (run_id, n, seed), (groups, key) in BEFORE_PUSHDOWN.items():
        sample = draw_sample(archive, BacktestSettings(sample_groups=n, seed=seed), run_id=run_id)
        drawn = _groups(sample)
        assert sorted(drawn) == sorted((g.split("/")[0], int(g.split("/")[1]), g.split("/")[2]) for g in groups.split())
        assert sample_id(sample) == key and sample.schema == TRAJECTORY_SCHEMA
        assert set(sample["split"].to_pylist()) <= {"train", "val"} and sample["verified"].null_count == 0
        table = known if run_id is None else known.filter(pc.equal(known["run_id"], run_id))
        assert all(count == _groups(table)[k] for k, count in drawn.items())  # whole (filtered) groups
        # the in-memory path over the old way's table: the same rows in the same (archive) order
        assert archive.sample_groups(table, n_groups=n, seed=seed, stratify=("round", "data_source")).equals(sample)
    partial = draw_sample(archive, BacktestSettings(sample_groups=30, seed=1))
    assert _groups(partial)[("a", 0, "g0")] == 3  # a group with one row unverified: its verified rows only

    # projection and filters through the dict form; chosen rows only
    slim = archive.sample_groups({"run_id": "b", "split": "val", "columns": ["traj_id", "group_id"]},
                                 n_groups=2, seed=0)
    assert slim.column_names == ["traj_id", "group_id"] and slim.num_rows == 4
    assert {g[:2] for g in slim["group_id"].to_pylist()} == {"vg"}

    empty = Archive(tmp_path / "empty")
    empty.append_round("c", 0, [dict(r, verified=None) for r in make_rows("c", 0, 2)]
                       + make_rows("c", 0, 2, split="heldout", prefix="h"))
    with pytest.raises(BacktestError, match="no trajectories with a verifier outcome"):
        draw_sample(empty, BacktestSettings())
    assert empty.sample_groups({"split": "train", "where": pc.field("verified").is_valid()}, n_groups=4,
                               seed=0).num_rows == 0


# ----------------------------------------------------------------------------- tables from bulk producers


def _with(table: pa.Table, name: str, row: int, value, kind: pa.DataType | None = None) -> pa.Table:
    """``table`` with ``name``'s value at ``row`` replaced (and the column retyped to ``kind`` if given)."""
    values = table.column(name).to_pylist()
    values[row] = value
    column = pa.array(values, kind or table.schema.field(name).type)
    return table.set_column(table.column_names.index(name), pa.field(name, column.type), column)


BAD_VALUES = [  # (case, column, value at row 2, column type or None, problem) -- each a lie a producer could tell
    ("verified above 1", "verified", 1.5, None, "outside [0, 1]"),
    ("nan verified", "verified", float("nan"), None, "use None"),
    ("infinite reward", "reward", float("inf"), None, "use None"),
    ("empty id", "group_id", "", None, "is empty"),
    ("null required", "prompt", None, None, "required"),
    ("bad JSON", "ground_truth", "{'answer': 1}", None, "not valid JSON"),
    ("unknown split", "split", "test", None, "expected one of train, val, heldout"),
    ("negative", "response_tokens", -1, None, "non-negative"),
    ("too big for int32", "step", 2**40, pa.int64(), "does not fit int32"),
    ("other version", "schema_version", SCHEMA_VERSION + 1, None, "leave it out"),
]


@pytest.mark.parametrize("case,name,value,kind,problem", BAD_VALUES, ids=[c[0] for c in BAD_VALUES])
def test_table_rows_are_checked_and_named_by_traj_id_and_field(tmp_path: Path, case, name, value, kind, problem):
    table = _with(validate_rows(make_rows("r", 0, 1, size=3), "good"), name, 2, value, kind)
    archive = Archive(tmp_path / "archive")
    with pytest.raises(ArchiveError) as err:
        archive.append_round("r", 0, table)
    message = str(err.value)
    assert "1 problem(s)" in message and f"row 2 (traj_id 'r-r0-g0-s2'), field '{name}'" in message
    assert problem in message and not (tmp_path / "archive").exists()


TABLE_COLUMNS = [  # a column-wide lie: the type, the name, or a column left out
    ("ints for a string id", lambda t: t.set_column(7, "task_id", pa.array([1, 2, 3])), "column 'task_id'"),
    ("strings for an int", lambda t: t.set_column(2, "round", pa.array(["0"] * 3)), "column 'round'"),
    ("bools for a float", lambda t: t.set_column(16, "verified", pa.array([True] * 3)), "column 'verified'"),
    ("unknown column", lambda t: t.append_column("advantage", pa.array([0.1] * 3)), "column 'advantage'"),
    ("required column left out", lambda t: t.drop_columns(["response"]), "column 'response': is missing"),
]


@pytest.mark.parametrize("case,change,problem", TABLE_COLUMNS, ids=[c[0] for c in TABLE_COLUMNS])
def test_table_columns_of_the_wrong_type_or_name_are_refused(tmp_path: Path, case, change, problem):
    table = change(validate_rows(make_rows("r", 0, 1, size=3), "good"))
    with pytest.raises(ArchiveError, match=problem):
        Archive(tmp_path).append_round("r", 0, table)
    assert part_files(tmp_path) == []


def test_table_append_equals_dict_append_and_is_idempotent(tmp_path: Path):
    rows = make_rows("r", 0, 2, size=3)
    as_dicts, as_table = Archive(tmp_path / "a"), Archive(tmp_path / "b")
    as_dicts.append_round("r", 0, rows)
    bulk = validate_rows(rows, "bulk").drop_columns(["run_id", "round", "schema_version"])  # filled in
    first = as_table.append_round("r", 0, bulk)
    assert as_table.read().equals(as_dicts.read())
    assert as_table.append_round("r", 0, bulk) == first and part_files(tmp_path / "b") == [first]
    with pytest.raises(ArchiveError, match="reuse a recorded traj_id"):
        as_table.append_round("r", 0, _with(bulk, "reward", 0, 0.5))


def test_round_writer_shows_nothing_until_the_end_and_drops_everything_on_error(tmp_path: Path):
    archive = Archive(tmp_path / "archive")
    rows = make_rows("r", 0, 3, size=2)
    with archive.round_writer("r", 0) as writer:
        assert writer.write(rows[:2]) == 2 and writer.write(validate_rows(rows[2:4], "step 2")) == 2
        assert archive.count() == 0 and archive.rounds("r") == []  # staged, not visible
    assert archive.count(run_id="r", round=0) == 4 and part_files(tmp_path) == [writer.part]

    with pytest.raises(ArchiveError, match="already written in this round's stream"):
        with archive.round_writer("r", 1) as again:
            again.write(make_rows("r", 1, 1, size=2))
            again.write(make_rows("r", 1, 1, size=2)[1:])
    with pytest.raises(RuntimeError, match="trainer died"):
        with archive.round_writer("r", 2) as dying:
            dying.write(make_rows("r", 2, 1, size=2))
            raise RuntimeError("trainer died")
    assert archive.rounds("r") == [0] and list((tmp_path / "archive" / "run_id=r").iterdir()) == [
        tmp_path / "archive" / "run_id=r" / "round=0"]


def test_a_spec_naming_an_archive_gets_its_rows_written_there_as_one_part(tmp_path: Path):
    from rl_backend.base import RoundSpec, deliver_rows

    spec = RoundSpec(run_id="r", round=0, harness_dir=tmp_path / "h", harness_commit="abc123", policy_in=None,
                     out_dir=tmp_path / "out", domain="domains.math:MathDomain", archive=tmp_path / "a")
    assert RoundSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec  # still crosses a process
    rows = make_rows("r", 0, 2, size=2)
    heldout = [dict(r, traj_id=f"exam-{i}", split="heldout", reward=None) for i, r in enumerate(rows[:2])]
    assert deliver_rows(spec, rows, heldout) == ([], [])
    archive = Archive(tmp_path / "a")
    assert archive.count(run_id="r", round=0, split="train") == 4 and archive.count(split="heldout") == 2
    assert len(part_files(tmp_path / "a")) == 1
    without = RoundSpec(**{**spec.__dict__, "archive": None})
    assert deliver_rows(without, rows, heldout) == (rows, heldout)


def test_a_table_row_of_another_partition_is_refused_by_traj_id(tmp_path: Path):
    table = _with(validate_rows(make_rows("r", 0, 1, size=3), "good"), "run_id", 1, "other")
    with pytest.raises(ArchiveError, match=r"row 1 \(traj_id 'r-r0-g0-s1'\), field 'run_id': is 'other'"):
        Archive(tmp_path).append_round("r", 0, table)
    assert part_files(tmp_path) == []
