"""A step's shape wrong for the round's flat-group rate (``main:step_shape``): too few prompts a step, or groups too
small to mix, at the rollouts a step generates.

GRPO's gradient of a step is the sum of its prompts' groups; a group whose rewards are all equal adds nothing.  With
``k`` prompts a step whose groups are flat at rate ``q``, a step has no gradient at all with probability ``q^k``, and
with one prompt each step follows one question.  The round measures ``q`` at its own group size; at another size
``G'`` each archived group's flatness is exact by sampling ``G'`` of its members without replacement (a larger
size extrapolates from the group's reward shares).  The population's flat rate is uncertain with few groups: a
uniform prior on it, updated by the (fractional) flat count, gives the expected share of steps with no gradient,
``E[q^k]`` (``silent_share``).  Every shape ``(G', k')`` with ``G' x k'`` the step's rollouts, within the trainer's
ranges and with groups at least the size that mixes a right and a wrong answer half the time at the round's solve
rate (``mixed_size``) and never smaller than ``SMALL_GROUP`` unless main's already are, is scored; a shape whose share
is ``MARGIN`` below the current one's, when the current one's is over ``MAX_SILENT``, is the finding's target.
Trusted code on archive rows; no harness code runs here.

    check, finding = step_shape_check(rows, {"group_size": 16, "prompts_per_step": 1})  # finding None: fine
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any

from annotated_types import Ge, Le

from harness_repo.contract import GRPOKnobs
from meta_agent.digest_rows import example, is_zero_variance

PREFIX, NAME, SOURCE = "main:", "step_shape", "shape_checks"
MAX_SILENT = 0.25
"""Above this expected share of steps with no gradient the shape is named (a quarter of the round's steps spent)."""
MARGIN = 0.05
"""A shape at the same rollouts must expect at least this much less to be the target (else the shape is the best)."""
GROUP_SIZE_MAX = 16
"""The largest group the local trainer is run with here (one generate call per group)."""
SMALL_GROUP = 4
"""Below this group size most groups cannot vary at a policy's usual accuracy; the floor of a reshape where the
round solved nothing (no size is known to mix then)."""


def mixed_size(p: float) -> int | None:
    """The smallest group size whose groups mix a right and a wrong answer at least half the time at solve rate
    ``p`` (1 - p^G - (1-p)^G >= 0.5), or None when ``p`` is 0 or 1 (no size mixes them)."""
    if not 0 < p < 1:
        return None
    return next((g for g in range(2, GROUP_SIZE_MAX + 1) if 1 - p ** g - (1 - p) ** g >= 0.5), GROUP_SIZE_MAX)


def flat_at(rewards: list[float], size: int) -> float:
    """The probability that ``size`` members of a group with these rewards all have one reward: exact (drawn without
    replacement) up to the group's size, from its reward shares beyond."""
    n, counts = len(rewards), Counter(round(r, 9) for r in rewards)
    if size <= n:
        return sum(math.comb(c, size) for c in counts.values()) / math.comb(n, size)
    return sum((c / n) ** size for c in counts.values())


def silent_share(groups: list[list[float]], size: int, prompts: int) -> float:
    """Expected share of steps of ``prompts`` groups of ``size`` with no gradient: E[q^k] for the flat rate q under
    a uniform prior updated by the groups' flatness at ``size``."""
    flat = sum(flat_at(g, size) for g in groups)
    a, b = flat + 1.0, len(groups) - flat + 1.0
    return math.prod((a + j) / (a + b + j) for j in range(prompts))


def _range(knob: str) -> tuple[float, float]:
    """The range the harness contract (what the trainer accepts) gives ``knob``."""
    low, high = -math.inf, math.inf
    for m in GRPOKnobs.model_fields[knob].metadata:
        low = float(m.ge) if isinstance(m, Ge) else low
        high = float(m.le) if isinstance(m, Le) else high
    return low, high


def shapes(rollouts: int, floor: int) -> list[tuple[int, int]]:
    """(group_size, prompts_per_step) pairs of ``rollouts`` a step within the trainer's ranges, groups >= ``floor``."""
    g_low, g_high = _range("group_size")
    k_low, k_high = _range("prompts_per_step")
    return [(g, rollouts // g) for g in range(max(2, floor, int(g_low)), int(min(g_high, GROUP_SIZE_MAX)) + 1)
            if rollouts % g == 0 and k_low <= rollouts // g <= k_high]


def _training_groups(rows: list[dict]) -> tuple[dict[str, list[int]], list[list[float]]]:
    members: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r.get("split", "train") == "train" and isinstance(r.get("reward"), int | float) \
                and math.isfinite(r["reward"]):
            members[str(r.get("group_id"))].append(i)
    return members, [[float(rows[i]["reward"]) for i in m] for m in members.values()]


def _steps_without_gradient(rows: list[dict], members: dict[str, list[int]]) -> tuple[int, int]:
    """(steps the rows record, those whose every group was flat)."""
    steps: dict[Any, list[bool]] = defaultdict(list)
    for idx in members.values():
        steps[rows[idx[0]].get("step")].append(is_zero_variance([float(rows[i]["reward"]) for i in idx]))
    return len(steps), sum(all(flat) for flat in steps.values())


def step_shape_check(rows: list[dict], knobs: dict) -> tuple[dict, dict | None]:
    """(the check as the digest records it, the ``main:step_shape`` finding or None).  ``knobs``: main's ``grpo``.
    The finding's rate is the expected share of steps with no gradient at main's shape; its ``evidence`` carries the
    shapes scored and the ``best`` (the target a reshape aims at)."""
    defaults = {k: f.default for k, f in GRPOKnobs.model_fields.items()}
    size = int(knobs.get("group_size", defaults["group_size"]))
    prompts = int(knobs.get("prompts_per_step", defaults["prompts_per_step"]))
    members, groups = _training_groups(rows)
    if not groups:
        return {"name": NAME, "passed": True, "detail": "not measured: no training group with rewards"}, None
    verified = [float(r["verified"]) >= 0.5 for r in rows if r.get("split", "train") == "train"
                and isinstance(r.get("verified"), int | float) and math.isfinite(r["verified"])]
    p = sum(verified) / len(verified) if verified else None
    # a reshape never makes groups smaller than SMALL_GROUP (a round's few groups cannot show smaller ones mix)
    mix = mixed_size(p) if p is not None else None
    if mix is not None and 1 - p ** mix - (1 - p) ** mix < 0.5:  # no group the trainer runs here mixes half the
        mix = None  # time at this solve rate: the mixing argument picks no size, the steps' share decides
    floor = max(mix or SMALL_GROUP, min(SMALL_GROUP, size))
    rollouts = size * prompts
    scored = {(g, k): round(silent_share(groups, g, k), 4) for g, k in {(size, prompts), *shapes(rollouts, floor)}}
    now = scored[(size, prompts)]
    allowed = [s for s in scored if s[0] >= floor]
    best = min(allowed, key=lambda s: (scored[s], -s[0])) if allowed else (size, prompts)
    steps, silent = _steps_without_gradient(rows, members)
    flat = sum(is_zero_variance(g) for g in groups)
    detail = (f"{prompts} prompt(s) of {size} a step: {flat} of {len(groups)} groups flat, {silent} of {steps} steps "
              f"with no gradient; expected share of steps with no gradient {now:.3f}, at {best[1]} prompt(s) of "
              f"{best[0]} {scored[best]:.3f} (groups of at least {floor}: solve rate "
              f"{'unknown' if p is None else f'{p:.3f}'})")
    bad = now > MAX_SILENT and best != (size, prompts) and scored[best] <= now - MARGIN
    check = {"name": NAME, "passed": not bad, "detail": detail}
    if not bad:
        return check, None
    flat_rows = [i for idx in members.values() if is_zero_variance([float(rows[i]["reward"]) for i in idx])
                 for i in idx[:1]]
    evidence = {"group_size": size, "prompts_per_step": prompts, "rollouts": rollouts, "groups": len(groups),
                "flat_groups": flat, "steps": steps, "steps_without_gradient": silent, "solve_rate": p,
                "min_group_size": floor, "shares": {f"{g}x{k}": v for (g, k), v in sorted(scored.items())},
                "best": {"group_size": best[0], "prompts_per_step": best[1], "share": scored[best]}}
    return check, {"name": PREFIX + NAME, "source": SOURCE, "severity": "error" if now >= 0.5 else "warning",
                   "rate": now, "message": f"too few prompts a step, or groups too small, for the round's flat "
                                           f"groups: {detail}"[:400],
                   "examples": [example(rows[i]) for i in flat_rows[:3]], "evidence": evidence}
