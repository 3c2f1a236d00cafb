"""Run one task per archive part file, in this process or over Ray workers.

A *shard* is one part file of the trajectory archive (``run_id=<id>/round=<n>/part-<hash>.parquet``):
parts are written once and never rewritten, so a shard's input never changes under a worker.
Each worker opens its own sandbox session for its shard; nothing is shared between shards.

    results = run_shards(jobs, score_part)                                  # in this process, one by one
    results = run_shards(jobs, score_part, workers=2)                       # a local Ray with 2 CPUs
    results = run_shards(jobs, score_part, workers=8, ray_address="auto")   # an existing cluster

On a cluster the run folder (archive, harness repo) must sit on a filesystem every node mounts
at the same path, and the nodes need this project installed (``pip install -e .``).

A worker that dies mid-shard (killed, out of memory, its node lost) gets its shard retried once
on a fresh worker; a second death fails the whole command with :class:`ShardFailed` naming the
shard.  An exception the task itself raises is not retried: it says something about the input
(an unreadable part, Docker down) that a second try would say again.  Results come back in the
order of ``jobs`` whatever order the workers finish in, so sharded and unsharded runs agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from meta_agent.errors import UserError

R = TypeVar("R")
ATTEMPTS = 2
"""A shard whose worker dies is tried this many times in all."""
FORWARDED_ENV = ("META_AGENT_FAILPOINTS", "PYTHONPATH")
"""Set in the controller, set in the workers too: crash points armed for a test reach the shard that runs them,
and a worker imports this project from where the controller does."""


class ShardJob(Protocol):
    """What a shard task receives: anything picklable that names its part file."""

    @property
    def shard(self) -> str: ...


class ShardFailed(UserError):
    """A shard's worker died twice; the message names the shard."""


def run_shards(jobs: Sequence[ShardJob], task: Callable[[Any], R], *, workers: int = 1,
               ray_address: str | None = None, progress: Callable[[str], None] = lambda s: None) -> list[R]:
    """``[task(job) for job in jobs]``: here when ``workers`` is 1 and no ``ray_address`` is given,
    else on Ray, at most ``workers`` shards at a time (module docstring)."""
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    if workers == 1 and ray_address is None:
        out = []
        for i, job in enumerate(jobs, 1):
            progress(f"shard {i}/{len(jobs)}: {job.shard}")
            out.append(task(job))
        return out
    return _on_ray(jobs, task, workers, ray_address, progress)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError("sharding over workers needs Ray: pip install 'ray==2.60.0' (or run with --workers 1)") \
            from None
    return ray


@contextmanager
def ray_session(workers: int, ray_address: str | None = None) -> Iterator[None]:
    """Ray started once for several :func:`run_shards` calls (a backtest shards main's run, then the candidate's):
    a local Ray sized to ``workers``, or the cluster at ``ray_address``; nothing when Ray is up already."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        local = ray_address in (None, "local")
        ray.init(address=ray_address, num_cpus=workers if local else None, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    try:
        yield
    finally:
        if started:
            ray.shutdown()


def _on_ray(jobs: Sequence[ShardJob], task: Callable[[Any], R], workers: int, ray_address: str | None,
            progress: Callable[[str], None]) -> list[R]:
    with ray_session(workers, ray_address):
        return _run(_ray(), jobs, task, workers, progress)


def _run(ray: Any, jobs: Sequence[ShardJob], task: Callable[[Any], R], workers: int,
         progress: Callable[[str], None]) -> list[R]:
    from ray import exceptions as rex

    # died = the worker process or its node went away: the shard's input is fine, so it is tried again
    died = (rex.WorkerCrashedError, rex.NodeDiedError, rex.LocalRayletDiedError, rex.ObjectLostError,
            rex.OutOfMemoryError)
    env = {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    remote = ray.remote(num_cpus=1, max_retries=0)(_call).options(runtime_env={"env_vars": env} if env else None)
    results: dict[int, R] = {}
    attempts = {i: 0 for i in range(len(jobs))}
    queue = list(range(len(jobs)))
    pending: dict[Any, int] = {}
    try:
        while queue or pending:
            while queue and len(pending) < workers:
                i = queue.pop(0)
                attempts[i] += 1
                progress(f"shard {i + 1}/{len(jobs)}: {jobs[i].shard}" + (" (again)" if attempts[i] > 1 else ""))
                pending[remote.remote(task, jobs[i])] = i
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            try:
                results[i] = ray.get(ready[0])
            except died as exc:
                if attempts[i] >= ATTEMPTS:
                    raise ShardFailed(f"shard {jobs[i].shard}: its worker died {attempts[i]} times "
                                      f"({type(exc).__name__}); nothing of this command was kept. Check the "
                                      "worker's memory and logs (/tmp/ray/session_latest/logs), then run it "
                                      "again") from None
                progress(f"shard {jobs[i].shard}: worker died ({type(exc).__name__}); trying it once more")
                queue.insert(0, i)
            except rex.RayTaskError as exc:  # the task raised: its own exception, as in this process
                cause = getattr(exc, "cause", None)
                raise (cause if isinstance(cause, Exception) else exc) from None
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
    return [results[i] for i in range(len(jobs))]


def _call(task: Callable[[Any], R], job: Any) -> R:
    return task(job)
