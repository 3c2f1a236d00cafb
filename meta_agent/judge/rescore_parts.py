"""Re-score one archive part with main's current harness and the trusted verifier (one shard of ``rescore``).

The part's rows (every split but the held-out exam, which no harness ever sees) are run through
main's harness exactly as a backtest runs a sample (``meta_agent.backtest.run_harness``: its own
sandboxed runtime, prompts rendered, rewards and filters batch by batch in the generation batches
training scored, then its diagnostics over the new rewards and masks), and every row is verified
again by the domain's trusted verifier on the host.  The per-row results go to
``<staging>/parts/<shard>`` (the part's own path) (written whole, then renamed); the summary comes back.

The archive is only read.  A part that cannot be read comes back as ``bad`` (named, with why),
never as an exception: the controller decides whether ``--skip-bad-parts`` lets it pass.
Harness outputs are cached under ``R/rescore/cache`` by (tree, sample, runtime version), as a backtest
caches them (failures never are); nothing is merged on them, so there is no fresh run to insist on.
"""

from __future__ import annotations

import os
import resource
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from domains.base import paid_cut
from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo
from meta_agent.config import HIGH_REWARD, BacktestSettings
from meta_agent.names import get_domain
from trajectory.archive_checks import ArchiveError, check_batch, check_file_schema
from trajectory.schema import TRAJECTORY_SCHEMA

RESULT_SCHEMA = pa.schema([
    ("traj_id", pa.string()), ("group_id", pa.string()), ("reward", pa.float64()), ("reward_now", pa.float64()),
    ("keep_now", pa.bool_()), ("error_now", pa.string()), ("verified", pa.float64()), ("verified_now", pa.float64()),
])
"""One row per re-scored trajectory: as recorded in training (``reward``, ``verified``) and now."""


@dataclass(frozen=True)
class PartJob:
    """Everything a worker needs for one shard, as plain values (it crosses process and node boundaries)."""

    shard: str
    """The part's path inside the archive, e.g. ``run_id=r/round=0/part-ab12.parquet``: the shard's name."""
    archive: str
    harness: str
    commit: str
    domain: str
    settings: dict
    staging: str
    cache: str


def read_part(path: Path) -> pa.Table:
    """Every row of one part file, each batch checked; ``ArchiveError`` naming the file when it cannot be read.

    Reading every page decompresses every page: a corrupt data page under an intact footer is found here.
    """
    try:
        check_file_schema(path)
        batches = []
        for batch in ds.dataset([str(path)], schema=TRAJECTORY_SCHEMA, format="parquet").to_batches():
            check_batch(str(path), batch)
            batches.append(batch)
        return pa.Table.from_batches(batches, schema=TRAJECTORY_SCHEMA)
    except ArchiveError:
        raise
    except (OSError, pa.ArrowException, ValueError) as exc:
        raise ArchiveError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None


def score_part(job: PartJob) -> dict:
    """Re-score the part ``job.shard``; its summary (module docstring).  Runs in a worker or in the controller."""
    from meta_agent.judge.harness_runs import run_harness  # inside: a worker imports only what it runs
    from meta_agent.judge.sample import SampleData
    from sandboxes.docker import DockerSandbox

    path = Path(job.archive) / job.shard
    run_id, round_ = _partition(job.shard)
    out = {"shard": job.shard, "run_id": run_id, "round": round_, "rows": 0, "harness_commit": None,
           "failure": None, "findings": [], "bad": None, "verifier": {}, "reward_changed": 0}
    try:
        table = read_part(path)
    except ArchiveError as exc:
        return out | {"bad": str(exc)}
    table = table.filter(pc.not_equal(table.column("split"), "heldout"))
    out["rows"] = table.num_rows
    if not table.num_rows:
        return out
    out["harness_commit"] = table.column("harness_commit")[0].as_py()
    domain = get_domain(job.domain)
    settings = BacktestSettings(**job.settings)
    sample = SampleData.of(table)
    repo = HarnessRepo.open(Path(job.harness))
    # cached by (tree, sample, runtime) as a backtest's are: after a verifier change only the verifier runs again
    run = run_harness(repo, job.commit, sample, DockerSandbox(), Path(job.cache), settings, domain.reward_range)
    out["failure"], out["findings"] = run.failure, run.findings
    sandbox_peak = run.sandbox.get("peak_memory_mb")
    failpoint("rescore.part_scored")
    verified_now = _verify(domain, sample.views)
    results = [run.results.get(v["traj_id"], {}) for v in sample.views]
    reward_now = [r.get("reward") for r in results]
    table_out = pa.table({
        "traj_id": [v["traj_id"] for v in sample.views], "group_id": [v["group_id"] for v in sample.views],
        "reward": [r["reward"] for r in sample.rows], "reward_now": reward_now,
        "keep_now": [r.get("keep") for r in results], "error_now": [r.get("error") for r in results],
        "verified": [r["verified"] for r in sample.rows], "verified_now": verified_now}, schema=RESULT_SCHEMA)
    _write_atomic(Path(job.staging) / "parts" / job.shard, table_out)
    cut = paid_cut(domain.reward_range)
    out["verifier"] = _verifier_changes(sample.rows, verified_now, cut)
    out["reward_changed"] = sum(1 for row, now in zip(sample.rows, reward_now)
                                if now is not None and row["reward"] is not None and now != row["reward"])
    # measurements, not results: they differ from run to run (the worker's peak is its process's so far)
    out["resources"] = {"sandbox_peak_mb": sandbox_peak,
                        "worker_peak_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    return out


def _partition(shard: str) -> tuple[str, int]:
    run_part, round_part = shard.split("/")[:2]
    return run_part.removeprefix("run_id="), int(round_part.removeprefix("round="))


def _verify(domain, views: list[dict]) -> list[float | None]:
    """The trusted verifier's score now, per view (None for a row without a ground truth to verify against)."""
    items = [(v["data_source"], v["response"], v["ground_truth"]) for v in views if v["ground_truth"] is not None]
    batch = getattr(domain, "verify_batch", None)
    scores = iter(batch(items) if batch else [domain.verify(*item) for item in items])
    return [float(next(scores)[0]) if v["ground_truth"] is not None else None for v in views]


def _verifier_changes(rows: list[dict], verified_now: list[float | None], cut: float) -> dict:
    """Counts of what the verifier now says differently.  ``paid_failures_now``: rows training paid
    (recorded reward at or above the domain's paid cut) that the verifier now fails, though it passed them then."""
    changed = paid = failures_now = known = 0
    for row, now in zip(rows, verified_now):
        if now is None or row["verified"] is None:
            continue
        known += 1
        was_ok, ok = row["verified"] >= HIGH_REWARD, now >= HIGH_REWARD
        changed += was_ok != ok
        failures_now += not ok
        paid += was_ok and not ok and row["reward"] is not None and row["reward"] >= cut
    return {"known": known, "changed": changed, "failures_now": failures_now, "paid_failures_now": paid}


def _write_atomic(path: Path, table: pa.Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    pq.write_table(table, tmp)
    os.replace(tmp, path)
