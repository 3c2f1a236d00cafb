"""The host side of the harness runtime: start it in a sandbox, send it batches, trust nothing it answers.

The backtest, the local backend and verl's reward entry all use this one client, so
harness code always runs the same way: in ``sandboxes/harness_runtime.py``, inside
a container with no network and no host mount, as ``nobody``, under memory/pids/time limits.

    with HarnessSession(sandbox, exported_harness_dir) as harness:
        prompts = harness.render([{"question": "2+3?", "task": {...}}])
        scored = harness.score([trajectory_view(row) for row in rows], reward_range=(0.0, 1.0))
        scored = harness.score_batches(batches_of_views, reward_range=(0.0, 1.0))  # many batches per request
        findings = harness.diagnose(views_with_reward_and_keep)

Requests and answers travel over the container's stdin and stdout as length-framed
JSON (views in columns).  Every answer is bounded, parsed strictly
(``sandboxes.untrusted.parse_json``: no NaN) and checked here entry by entry.  A whole-harness failure (import error, a dead or
hung process, a malformed answer) raises ``HarnessFailed`` with the reason; a
trajectory the harness could not judge comes back with ``error`` set.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import logging
import math
import operator
import tarfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from sandboxes import harness_runtime
from sandboxes.base import Limits, Sandbox, SandboxProcess
from sandboxes.docker import ChannelClosed
from sandboxes.untrusted import UntrustedOutputError, parse_json

log = logging.getLogger(__name__)

RUNTIME_FILE = Path(harness_runtime.__file__)
RUNTIME_ID = f"v{harness_runtime.RUNTIME_VERSION}-" + hashlib.sha256(
    RUNTIME_FILE.read_bytes() + Path(__file__).read_bytes()).hexdigest()[:8]
"""Names the runtime's code and this client's checks: caches of harness outputs are keyed by it."""
MAX_ANSWER_BYTES = 256 << 20
MAX_HARNESS_BYTES = 32 << 20
REQUEST_VIEWS = 16_384
"""Trajectories per score request (whole batches; a bigger batch travels alone)."""
REQUEST_S_BASE = 30.0
REQUEST_S_PER_ITEM = 0.06
"""A request of n trajectories (or prompts) may take 30 s + 60 ms * n, at most ``request_timeout_s``."""
HARNESS_LIMITS = Limits(timeout_s=4 * 3600, memory_mb=1024, cpus=1.0, pids=64, tmpfs_mb=64)
"""The one container every harness session gets, whoever the caller: what harness code can read of it
(cgroup memory and CPU, pids.max, /tmp's size) must not tell a backtest from training."""
_OBSERVABLE = (HARNESS_LIMITS.memory_mb, HARNESS_LIMITS.cpus, HARNESS_LIMITS.pids, HARNESS_LIMITS.tmpfs_mb)
MAX_PROMPT_CHARS = 64_000
MAX_ERROR_CHARS = 2000
SEVERITIES = ("info", "warning", "error")
VIEW_KEYS = ("traj_id", "group_id", "sample_idx", "task_id", "data_source", "prompt", "response", "ground_truth",
             "response_tokens", "truncated", "finish_reason", "extra_info")
HIDDEN_FROM_HARNESS = ("verified", "verifier_info")
FLOAT32_MAX = float(np.finfo(np.float32).max)


class HarnessFailed(Exception):
    """The harness as a whole failed in its sandbox; the message says why."""


@dataclass
class Scored:
    """What the harness made of one trajectory (checked, but still the harness's word)."""

    traj_id: str
    reward: float | None
    reward_info: dict
    keep: bool
    error: str | None
    invalid_reward: float | None = None
    """The number the harness returned when it was refused for the domain's range or float32 (``reward`` is
    None then): the gate counts it as an invalid reward, which no branch may have."""


def trajectory_view(row: dict) -> dict:
    """What harness code sees of one trajectory row, the same in training, backtests and verl.

    Never the verifier's outcome.  ``group_id`` is made unique across runs and rounds;
    ``extra_info`` is what ``compute_score`` receives.
    """
    ground_truth = row.get("ground_truth")
    if isinstance(ground_truth, str):
        ground_truth = json.loads(ground_truth)
    group = f"{row['run_id']}/{row['round']}/{row['group_id']}"
    view = {
        "traj_id": row["traj_id"], "group_id": group, "sample_idx": row["sample_idx"], "task_id": row["task_id"],
        "data_source": row["data_source"], "prompt": row["prompt"], "response": row["response"],
        "ground_truth": ground_truth, "response_tokens": row.get("response_tokens"),
        "truncated": row.get("truncated"), "finish_reason": row.get("finish_reason"),
        "extra_info": {"traj_id": row["traj_id"], "task_id": row["task_id"], "group_id": group,
                       "sample_idx": row["sample_idx"], "split": row["split"]},
    }
    execution = harness_visible(row.get("verifier_info"))
    if execution is not None:
        view["extra_info"]["execution"] = execution
    assert not set(HIDDEN_FROM_HARNESS) & set(view)
    return view


def harness_visible(verifier_info: Any) -> dict | None:
    """What a verifier declares harness-visible, ``verifier_info["execution"]`` (SWE: test results and exit
    status; code: each test's outcome), never its verdict; None when it declares nothing.  The backtest's
    views and verl's reward entry both take it from here, so harness code sees the same record in both."""
    info = json.loads(verifier_info) if isinstance(verifier_info, str) and verifier_info.startswith("{") \
        else verifier_info
    if isinstance(info, dict) and isinstance(info.get("execution"), dict):
        return info["execution"]
    return None


def batches(views: list[dict], steps: list[tuple]) -> list[list[dict]]:
    """Split views into the generation batches training scored them in (one per (run, round, step))."""
    out: dict[tuple, list[dict]] = {}
    for view, step in zip(views, steps):
        out.setdefault(step, []).append(view)
    return [out[k] for k in sorted(out)]


def reward_problem(reward: float, reward_range: tuple[float, float]) -> str | None:
    """Why a (finite) reward cannot train in this domain, or None."""
    if abs(reward) > FLOAT32_MAX:
        return f"reward {reward!r} is not representable in float32"
    lo, hi = reward_range
    if not lo <= reward <= hi:
        return f"reward {reward!r} is outside the domain's range [{lo}, {hi}]"
    return None


@dataclass
class HarnessSession:
    """A long-lived harness runtime in one sandbox for one exported harness commit.

    The runtime and the harness files travel into the container over its stdin (nothing of the host
    is mounted); requests and answers then travel over its stdin and stdout.  Every caller gets the
    same container (``HARNESS_LIMITS``) and the same call shapes inside it, so harness code cannot
    tell a backtest from training by what it can observe.
    """

    sandbox: Sandbox
    harness_dir: Path
    limits: Limits = field(default_factory=lambda: Limits(timeout_s=4 * 3600))
    """Only ``timeout_s`` (the session's whole life, invisible inside) is taken from here; memory, CPU,
    processes and scratch space are always ``HARNESS_LIMITS``'s, which harness code could read."""
    request_timeout_s: float = 300.0
    """The most one request may take; below it, a request gets ``REQUEST_S_BASE`` plus
    ``REQUEST_S_PER_ITEM`` per trajectory or prompt it carries."""
    summary: dict = field(default_factory=dict)
    """What the sandbox saw (exit, duration, limits hit, stderr tail), once closed."""
    runtime_file: Path = RUNTIME_FILE
    """The runtime streamed into the container (tests give a hostile one to check the host's reading)."""
    _process: SandboxProcess | None = None

    def __enter__(self) -> HarnessSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if (self.limits.memory_mb, self.limits.cpus, self.limits.pids, self.limits.tmpfs_mb) != _OBSERVABLE:
            log.debug("harness session: memory/cpus/pids/tmpfs of %s ignored; every session gets %s",
                      self.limits, HARNESS_LIMITS)
        payload = _bundle(Path(self.runtime_file), Path(self.harness_dir))
        limits = replace(HARNESS_LIMITS, timeout_s=self.limits.timeout_s)
        self._process = self.sandbox.start_attached(["python3", "-c", harness_runtime.BOOTSTRAP], limits=limits)
        try:
            self._process.channel.send(b"%d\n" % len(payload) + payload)
        except OSError as exc:
            self._fail(f"the harness runtime did not take its files: {exc}")

    def close(self) -> dict:
        """Stop the runtime and remove its sandbox; a summary of what the sandbox saw (also kept in ``summary``)."""
        if self._process is not None:
            # the container's CPU time while it still runs (after the stop request it may be gone): the gate
            # compares a candidate's with main's (meta_agent.judge.cpu_cost)
            measure = getattr(self._process, "usage", None)
            usage = measure() if measure is not None else {"cpu_s": None, "pids": None}
            cpu_s = usage["cpu_s"]
            try:
                self._process.channel.send(_frame({"op": "stop"}))
            except OSError:
                pass
            # stop() kills it if the runtime has not exited yet (exit 137): quicker than waiting for it
            result = self._process.stop()
            self.summary = {"exit_code": result.exit_code, "duration_s": round(result.duration_s, 3),
                            "timed_out": result.timed_out, "oom_killed": result.oom_killed,
                            "output_exceeded": result.output_exceeded, "peak_memory_mb": result.peak_memory_mb,
                            "cpu_s": cpu_s if cpu_s is not None else result.extra.get("cpu_s"),
                            "pids_at_close": usage["pids"],
                            "stderr_tail": result.stderr[-2000:]}
            self._process = None
        return self.summary

    # -- operations

    def render(self, items: list[dict]) -> list[list[dict] | str]:
        """Per item ``{"question", "task"}``: the chat messages, or the rendering error as text."""
        answer = self._request({"op": "render", "items": items}, len(items))
        prompts = _list(answer, "prompts", len(items))
        return [_messages(p) for p in prompts]

    def score(self, views: list[dict], *, reward_range: tuple[float, float], dynamic_sampling: bool = False,
              mask_truncated: bool = False) -> list[Scored]:
        """Rewards and keep decisions for one generation batch of trajectory views (knobs from harness.yaml)."""
        return self.score_batches([views], reward_range=reward_range, dynamic_sampling=dynamic_sampling,
                                  mask_truncated=mask_truncated)

    def score_batches(self, batches: list[list[dict]], *, reward_range: tuple[float, float],
                      dynamic_sampling: bool = False, mask_truncated: bool = False) -> list[Scored]:
        """``score`` of each generation batch, in order, with many batches per request: one flat list."""
        out: list[Scored] = []
        request: list[list[dict]] = []
        size = 0
        for batch in [*batches, None]:
            if batch is not None and (size + len(batch) <= REQUEST_VIEWS or not request):
                request.append(batch)
                size += len(batch)
                continue
            if request:
                views = [v for b in request for v in b]
                answer = self._request({"op": "score", "views": encode_views(views), "batches": [len(b) for b in request],
                                        "dynamic_sampling": dynamic_sampling, "mask_truncated": mask_truncated},
                                       len(views))
                out.extend(_scored_columns(answer, views, reward_range))
            request, size = ([batch], len(batch)) if batch is not None else ([], 0)
        return out

    def diagnose(self, views: list[dict]) -> list[dict]:
        """Findings of the harness's diagnostics over views that carry ``reward`` and ``keep``."""
        answer = self._request({"op": "diagnose", "views": encode_views(views)}, len(views))
        findings = answer.get("findings")
        if not isinstance(findings, list):
            raise HarnessFailed("malformed answer: 'findings' is not a list")
        return [_finding(f) for f in findings[:500]]

    # -- transport

    def request_deadline_s(self, items: int) -> float:
        """How long a request of ``items`` trajectories or prompts may take: it scales with the request."""
        return min(self.request_timeout_s, REQUEST_S_BASE + REQUEST_S_PER_ITEM * items)

    def _request(self, request: dict, items: int) -> dict:
        if self._process is None:
            raise HarnessFailed("the harness session is not started (or already failed)")
        channel = self._process.channel
        op = request["op"]
        timeout = self.request_deadline_s(items)
        try:
            channel.send(_frame(request))
            deadline = time.monotonic() + timeout
            header = channel.read_line(12, deadline)
            if not header.isdigit():
                self._fail(f"unreadable answer to {op}: the frame header is not a length")
            n = int(header)
            if n > MAX_ANSWER_BYTES:
                self._fail(f"unreadable answer to {op}: {n} bytes, over the limit of {MAX_ANSWER_BYTES}")
            data = channel.read(n, deadline)
        except TimeoutError:
            self._fail(f"{op} timed out after {timeout:.0f}s")
        except ValueError as exc:
            self._fail(f"unreadable answer to {op}: {exc}")
        except (ChannelClosed, OSError):
            self._fail(f"the harness runtime died during {op}")
        try:
            answer = parse_json(data, f"the answer to {op}")
        except UntrustedOutputError as exc:
            self._fail(f"unreadable answer to {op}: {exc}")
        if not isinstance(answer, dict):
            self._fail(f"malformed answer to {op}: not an object")
        if "fatal" in answer:
            self._fail(f"{str(answer['fatal'])[:MAX_ERROR_CHARS]}")
        return answer

    def _fail(self, reason: str) -> NoReturn:
        summary = self.close()
        why = reason
        if summary.get("oom_killed"):
            why += " (killed: memory limit exceeded)"
        elif summary.get("timed_out"):
            why += " (killed: session time limit)"
        raise HarnessFailed(why)


def _frame(request: dict) -> bytes:
    data = json.dumps(request, separators=(",", ":")).encode()
    return b"%d\n" % len(data) + data


def _bundle(runtime: Path, harness_dir: Path) -> bytes:
    """A tar of ``runtime.py`` and ``harness/`` (symlinks kept as links, resolved only inside the container)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(runtime, arcname="runtime.py")
        tar.add(harness_dir, arcname="harness")
    if buffer.tell() > MAX_HARNESS_BYTES:
        raise HarnessFailed(f"the harness at {harness_dir} holds {buffer.tell()} bytes, over the limit of "
                            f"{MAX_HARNESS_BYTES}: keep data files out of the harness")
    return buffer.getvalue()


def encode_views(views: list[dict]) -> dict[str, dict]:
    """Views as encoded columns (``harness_runtime.decode_columns`` reads them): the compact form on the wire.

    A column is ``{"same": key}`` when it equals a column the decoder has already decoded, ``{"runs": [[value,
    count], ...]}`` when runs of equal values make it much shorter (a group's prompt, task and ground truth),
    ``{"dicts": {...}}`` for dicts with one key order (``extra_info``, each key a column in turn), else
    ``{"values": [...]}``.
    """
    keys = list(views[0]) if views else list(VIEW_KEYS)
    if any(map(len(keys).__ne__, map(len, views))):  # (C-level maps: this runs over every view sent)
        view = next(v for v in views if len(v) != len(keys))
        raise ValueError(f"every view needs the same keys; {view.get('traj_id')} has {sorted(view)}")
    return _encode_all({k: list(map(operator.itemgetter(k), views)) for k in keys}, {})


def _encode_all(columns: dict[str, list], outer: dict[str, list]) -> dict[str, dict]:
    """Encode one level of columns in order.  A ``same`` reference may name only what the decoder holds by
    then, looked up as it looks it up: the enclosing levels' earlier columns (``outer``), overridden by this
    level's earlier columns on a shared name."""
    encoded: dict[str, dict] = {}
    done: dict[str, list] = {}
    for key, column in columns.items():
        encoded[key] = _encode(column, outer | done)
        done[key] = column
    return encoded


def _encode(column: list, available: dict[str, list]) -> dict:
    for name, other in available.items():
        if other is not column and len(other) == len(column) and other == column:
            return {"same": name}
    if column and set(map(type, column)) == {dict}:
        order = list(column[0])
        if order and all(map(order.__eq__, map(list, column))):  # (empty dicts have no columns to count them by)
            return {"dicts": _encode_all({k: list(map(operator.itemgetter(k), column)) for k in order}, available)}
    # where a new run starts (C-level comparisons: this runs over every column of every request)
    starts = [0, *itertools.compress(range(1, len(column)), map(operator.ne, column[1:], column[:-1]))]
    if 3 * len(starts) > len(column):
        return {"values": column}
    ends = starts[1:] + [len(column)]
    return {"runs": [[column[a], b - a] for a, b in zip(starts, ends)]}


# -- checks of what the runtime answered (hostile input)


def _list(answer: dict, key: str, n: int) -> list:
    items = answer.get(key)
    if not isinstance(items, list) or len(items) != n:
        got = f"{len(items)} items" if isinstance(items, list) else type(items).__name__
        raise HarnessFailed(f"malformed answer: '{key}' should list {n} items, got {got}")
    return items


def _text(value: Any, limit: int = MAX_ERROR_CHARS) -> str:
    return str(value)[:limit]


def _messages(item: Any) -> list[dict] | str:
    if not isinstance(item, dict):
        raise HarnessFailed("malformed answer: a rendered prompt is not an object")
    if "error" in item:
        return _text(item["error"]) or "rendering failed"
    messages = item.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= 2:
        raise HarnessFailed("malformed answer: a rendered prompt has no message list of 1-2 messages")
    out = []
    for m in messages:
        if not (isinstance(m, dict) and m.get("role") in ("system", "user") and isinstance(m.get("content"), str)):
            raise HarnessFailed("malformed answer: a rendered message is not {role: system|user, content: str}")
        if len(m["content"]) > MAX_PROMPT_CHARS:
            return f"a rendered {m['role']} prompt has {len(m['content'])} characters (max {MAX_PROMPT_CHARS})"
        out.append({"role": m["role"], "content": m["content"]})
    if out[-1]["role"] != "user":
        raise HarnessFailed("malformed answer: the last rendered message is not the user's")
    return out


def _scored_columns(answer: dict, views: list[dict], reward_range: tuple[float, float]) -> list[Scored]:
    """The score answer's columns, checked entry by entry against the views sent (same length, same order)."""
    n = len(views)
    rewards, infos, keeps, errors = (_list(answer, key, n) for key in ("reward", "info", "keep", "error"))
    out = []
    for view, reward, info, keep, error in zip(views, rewards, infos, keeps, errors):
        traj_id = view["traj_id"]
        if error is not None:
            error = _text(error)
        invalid = None
        if reward is not None:
            if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
                raise HarnessFailed(f"malformed answer: reward of {traj_id} is {reward!r}")
            reward = float(reward)
            problem = reward_problem(reward, reward_range)
            if problem:
                reward, invalid, error = None, reward, error or problem
        elif error is None:
            error = "no reward and no error"
        if not isinstance(info, dict):
            info = {}
        elif not _small_info(info) and (len(info) > 64 or len(json.dumps(info)) > 4 * harness_runtime.MAX_INFO_CHARS):
            info = {"_truncated": True}
        if not isinstance(keep, bool):
            raise HarnessFailed(f"malformed answer: keep of {traj_id} is {keep!r}")
        out.append(Scored(traj_id, reward, info, keep and error is None, error, invalid))
    return out


_SMALL_SCALARS = (int, float, bool, type(None))
_SMALL_SCALAR_SET = set(_SMALL_SCALARS)


def _small_info(info: dict) -> bool:
    """A reward info that is surely within the size cap without encoding it: at most 16 entries of short keys
    and numbers or short strings (what nearly every reward returns; checked per trajectory, so it must be
    cheap).  Anything else is measured exactly."""
    if len(info) > 16:
        return False
    if set(map(type, info.values())) <= _SMALL_SCALAR_SET and set(map(type, info)) <= {str}:
        return not info or max(map(len, info)) <= 200  # numbers only: the keys' lengths decide (C-level)
    return all(type(k) is str and len(k) <= 200 and (type(v) in _SMALL_SCALARS or
                                                                          (type(v) is str and len(v) <= 500))
                                   for k, v in info.items())


def _finding(f: Any) -> dict:
    if not isinstance(f, dict):
        return _bad_finding("a finding is not an object")
    try:
        rate = float(f.get("rate", 0.0))
    except (TypeError, ValueError):
        return _bad_finding(f"finding {_text(f.get('name'), 100)!r} has a rate that is not a number")
    if not math.isfinite(rate):
        return _bad_finding(f"finding {_text(f.get('name'), 100)!r} has a rate that is not finite")
    severity = f.get("severity")
    ids = f.get("example_ids")
    return {
        "name": _text(f.get("name", "unnamed"), 200),
        "severity": severity if severity in SEVERITIES else "warning",
        "rate": min(max(rate, 0.0), 1.0),
        "example_ids": [_text(x, 200) for x in ids[:10]] if isinstance(ids, list) else [],
        "message": _text(f.get("message", ""), 500),
        "diagnostic": _text(f.get("diagnostic", ""), 200),
    }


def _bad_finding(message: str) -> dict:
    return {"name": "diagnostics:malformed", "severity": "error", "rate": 1.0, "example_ids": [],
            "message": message, "diagnostic": ""}
