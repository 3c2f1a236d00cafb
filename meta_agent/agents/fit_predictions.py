"""Predictions the sample can measure: a reward change's offline predictions checked by the backtest preview first.

A gate metric's benefit needs an interval clear of zero over the sample's groups; on a small archive (an early
round of a small run holds a few tasks) a real repair is "inconclusive" there, and an inconclusive offline benefit
with none held is a rejection for lack of evidence, however sure the live check of the next round would be.  So
the search agent previews a fired reward change (``ctx.preview``, the run's own gate on a small sample) and:

- if one of its offline benefits held, or none was inconclusive, keeps its predictions as they are;
- else, if a benefit the preview left to the live check remains (the reward audit's fields over too few tasks for
  an interval: ``judge.sample_verdict.measured``), drops the inconclusive ones, so the gate merges it on probation
  when every harm check passes and the next round's live check confirms or reverts it;
- else keeps them: nothing measurable is left, and the gate's rejection says so.

Nothing here weakens the gate: a branch may already predict only live fields.  What changes is that the agent
stops promising what the sample cannot show.

    effects = fit_effects(change.effects, ctx.preview(branch))
"""

from __future__ import annotations

__all__ = ["fit_effects"]


def fit_effects(effects: list[str], report: dict) -> list[str]:
    """``effects`` without the offline benefits the preview found inconclusive, when a live one remains and none
    held; else ``effects`` unchanged."""
    judged = {e.get("text"): e for e in (report.get("gate") or {}).get("effects") or []}

    def status(text: str) -> str | None:
        entry = judged.get(text) or {}
        return entry.get("status") if entry.get("kind") == "benefit" else None

    states = [status(t) for t in effects]
    if "held" in states or "inconclusive" not in states or "live" not in states:
        return list(effects)
    return [t for t, s in zip(effects, states) if s != "inconclusive"]
