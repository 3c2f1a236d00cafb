"""What the digest reads from one trajectory row: finite numbers, excerpts, the verifier's reason and execution
feedback. Trusted code over archive rows (``meta_agent.digest`` counts with these; the live checks and the agents'
evidence read rows the same way, so a row means one thing everywhere)."""

from __future__ import annotations

import json
import math
import statistics
from typing import Any

PROMPT_EXCERPT = 160
# The final answer sits at the end of a response: keep its tail as well as its head.
RESPONSE_HEAD, RESPONSE_TAIL = 120, 200
NO_FINAL_ANSWER_REASONS = ("no final answer", "no_final_answer", "no answer")


def finite_or_none(value: Any) -> float | None:
    """A finite float or None (NaN rewards from a failing harness count as unknown)."""
    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def mean_or_none(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def share_or_none(hits: int, total: int) -> float | None:
    return hits / total if total else None


def excerpt(text: Any, head: int, tail: int = 0) -> str:
    """``text`` shortened to its first ``head`` and last ``tail`` characters."""
    s = "" if text is None else str(text)
    if len(s) <= head + tail + 5:
        return s
    return s[:head] + " … " + s[-tail:] if tail else s[:head] + " …"


def json_obj(value: Any) -> Any:
    # rows normally arrive parsed; accept the archive's JSON strings as well
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def example(row: dict) -> dict:
    """The compact view of one trajectory shown in digests: id, excerpts, reward, verified."""
    return {
        "traj_id": str(row.get("traj_id")),
        "prompt": excerpt(row.get("prompt"), PROMPT_EXCERPT),
        "response": excerpt(row.get("response"), RESPONSE_HEAD, RESPONSE_TAIL),
        "reward": finite_or_none(row.get("reward")),
        "verified": finite_or_none(row.get("verified")),
    }


def has_no_final_answer(row: dict) -> bool | None:
    info = json_obj(row.get("verifier_info"))
    if not isinstance(info, dict):
        return None
    reason = str(info.get("reason") or "").strip().lower()
    return reason in NO_FINAL_ANSWER_REASONS


def is_zero_variance(values: list[float]) -> bool:
    # a singleton group has no GRPO signal either
    return max(values) - min(values) < 1e-9


def execution_info(row: dict) -> dict | None:
    info = json_obj(row.get("verifier_info"))
    execution = info.get("execution") if isinstance(info, dict) else None
    return execution if isinstance(execution, dict) else None
