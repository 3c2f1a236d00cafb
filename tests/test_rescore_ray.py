"""``rescore`` sharded over a local Ray of 2 workers: the same results as one process, and a worker killed
mid-shard retried once, then the command failing with the shard named and nothing written."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from meta_agent.judge.rescore import rescore_run
from meta_agent.judge.shards import ShardFailed
from meta_agent.run_dir import RunDir
from tests.rescore_run import archive_digest, build, copy_run

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("rescore-ray"))


def _outputs(summary: dict) -> tuple[dict, dict]:
    out = Path(summary["out"])
    tables = {p.relative_to(out).as_posix(): pq.read_table(p).to_pylist() for p in sorted(out.rglob("*.parquet"))}
    kept = {k: summary[k] for k in ("merges", "rounds", "rows", "parts", "failures", "bad_parts")}
    kept["shards"] = [{k: v for k, v in s.items() if k != "resources"} for s in summary["shards"]]  # measurements
    return tables, kept


def test_sharded_and_unsharded_give_identical_results(built, tmp_path, local_ray, docker_sandbox):
    here = copy_run(built, tmp_path / "here")
    sharded = copy_run(built, tmp_path / "sharded")
    one = _outputs(rescore_run(RunDir(here), workers=1))
    shown: list[str] = []
    two = _outputs(rescore_run(RunDir(sharded), workers=2, progress=shown.append))
    assert len(one[0]) == 2 and sum(len(rows) for rows in one[0].values()) == 48
    assert two == one
    assert one[1]["merges"][0]["status"] == "rejudged"
    assert [line.startswith("shard ") for line in shown] == [True, True], shown


def test_a_worker_killed_mid_shard_is_retried_once_then_the_shard_is_named(built, tmp_path, local_ray,
                                                                           docker_sandbox, monkeypatch):
    run = copy_run(built, tmp_path / "run")
    before = archive_digest(run)
    monkeypatch.setenv("META_AGENT_FAILPOINTS", "rescore.part_scored")  # every worker dies after scoring its part
    shown: list[str] = []
    with pytest.raises(ShardFailed) as failed:
        rescore_run(RunDir(run), workers=2, progress=shown.append)
    message = str(failed.value)
    assert "shard run_id=rj/round=" in message and "its worker died 2 times" in message
    named = message.split("shard ", 1)[1].split(":", 1)[0]
    assert [line for line in shown if named in line and "(again)" in line]  # the retry ran, on the same shard
    assert sorted(p.name for p in (run / "rescore").iterdir()) == ["cache"]  # no result, no staging folder
    assert archive_digest(run) == before
