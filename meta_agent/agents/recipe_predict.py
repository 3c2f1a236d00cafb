"""What a recipe promises the gate: the benefits its evidence can show on the sample the gate judges.

The gate holds an offline benefit when the paired percentile bootstrap of its rate, resampling the sample's groups,
clears zero; and a change predicting offline benefits of which none held is rejected for want of evidence, whatever
else it predicts (``judge.effects.effects_check``).  A rate a change moves only in the ``k`` of ``n`` groups that carry
it cannot clear zero while a resample drawing none of those groups, ``(1 - k/n)^n``, is as common as the interval's
tail: on a small run's first round (two groups, one paid failure in one of them: one resample in four moves nothing)
the right reward repair was rejected (12i's fail-open-reward, recipe arm), though the finding that named the mode,
the reward audit over constructed answers, was there to predict (the gate measures it where the audit spans enough
tasks, the live check of the next round where it does not).

So a fired change's predictions on the sample's rates are read against the round's groups (``recipe_evidence.spread``;
the carriers of the round, among every group of the run the gate may sample):
one its evidence cannot show is not promised, provided another benefit remains (the fields of the other findings
that named the mode, which the rule predicts where its evidence has them).  Where none would remain, the lines stay
as written and the gate's rejection says why.  Nothing here changes what the gate checks: a branch may already
predict only what it can deliver, and each remaining prediction is judged as before.

    kept, unshown = fit(change.effects, evidence)      # unshown: [(line, why)], said in the agent's transcript
"""

from __future__ import annotations

from meta_agent.config import GateThresholds
from meta_agent.judge.effects import parse_effect

__all__ = ["can_show", "fit", "unshowable"]

TAIL = (1 - GateThresholds().confidence) / 2
"""The interval's one-sided tail: a benefit clears zero only if fewer resamples than this leave it unmoved."""
CARRIERS = {("hack_rate", "decrease"): ("hack",), ("failure_pay", "decrease"): ("failure_pay",),
            ("miss_rate", "decrease"): ("miss",), ("reward_auc", "increase"): ("success", "failure"),
            ("error_rate", "decrease"): ("error",), ("failure_spread", "decrease"): ("failure_spread",),
            ("flat_failure_share", "decrease"): ("failure_spread",)}
"""A sample rate's predicted move -> the group kinds of ``recipe_evidence.spread`` each resample must draw for it
to move (the AUC is undefined on a resample without a success or without a failure)."""


def can_show(k: int, n: int, tail: float = TAIL) -> bool:
    """Whether a percentile bootstrap over ``n`` groups can clear zero for a change carried by ``k`` of them."""
    return 0 < k <= n and (1 - k / n) ** n < tail


def unshowable(text: str, spread: dict) -> str | None:
    """Why the gate's sample, read as the round's groups, cannot show the predicted ``text``; None when it can or
    the line is not a sample rate this module reads."""
    parsed = parse_effect(text)
    kinds = CARRIERS.get(parsed) if parsed else None
    n = spread.get("groups")
    if not kinds or not isinstance(n, int) or n <= 0:
        return None
    # the gate samples earlier rounds too, whose answers main's reward may treat alike or not: only the round's
    # carriers are known, so they are read against every group the gate may draw
    n = max(n, int(spread.get("sampled") or 0))
    if parsed == ("reward_auc", "increase"):  # its pairs move only where the reward disagrees with the verifier
        kinds += ("hack" if spread.get("hack", 0) >= spread.get("miss", 0) else "miss",)
    for kind in kinds:
        k = int(spread.get(kind) or 0)
        if not can_show(k, n):
            return (f"{parsed[0]} is carried by {k} of the round's groups ({kind}), of {n} the gate may sample: a "
                    f"resample drawing none of them ({(1 - k / n) ** n:.3f} of draws) is no rarer than the interval's "
                    f"tail ({TAIL:g})")
    return None


def fit(effects: list[str], evidence: dict) -> tuple[list[str], list[tuple[str, str]]]:
    """``effects`` without the sample-rate benefits the round's groups cannot show, with those left out and why;
    unchanged when the evidence has no group spread or no other benefit would remain."""
    spread = evidence.get("spread") if isinstance(evidence, dict) else None
    if not isinstance(spread, dict):
        return list(effects), []
    unshown = [(t, why) for t in effects if (why := unshowable(t, spread))]
    left = [t for t in effects if t not in {t for t, _ in unshown}]
    if not any((p := parse_effect(t)) and p[1] in ("increase", "decrease") for t in left):
        return list(effects), []
    return left, unshown
