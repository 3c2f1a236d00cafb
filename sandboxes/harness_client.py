"""The host side of the harness runtime: start it in a sandbox, send it batches, trust nothing it answers.

The backtest, the local backend and verl's reward entry all use this one client, so
harness code always runs the same way: in ``sandboxes/harness_runtime.py``, inside
a container with no network, as ``nobody``, under memory/pids/time/output limits.

    with HarnessSession(sandbox, exported_harness_dir) as harness:
        prompts = harness.render([{"question": "2+3?", "task": {...}}])
        scored = harness.score([trajectory_view(row) for row in rows], reward_range=(0.0, 1.0))
        findings = harness.diagnose(views_with_reward_and_keep)

Every answer is read with ``sandboxes.untrusted`` (regular file, bounded) and
checked here record by record.  A whole-harness failure (import error, a dead or
hung process, a malformed answer) raises ``HarnessFailed`` with the reason; a
trajectory the harness could not judge comes back with ``error`` set.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sandboxes import harness_runtime
from sandboxes.base import Limits, Mount, Sandbox, SandboxProcess
from sandboxes.untrusted import UntrustedOutputError, read_json

RUNTIME_FILE = Path(harness_runtime.__file__)
RUNTIME_ID = f"v{harness_runtime.RUNTIME_VERSION}-" + hashlib.sha256(
    RUNTIME_FILE.read_bytes() + Path(__file__).read_bytes()).hexdigest()[:8]
"""Names the runtime's code and this client's checks: caches of harness outputs are keyed by it."""
MAX_ANSWER_BYTES = 64 << 20
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
    # What a verifier declares harness-visible (SWE: test results and exit status, the environment's
    # own feedback), never its verdict.
    info = row.get("verifier_info")
    info = json.loads(info) if isinstance(info, str) and info.startswith("{") else info
    if isinstance(info, dict) and isinstance(info.get("execution"), dict):
        view["extra_info"]["execution"] = info["execution"]
    assert not set(HIDDEN_FROM_HARNESS) & set(view)
    return view


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
    """A long-lived harness runtime in one sandbox for one exported harness commit."""

    sandbox: Sandbox
    harness_dir: Path
    limits: Limits = field(default_factory=lambda: Limits(timeout_s=4 * 3600))
    """Sandbox limits; ``timeout_s`` bounds the session's whole life."""
    request_timeout_s: float = 300.0
    """One request (a batch) taking longer fails the harness."""
    summary: dict = field(default_factory=dict)
    """What the sandbox saw (exit, duration, limits hit, stderr tail), once closed."""
    _process: SandboxProcess | None = None
    _work: Path | None = None
    _seq: int = 0

    def __enter__(self) -> HarnessSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        self._work = Path(tempfile.mkdtemp(prefix="harness-session-"))
        (self._work / "requests").mkdir()
        out = self._work / "out"
        self._process = self.sandbox.start(
            ["python3", "/in/runtime.py", "/in/harness", "/in/requests", "/out"],
            mounts=[Mount(RUNTIME_FILE, "/in/runtime.py"), Mount(Path(self.harness_dir), "/in/harness"),
                    Mount(self._work / "requests", "/in/requests")],
            output_dir=out, limits=self.limits)

    def close(self) -> dict:
        """Stop the runtime and remove its sandbox; a summary of what the sandbox saw (also kept in ``summary``)."""
        if self._process is not None:
            try:
                self._send({"op": "stop"})
            except OSError:
                pass
            # stop() kills it if the runtime has not exited yet (exit 137): quicker than waiting for it
            result = self._process.stop()
            self.summary = {"exit_code": result.exit_code, "duration_s": round(result.duration_s, 3),
                       "timed_out": result.timed_out, "oom_killed": result.oom_killed,
                       "output_exceeded": result.output_exceeded, "peak_memory_mb": result.peak_memory_mb,
                       "stderr_tail": result.stderr[-2000:]}
            self._process = None
        if self._work is not None:
            shutil.rmtree(self._work, ignore_errors=True)
            self._work = None
        return self.summary

    # -- operations

    def render(self, items: list[dict]) -> list[list[dict] | str]:
        """Per item ``{"question", "task"}``: the chat messages, or the rendering error as text."""
        answer = self._request({"op": "render", "items": items})
        prompts = _list(answer, "prompts", len(items))
        return [_messages(p) for p in prompts]

    def score(self, views: list[dict], *, reward_range: tuple[float, float], dynamic_sampling: bool = False,
              mask_truncated: bool = False) -> list[Scored]:
        """Rewards and keep decisions for one generation batch of trajectory views (knobs from harness.yaml)."""
        answer = self._request({"op": "score", "views": views, "dynamic_sampling": dynamic_sampling,
                                "mask_truncated": mask_truncated})
        rows = _list(answer, "results", len(views))
        return [_scored(row, view["traj_id"], reward_range) for row, view in zip(rows, views)]

    def diagnose(self, views: list[dict]) -> list[dict]:
        """Findings of the harness's diagnostics over views that carry ``reward`` and ``keep``."""
        answer = self._request({"op": "diagnose", "views": views})
        findings = answer.get("findings")
        if not isinstance(findings, list):
            raise HarnessFailed("malformed answer: 'findings' is not a list")
        return [_finding(f) for f in findings[:500]]

    # -- transport

    def _send(self, request: dict) -> int:
        if self._work is None:
            raise HarnessFailed("the harness session is not started")
        n = self._seq
        self._seq += 1
        tmp = self._work / "requests" / f".{n}.tmp"
        tmp.write_text(json.dumps(request))
        tmp.rename(self._work / "requests" / f"{n}.json")
        return n

    def _request(self, request: dict) -> dict:
        assert self._process is not None and self._work is not None, "start() the session first"
        n = self._send(request)
        answer_path = self._work / "out" / f"{n}.json"
        request_path = self._work / "requests" / f"{n}.json"  # before any _fail(), which drops self._work
        started = time.monotonic()
        checked = started
        pause = 0.001
        while not answer_path.exists() and not answer_path.is_symlink():
            now = time.monotonic()
            if now - started > self.request_timeout_s:
                self._fail(f"{request['op']} timed out after {self.request_timeout_s:.0f}s")
            if now - checked > 1.0:
                checked = now
                if not self._process.alive():
                    self._fail(f"the harness runtime died during {request['op']}")
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
        try:
            answer = read_json(answer_path, MAX_ANSWER_BYTES)
        except UntrustedOutputError as exc:
            self._fail(f"unreadable answer to {request['op']}: {exc}")
        finally:
            for path in (answer_path, request_path):
                try:
                    path.unlink()
                except OSError:
                    pass
        if not isinstance(answer, dict):
            self._fail(f"malformed answer to {request['op']}: not an object")
        if "fatal" in answer:
            self._fail(f"{str(answer['fatal'])[:MAX_ERROR_CHARS]}")
        return answer

    def _fail(self, reason: str) -> None:
        summary = self.close()
        why = reason
        if summary.get("oom_killed"):
            why += " (killed: memory limit exceeded)"
        elif summary.get("output_exceeded"):
            why += f" (killed: {summary['output_exceeded']})"
        elif summary.get("timed_out"):
            why += " (killed: session time limit)"
        raise HarnessFailed(why)


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


def _scored(row: Any, traj_id: str, reward_range: tuple[float, float]) -> Scored:
    if not isinstance(row, dict) or row.get("traj_id") != traj_id:
        raise HarnessFailed(f"malformed answer: the result for {traj_id} is missing or out of order")
    reward, error = row.get("reward"), row.get("error")
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
    info = row.get("reward_info")
    info = info if isinstance(info, dict) else {}
    if len(json.dumps(info)) > 4 * harness_runtime.MAX_INFO_CHARS:
        info = {"_truncated": True}
    keep = row.get("keep")
    if not isinstance(keep, bool):
        raise HarnessFailed(f"malformed answer: keep of {traj_id} is {keep!r}")
    return Scored(traj_id, reward, info, keep and error is None, error, invalid)


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
