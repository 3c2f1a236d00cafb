"""The trusted reward entry verl calls: harness reward from the sandboxed runtime, verifier outcome beside it.

verl loads this file by path (``reward.custom_reward_function.path``) inside its reward
workers and calls ``compute_score`` once per trajectory, by keyword, with the fixed
``reward_kwargs`` the launcher set (``harness_dir``, ``domain_ref``, ``records_dir``).
``compute_score`` is a coroutine, so verl 0.9.1's reward loop awaits it
(``NaiveRewardManager.run_single``: ``inspect.iscoroutinefunction`` through
``get_custom_reward_fn``'s partial) and many calls are in flight at once.  The harness
file is never imported here: each worker process starts one harness runtime in a Docker
sandbox (``sandboxes.harness_client.HarnessSession``, the runtime the backtest and the
local backend use); the calls in flight are gathered (``BATCH_WINDOW_S``, at most
``CHUNK``) and travel in one request, each trajectory still scored alone, as a batch
of its own, exactly as one call at a time scores it.  The domain's trusted verifier runs
here, on the worker.

What it returns to verl (every key becomes reward extra info)::

    {"score": harness reward, "keep": 1.0 | 0.0, "verified": verifier score, "verifier_info": JSON text,
     "harness_error": 0.0 | 1.0}

verl 0.9.1 keeps that dict per row: the agent loop stores it in the trajectory's
``extra_fields["reward_extra_info"]`` (``AgentLoopWorker._compute_score``), which TransferQueue holds
under the row's key ``{uid}_{session}_{output}`` (``agent_loop_tq._agent_loop_postprocess``).  So
``verified`` and ``verifier_info`` are the one verdict of the trajectory: the sampler and the archive
read it from there and from the records, and never grade again (a code program near its time limit,
or an agent-loop episode graded as a patch-mode answer, would grade differently the second time).

A harness or sandbox failure is an error with no score: ``score`` is a placeholder 0.0 that
never trains, because ``keep`` is 0 and the sampler (``rl_backend.verl.sampler``) drops the
trajectory before the batch is formed; the record says ``reward: null`` and why.  Each call
appends one line to ``<records_dir>/<host>-<pid>.jsonl`` (the harness's reward, info, keep
or error, and the verifier's outcome), which the importer joins with verl's rollout dump,
whose lines carry only the score.

Every node that runs reward workers needs this project installed, Docker with the sandbox
image, and the harness folder at the same path.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import threading
from pathlib import Path
from typing import Any, TextIO

from rl_backend.base import load_domain
from rl_backend.verl.metering import meter
from sandboxes.base import Limits
from sandboxes.harness_client import HarnessSession, harness_visible

RUNTIME_LIMITS = Limits(timeout_s=24 * 3600, memory_mb=1024, cpus=1.0, pids=64)
REQUEST_TIMEOUT_S = 120.0

BATCH_WINDOW_S = 0.002
"""How long the first call in flight waits for others to join its request."""
CHUNK = 512
"""Calls per request: a full one leaves at once, and the runtime scores it while the later calls are verified."""

_lock = threading.Lock()  # verl runs sync reward functions in a thread pool; one runtime serves them in turn
_sessions: dict[str, HarnessSession] = {}
_batchers: dict[tuple[int, str, tuple[float, float]], _Batcher] = {}
_records_lock = threading.Lock()  # apart from _lock: a record is written while the runtime scores other calls
_record_files: dict[Path, TextIO] = {}  # this process's records file of each records folder, kept open


def record_key(response: str, ground_truth: Any) -> str:
    """Joins a record with a dump line: the response and the ground truth exactly as verl passed them."""
    gts = ground_truth if isinstance(ground_truth, str) else json.dumps(ground_truth, sort_keys=True)
    return hashlib.sha256(f"{response}\x1f{gts}".encode()).hexdigest()[:24]


def _session(harness_dir: str) -> HarnessSession:
    session = _sessions.get(harness_dir)
    if session is None:
        from sandboxes.docker import DockerSandbox

        session = HarnessSession(DockerSandbox(), Path(harness_dir), limits=RUNTIME_LIMITS,
                                 request_timeout_s=REQUEST_TIMEOUT_S)
        session.start()
        _sessions[harness_dir] = session
    return session


def view(data_source: str, response: str, ground_truth: Any, extra_info: dict, key: str, *, sample_idx: int = 0,
         response_tokens: int | None = None, truncated: bool | None = None, verifier_info: Any = None) -> dict:
    """The trajectory view harness code sees (``sandboxes.harness_client.trajectory_view``'s keys).

    A reward worker knows neither the session nor the length cap; the sampler, which judges whole
    groups (``rl_backend.verl.sampler``), passes them.  ``extra_info`` (what the harness's reward
    receives) is the same from both, so the harness scores the same input twice.  What the verifier
    declares harness-visible (``verifier_info["execution"]``: the code domain's test outcomes, SWE's
    test results) goes into ``extra_info["execution"]`` exactly as ``trajectory_view`` puts it there for
    a backtest, never the verdict."""
    task_id = str(extra_info.get("task_id", "unknown"))
    group = f"verl/{extra_info.get('run_id', '')}/{extra_info.get('round', '')}/{task_id}"
    finish = None if truncated is None else ("length" if truncated else "stop")
    out = {"traj_id": key, "group_id": group, "sample_idx": sample_idx, "task_id": task_id,
           "data_source": data_source, "prompt": str(extra_info.get("prompt", "")), "response": response,
           "ground_truth": ground_truth, "response_tokens": response_tokens, "truncated": truncated,
           "finish_reason": finish,
           "extra_info": {"traj_id": key, "task_id": task_id, "group_id": group, "sample_idx": 0,
                          "split": str(extra_info.get("split", "train"))}}
    execution = harness_visible(verifier_info)
    if execution is not None:
        out["extra_info"]["execution"] = execution
    return out



def _verified(domain: Any, data_source: str, response: str, truth: Any, extra_info: dict) -> tuple[float, Any]:
    if "swe_verified" in extra_info:  # an agent-loop episode, graded by the trusted grader in the loop
        return float(extra_info["swe_verified"]), extra_info.get("swe_verifier_info")
    verified, verifier_info = domain.verify(data_source, response, truth)
    return float(verified), verifier_info


def info_text(verifier_info: Any) -> str | None:
    """The verifier's info as the archive's JSON text (an agent-loop episode's already is JSON text)."""
    if verifier_info is None or isinstance(verifier_info, str):
        return verifier_info
    return json.dumps(verifier_info, ensure_ascii=False, default=str)


def _record(key: str, extra_info: dict, verified: float, verifier_info: Any) -> dict:
    return {"key": key, "task_id": extra_info.get("task_id"), "reward": None, "reward_info": {}, "keep": False,
            "error": None, "verified": verified, "verifier_info": info_text(verifier_info)}


def score_one(data_source: str, response: str, ground_truth: Any, extra_info: dict, *, harness_dir: str,
              domain_ref: str) -> dict:
    """The record of one trajectory: harness reward, info, keep or error, and the verifier's outcome."""
    domain = load_domain(domain_ref)
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    key = record_key(response, ground_truth)
    record = _record(key, extra_info, *_verified(domain, data_source, response, truth, extra_info))
    try:
        one = view(data_source, response, truth, extra_info, key, verifier_info=record["verifier_info"])
        with _lock:
            scored = _session(harness_dir).score([one],
                                                 reward_range=domain.reward_range)[0]
        record.update(reward=scored.reward, reward_info=scored.reward_info, keep=scored.keep, error=scored.error)
    except Exception as exc:  # noqa: BLE001 - the sandbox or the runtime failed (HarnessFailed, Docker): no score
        _sessions.pop(harness_dir, None)
        record["error"] = f"harness runtime: {exc}"[:2000]
    return record


class _Batcher:
    """Gathers the views of the calls in flight on one event loop into requests to the runtime.

    A request leaves as soon as ``CHUNK`` calls are gathered, from the thread pool, so the event loop goes on
    verifying and viewing the later calls while the runtime scores the earlier ones; the last few leave
    ``BATCH_WINDOW_S`` after the first of them arrived.  Each request's record lines are written in one
    write before its calls get their scores."""

    def __init__(self, harness_dir: str, reward_range: tuple[float, float]) -> None:
        self.harness_dir, self.reward_range = harness_dir, reward_range
        self.pending: list[tuple[dict, dict, str | None, asyncio.Future]] = []
        self.flusher: asyncio.Task | None = None

    async def score(self, one: dict, record: dict, records_dir: str | None) -> None:
        """Fill ``record`` with the harness's reward, info, keep or error (and write it to ``records_dir``)."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.pending.append((one, record, records_dir, future))
        if len(self.pending) >= CHUNK:
            self._send(loop)
        elif self.flusher is None or self.flusher.done():
            self.flusher = loop.create_task(self._flush())
        await future

    async def _flush(self) -> None:
        await asyncio.sleep(BATCH_WINDOW_S)
        self._send(asyncio.get_running_loop())

    def _send(self, loop: asyncio.AbstractEventLoop) -> None:
        while self.pending:
            taken, self.pending = self.pending[:CHUNK], self.pending[CHUNK:]
            done = loop.run_in_executor(None, self._score, taken)
            done.add_done_callback(lambda d, taken=taken: _resolve(taken, d))

    def _score(self, taken: list[tuple[dict, dict, str | None, asyncio.Future]]) -> None:
        with _lock:
            try:  # each trajectory a batch of its own: what one call at a time would give
                session = _session(self.harness_dir)
                scored = session.score_batches([[view] for view, *_ in taken], reward_range=self.reward_range)
                meter(session, scored, taken[0][2])  # training is metered: CPU and reward info (issue 45)
                for (_, record, *_), one in zip(taken, scored):
                    record.update(reward=one.reward, reward_info=one.reward_info, keep=one.keep, error=one.error)
            except Exception as exc:  # noqa: BLE001 - the sandbox or the runtime failed: every call in it fails
                _sessions.pop(self.harness_dir, None)
                for _, record, *_ in taken:
                    record["error"] = f"harness runtime: {exc}"[:2000]
        lines: dict[str, list[str]] = {}
        for _, record, records_dir, _ in taken:
            if records_dir is not None:
                lines.setdefault(records_dir, []).append(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        for records_dir, chunk in lines.items():
            _append_record(Path(records_dir), "".join(chunk))


def _resolve(taken: list[tuple[dict, dict, str | None, asyncio.Future]], done: asyncio.Future) -> None:
    """Hand each call its filled record (on the event loop), or the failure to write the records."""
    error = done.exception()
    for *_, future in taken:
        if future.done():
            continue
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(None)


async def score_one_batched(data_source: str, response: str, ground_truth: Any, extra_info: dict, *,
                            harness_dir: str, domain_ref: str, records_dir: str | None = None) -> dict:
    """``score_one``, with the harness's part gathered with the other calls in flight into one request; with
    ``records_dir``, the record is written there before it is returned."""
    domain = load_domain(domain_ref)
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    key = record_key(response, ground_truth)
    record = _record(key, extra_info, *_verified(domain, data_source, response, truth, extra_info))
    batcher_key = (id(asyncio.get_running_loop()), harness_dir, tuple(domain.reward_range))
    batcher = _batchers.get(batcher_key)
    if batcher is None:
        batcher = _batchers[batcher_key] = _Batcher(harness_dir, tuple(domain.reward_range))
    await batcher.score(view(data_source, response, truth, extra_info, key, verifier_info=record["verifier_info"]),
                        record, records_dir)
    return record


async def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: dict | None = None, *,
                        harness_dir: str, domain_ref: str, records_dir: str, **kwargs: Any) -> dict:
    """verl's reward function: ``{"score", "keep", "verified", "verifier_info", "harness_error"}``; see the module
    docstring."""
    record = await score_one_batched(data_source, solution_str, ground_truth, dict(extra_info or {}),
                                     harness_dir=harness_dir, domain_ref=domain_ref, records_dir=records_dir)
    failed = record["reward"] is None
    # verifier_info as text, never None: verl's reward loop stacks each key's values into one numpy array
    return {"score": 0.0 if failed else record["reward"], "keep": float(bool(record["keep"]) and not failed),
            "verified": record["verified"], "verifier_info": record["verifier_info"] or "null",
            "harness_error": float(failed)}


def _append_record(folder: Path, line: str) -> None:
    """Whole lines into this process's records file, written before verl gets the scores (the file stays open)."""
    path = folder / f"{socket.gethostname()}-{os.getpid()}.jsonl"
    with _records_lock:
        f = _record_files.get(path)
        if f is not None and os.fstat(f.fileno()).st_nlink == 0:  # deleted under us: its later lines go to a new one
            f.close()
            f = None
        if f is None:
            folder.mkdir(parents=True, exist_ok=True)
            f = _record_files[path] = path.open("a", encoding="utf-8")
        f.write(line)
        f.flush()


def load_records(records_dir: Path) -> dict[str, dict]:
    """Every record the reward workers of a round wrote, by :func:`record_key` (a torn last line is skipped)."""
    out: dict[str, dict] = {}
    for path in sorted(Path(records_dir).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a worker killed mid-write; the dump line then keeps its own score
            out[record["key"]] = record
    return out


def close_sessions() -> None:
    """Stop this process's harness runtimes (tests and benchmarks; verl's workers just exit)."""
    with _lock:
        for session in _sessions.values():
            session.close()
        _sessions.clear()
        _batchers.clear()
    with _records_lock:
        for f in _record_files.values():
            f.close()
        _record_files.clear()
