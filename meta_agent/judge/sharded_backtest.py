"""Large backtests (``backtest --groups all``): each arm's scoring split by archive part file over Ray workers.

    python -m meta_agent backtest iv/r3-x --run-dir R --groups all                  # every group, here
    python -m meta_agent backtest iv/r3-x --run-dir R --groups all --workers 2      # a local Ray, 2 workers
    python -m meta_agent backtest iv/r3-x --run-dir R --groups all --ray-address auto --workers 16

:class:`ShardedRunner` stands in for ``harness_runs.run_harness`` (the gate calls it for main and the
candidate) and produces the same :class:`HarnessRun`:

- the sample's generation batches are shared out by archive part file, each batch whole, to the part
  that holds its first row (a resumed round may record a batch across two parts; a batch, and so a
  group, is never split).  Each part is one shard (``meta_agent.judge.shards``): a worker scores its
  batches in a harness session of its own, in the order training scored them;
- then, here, one more session renders the sample's prompts while another runs the diagnostics over the
  whole sample (rewards and masks of every shard), exactly the calls of an unsharded run, side by side as
  there, and a failure of both is named as there (the diagnose's).

Harness code sees one group per score call and one diagnose call per session wherever it runs, so
a harness cannot tell a sharded run from an unsharded one, and the two give identical results
(``tests/test_backtest_sharded.py``).  The outputs are cached under the same key as an unsharded
run's.  A harness failing in any shard fails its arm, named by the shard; a worker dying twice fails
the command (``ShardFailed``), never the harness.  Each worker starts its own ``DockerSandbox``;
on a cluster the run folder must be on a filesystem every node mounts at the same path.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.errors import UserError
from meta_agent.judge.diagnose_sessions import open_diagnose_session, sandbox_limits
from meta_agent.judge.harness_runs import (BacktestError, HarnessRun, SampleData, diagnose_sample, draw_sample,
                                           merge_summaries, render_and_close, run_harness, start_run, write_cache)
from meta_agent.judge.shards import ray_session, run_shards
from rl_backend.archive import Archive
from sandboxes.base import Sandbox
from sandboxes.harness_client import HarnessFailed, HarnessSession

ALL = "all"
"""``--groups all``: every backtestable group of the archive."""


def all_groups(archive: Archive, settings: BacktestSettings, run_id: str | None = None) -> BacktestSettings:
    """``settings`` drawing every group with a verifier outcome outside the held-out split (no escalation:
    there is nothing more to draw)."""
    n = max(2, count_groups(archive, run_id))
    return settings.model_copy(update={"sample_groups": n, "max_sample_groups": n})


@contextmanager
def backtest_plan(archive: Archive, settings: BacktestSettings, progress: Callable[[str], None] = lambda s: None,
                  run_id: str | None = None) -> Iterator[tuple[BacktestSettings, Callable[..., HarnessRun]]]:
    """The settings and runner of one or more backtests now: ``settings`` and ``run_harness``, or with
    ``settings.all_groups`` every group the archive holds now (:func:`all_groups`), each arm sharded over Ray
    (started once for all of them) when ``settings.workers`` > 1 or ``settings.ray_address``."""
    if not settings.all_groups:
        yield settings, run_harness
        return
    every = all_groups(archive, settings, run_id)
    if settings.workers == 1 and not settings.ray_address:
        yield every, run_harness
        return
    with ShardedRunner(archive, settings.workers, settings.ray_address, progress) as runner:
        yield every, runner


def count_groups(archive: Archive, run_id: str | None) -> int:
    """How many whole groups ``draw_sample`` can choose from (keys (run, round, group) of backtestable rows)."""
    backtestable = pc.field("verified").is_valid() & (pc.field("split") != "heldout")
    keys = archive.read(run_id=run_id, where=backtestable, columns=["run_id", "round", "group_id"])
    if keys.num_rows == 0:
        raise BacktestError(f"the archive at {archive.root} has no trajectories with a verifier outcome to backtest "
                            "on; train a round first or import a dump (python -m rl_backend.verl_import)")
    return keys.group_by(keys.column_names, use_threads=False).aggregate([]).num_rows


@dataclass(frozen=True)
class ShardJob:
    """One part's batches for one harness commit, as plain values (it crosses process and node boundaries)."""

    shard: str
    """The part file (path inside the archive) holding the first row of each of these batches."""
    harness: str
    commit: str
    batches: list[list[dict]]
    reward_range: tuple[float, float]
    dynamic_sampling: bool
    mask_truncated: bool
    settings: dict


def score_shard(job: ShardJob) -> dict:
    """Score ``job.batches`` in a harness session of their own; ``{"results", "failure", "sandbox"}``."""
    from sandboxes.docker import DockerSandbox

    settings = BacktestSettings(**job.settings)
    results: dict[str, dict] = {}
    failure = None
    with tempfile.TemporaryDirectory(prefix="backtest-shard-") as tmp:
        harness = HarnessRepo.open(Path(job.harness)).export(job.commit, Path(tmp) / "harness")
        session = HarnessSession(DockerSandbox(), harness, limits=sandbox_limits(settings),
                                 request_timeout_s=settings.timeout_s)
        try:
            session.start()
            for s in session.score_batches(job.batches, reward_range=job.reward_range,
                                           dynamic_sampling=job.dynamic_sampling, mask_truncated=job.mask_truncated):
                results[s.traj_id] = {"reward": s.reward, "keep": s.keep, "error": s.error,
                                      "reward_info": s.reward_info, "invalid_reward": s.invalid_reward}
        except HarnessFailed as exc:
            failure = str(exc)
        finally:
            summary = session.close()
    failpoint("backtest.shard_scored")
    return {"results": results if failure is None else {}, "failure": failure, "sandbox": summary}


def batch_parts(archive: Archive, sample: SampleData) -> list[str]:
    """Per batch of ``sample``: the part file (path inside the archive) that holds its first row."""
    firsts = {sample.rows[batch[0]]["traj_id"] for batch in sample.batches}
    partitions = sorted({(r["run_id"], r["round"]) for r in sample.rows})
    part_of: dict[str, str] = {}
    for run_id, round_ in partitions:
        for path in sorted(archive.root.glob(f"run_id={run_id}/round={round_}/part-*.parquet")):
            ids = pq.read_table(path, columns=["traj_id"]).column("traj_id")
            for traj_id in ids.filter(pc.is_in(ids, value_set=pc.cast(list(firsts), ids.type))).to_pylist():
                part_of.setdefault(traj_id, str(path.relative_to(archive.root)))
    missing = firsts - set(part_of)
    if missing:
        raise UserError(f"{len(missing)} sampled trajectories (e.g. {sorted(missing)[0]}) are in no part file of "
                        f"{archive.root}: the archive changed while the backtest ran; run it again")
    return [part_of[sample.rows[batch[0]]["traj_id"]] for batch in sample.batches]


@dataclass
class ShardedRunner:
    """``run_harness`` with each arm's scoring sharded by part file over Ray (module docstring)."""

    archive: Archive
    workers: int = 2
    ray_address: str | None = None
    progress: Callable[[str], None] = lambda s: None

    def __enter__(self) -> ShardedRunner:
        """Ray started once for every arm this runner shards (else each call starts and stops its own)."""
        self._ray = ray_session(self.workers, self.ray_address)
        self._ray.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._ray.__exit__(*exc)

    def __call__(self, repo: HarnessRepo, commit: str, sample: SampleData, sandbox: Sandbox, cache_root: Path,
                 settings: BacktestSettings, reward_range: tuple[float, float], fresh: bool = False) -> HarnessRun:
        cache, done, knobs = start_run(repo, commit, sample, cache_root, fresh)
        if done is not None:
            return done
        by_part: dict[str, list[list[dict]]] = {}
        for part, batch in zip(batch_parts(self.archive, sample), sample.batches):
            by_part.setdefault(part, []).append([sample.views[i] for i in batch])
        jobs = [ShardJob(part, str(repo.path), commit, batches, tuple(reward_range), knobs.dynamic_sampling,
                         knobs.mask_truncated, settings.model_dump()) for part, batches in sorted(by_part.items())]
        shards = run_shards(jobs, score_shard, workers=self.workers, ray_address=self.ray_address,
                            progress=lambda s: self.progress(f"{commit[:8]} {s}"))
        summaries = [s["sandbox"] for s in shards]
        failed = [(job.shard, s["failure"]) for job, s in zip(jobs, shards) if s["failure"]]
        if failed:
            return HarnessRun(commit, {}, [], f"on part {failed[0][0]}: {failed[0][1]}", [], merge_summaries(summaries))
        results = {t: r for s in shards for t, r in s["results"].items()}
        # the calls of an unsharded run that see the whole sample, side by side as there: its prompts rendered in
        # one session, its diagnostics in another; a failure of the diagnose is named before one of the render
        with tempfile.TemporaryDirectory(prefix="backtest-") as tmp, ThreadPoolExecutor(1) as side:
            rendered = side.submit(_render_apart, sandbox, repo.export(commit, Path(tmp) / "harness"), settings,
                                   sample.render_items, results) if sample.render_items else None
            findings, failure, diagnosed = diagnose_sample(
                *open_diagnose_session(repo, commit, sample.views, sandbox, settings), sample, results)
            prompts, render_failure, closed, encoded = rendered.result() if rendered else ([], None, None, None)
        failure = failure or render_failure
        summaries += [closed, diagnosed] if closed is not None else [diagnosed]
        run = HarnessRun(commit, results if not failure else {}, findings, failure, prompts, merge_summaries(summaries))
        if failure is None:
            write_cache(cache, run, encoded)
        return run


def _render_apart(sandbox: Sandbox, harness_dir: Path, settings: BacktestSettings, items: list[dict],
                  results: dict[str, dict]) -> tuple[list, str | None, dict, dict[str, str] | None]:
    """``items`` rendered in a session of their own (the shards scored elsewhere): ``render_and_close``'s answer."""
    session = HarnessSession(sandbox, harness_dir, limits=sandbox_limits(settings),
                             request_timeout_s=settings.timeout_s)
    try:
        session.start()
    except HarnessFailed as exc:
        return [], str(exc), session.close(), None
    except BaseException:
        session.close()
        raise
    return render_and_close(session, items, results)


def sample_all(archive: Archive, settings: BacktestSettings, run_id: str | None = None) -> SampleData:
    """Every backtestable group of the archive as one sample (what ``--groups all`` backtests)."""
    every = all_groups(archive, settings, run_id)
    return SampleData.of(draw_sample(archive, every, run_id=run_id, n_groups=every.sample_groups))
