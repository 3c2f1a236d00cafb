"""Checks of everything the harness runtime answers: it runs harness code, so every answer is hostile input.

An answer is already bounded and parsed strictly (``sandboxes.harness_client``); here it is checked entry
by entry: prompts, rewards (finite, in the domain's range, float32), keep flags, reward info sizes and
findings.  A malformed answer raises :class:`HarnessFailed`; a trajectory the harness could not judge
comes back as a :class:`Scored` with ``error`` set.  ``sandboxes.harness_client`` re-exports these names.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from sandboxes import harness_runtime

MAX_PROMPT_CHARS = 64_000
MAX_ERROR_CHARS = 2000
SEVERITIES = ("info", "warning", "error")
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


def reward_problem(reward: float, reward_range: tuple[float, float]) -> str | None:
    """Why a (finite) reward cannot train in this domain, or None."""
    if abs(reward) > FLOAT32_MAX:
        return f"reward {reward!r} is not representable in float32"
    lo, hi = reward_range
    if not lo <= reward <= hi:
        return f"reward {reward!r} is outside the domain's range [{lo}, {hi}]"
    return None


def answer_list(answer: dict, key: str, n: int) -> list:
    items = answer.get(key)
    if not isinstance(items, list) or len(items) != n:
        got = f"{len(items)} items" if isinstance(items, list) else type(items).__name__
        raise HarnessFailed(f"malformed answer: '{key}' should list {n} items, got {got}")
    return items


def _text(value: Any, limit: int = MAX_ERROR_CHARS) -> str:
    return str(value)[:limit]


def checked_messages(item: Any) -> list[dict] | str:
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


def scored_columns(answer: dict, views: list[dict], reward_range: tuple[float, float]) -> list[Scored]:
    """The score answer's columns, checked entry by entry against the views sent (same length, same order)."""
    n = len(views)
    rewards, infos, keeps, errors = (answer_list(answer, key, n) for key in ("reward", "info", "keep", "error"))
    if _plain_columns(rewards, infos, keeps, errors, reward_range):  # every entry passes every check below
        return list(map(Scored, map(operator.itemgetter("traj_id"), views), rewards, infos, keeps,
                        itertools.repeat(None, n)))
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


def _plain_columns(rewards: list, infos: list, keeps: list, errors: list, reward_range: tuple[float, float]) -> bool:
    """Whether a whole answer is what nearly every answer is: no errors, bool keeps, float rewards that are finite,
    in ``reward_range`` and within float32, and reward infos that ``_small_info`` would pass.  Checked column by
    column in C-level passes (per trajectory in Python, these checks were most of the host's CPU in a backtest);
    False sends the answer through the checks one entry at a time, which decide the same for it."""
    if set(map(type, errors)) - {type(None)} or set(map(type, keeps)) - {bool} or set(map(type, rewards)) - {float}:
        return False
    if rewards:
        lo, hi = reward_range
        low, high = min(rewards), max(rewards)  # (a NaN compares False both ways: caught by the finite check)
        if not (math.isfinite(low) and math.isfinite(high) and lo <= low and high <= hi
                and max(abs(low), abs(high)) <= FLOAT32_MAX and all(map(math.isfinite, rewards))):
            return False
    if set(map(type, infos)) - {dict}:
        return False
    if infos and max(map(len, infos)) > 16:
        return False
    keys = list(itertools.chain.from_iterable(infos))
    if keys and (set(map(type, keys)) - {str} or max(map(len, keys)) > 200):
        return False
    values = list(itertools.chain.from_iterable(map(dict.values, infos)))
    types = list(map(type, values))
    if set(types) - _SMALL_SCALAR_SET - {str}:
        return False
    texts = list(itertools.compress(values, map(operator.is_, types, itertools.repeat(str))))
    return not texts or max(map(len, texts)) <= 500


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


def checked_finding(f: Any) -> dict:
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
        "severity": severity if severity in SEVERITIES else _text(severity, 40),  # as given: judge.findings ranks it
        "rate": min(max(rate, 0.0), 1.0),
        "example_ids": [_text(x, 200) for x in ids[:10]] if isinstance(ids, list) else [],
        "message": _text(f.get("message", ""), 500),
        "diagnostic": _text(f.get("diagnostic", ""), 200),
    }


def _bad_finding(message: str) -> dict:
    return {"name": "diagnostics:malformed", "severity": "error", "rate": 1.0, "example_ids": [],
            "message": message, "diagnostic": ""}
