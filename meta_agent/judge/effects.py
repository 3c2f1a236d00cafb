"""Predicted effects: parse a ``Predicted-Effect`` trailer and judge it on the gate's metrics.

A benefit (``increase``/``decrease``) holds when its CI is clear of zero in its direction; a
guard (``unchanged``) when its CI lies within the tolerance.  A digest field the gate does not
measure is ``live``: the live check after the next round judges it.

    parse_effect("reward_auc increase: boxed answers count")   # ("reward_auc", "increase")
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from meta_agent.config import GateThresholds
from meta_agent.digest import TREND_FIELDS
from meta_agent.judge.harm_checks import NOT_ENOUGH
from meta_agent.judge.metrics import GATE_METRICS, MetricResult

LIVE_METRICS = tuple(m for m in TREND_FIELDS if m not in GATE_METRICS)
"""Digest fields a prediction may name: measured by the live check after the next round."""
_EFFECT = re.compile(r"^\s*([a-z_]+)\s+(increase|decrease|unchanged)\b", re.IGNORECASE)


@dataclass
class EffectCheck:
    text: str
    metric: str | None
    direction: str | None  # increase | decrease | unchanged
    kind: str | None  # benefit (increase/decrease) | guard (unchanged)
    status: str  # held | contradicted | inconclusive | live | unknown | unparsed


def parse_effect(text: str) -> tuple[str, str] | None:
    """``"reward_auc increase: because ..."`` -> ("reward_auc", "increase")."""
    match = _EFFECT.match(text)
    return (match.group(1).lower(), match.group(2).lower()) if match else None


def check_effects(predicted: list[str], metrics: dict[str, MetricResult], t: GateThresholds,
                  identical: bool = False) -> list[EffectCheck]:
    """Judge each ``Predicted-Effect``; with ``identical`` arms a guard holds by construction."""
    checks = []
    for text in predicted:
        parsed = parse_effect(text)
        if parsed is None:
            checks.append(EffectCheck(text, None, None, None, "unparsed"))
            continue
        metric, direction = parsed
        kind = "guard" if direction == "unchanged" else "benefit"
        r = metrics.get(metric)
        if r is None:
            status = "live" if metric in LIVE_METRICS else "unknown"
        elif kind == "guard" and identical:
            status = "held"
        elif np.isnan(r.ci_low) or np.isnan(r.ci_high):
            status = "inconclusive"
        elif direction == "increase":
            status = "held" if r.ci_low > 0 else "contradicted" if r.ci_high < 0 else "inconclusive"
        elif direction == "decrease":
            status = "held" if r.ci_high < 0 else "contradicted" if r.ci_low > 0 else "inconclusive"
        else:
            tol = t.unchanged_tolerance
            inside = -tol <= r.ci_low and r.ci_high <= tol
            status = "held" if inside else "contradicted" if (r.ci_low > tol or r.ci_high < -tol) else "inconclusive"
        checks.append(EffectCheck(text, metric, direction, kind, status))
    return checks


def effects_check(effects: list[EffectCheck], bookkeeping_only: bool = False) -> tuple[dict, bool]:
    """The ``predicted_effect`` check and whether a merge would be on probation.

    ``bookkeeping_only``: the branch changes no reward, filter, prompt or knob (only
    diagnostics, skills or the journal) and its outputs equal main's, so it trains exactly
    as main does and needs no predicted benefit; a prediction it does make still counts.
    """
    def texts(es: list[EffectCheck]) -> str:
        return "; ".join(f"{e.text} ({e.status})" for e in es)

    benefits = [e for e in effects if e.kind == "benefit" and e.status != "unknown"]
    contradicted = [e for e in effects if e.status == "contradicted"]
    offline = [e for e in benefits if e.status != "live"]
    live = [e for e in effects if e.status == "live"]
    open_guards = [e for e in effects if e.kind == "guard" and e.status == "inconclusive"]
    name = "predicted_effect"
    if not benefits and bookkeeping_only and not contradicted:
        return {"name": name, "passed": True, "detail": "diagnostics/skills/journal only, with rewards and keep "
                "masks identical to main's: trains exactly as main, nothing to predict"}, False
    if not benefits:
        return {"name": name, "passed": False, "detail": "no predicted benefit (an increase or decrease of a gate "
                "metric or digest field)" + (": " + texts(effects) if effects else "")}, False
    if contradicted:
        return {"name": name, "passed": False, "detail": "contradicted: " + texts(contradicted)}, False
    missing = []
    if offline and not any(e.status == "held" for e in offline):
        missing.append("no measurable predicted benefit held: " + texts(offline))
    if open_guards:
        missing.append("unchanged not shown within tolerance: " + texts(open_guards))
    if missing:
        return {"name": name, "passed": False, "undecided": True, "detail": NOT_ENOUGH + "; ".join(missing)}, False
    held = [e for e in effects if e.status == "held"]
    detail = "held: " + texts(held) if held else ""
    if live:
        detail += ("; " if detail else "") + "checked live next round: " + texts(live)
    if not offline:
        detail = "probation, no benefit measurable offline; " + detail
    return {"name": name, "passed": True, "detail": detail}, not offline
