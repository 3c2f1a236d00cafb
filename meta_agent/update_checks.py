"""An update size wrong for the run, read off one round's training dynamics (``main:update_too_small``,
``main:update_too_large``).

A learning rate (or a number of steps a round) too small spends the round and leaves the policy where it was; one
too large throws away what earlier rounds learnt.  Accuracy shows either only after rounds; the round's own
dynamics show it at once: how far the round moved the policy on what it itself said.  The local trainer measures
that (``rl_backend.local_trainer.HarnessGRPOTrainer.policy_shift``, the round's ``eval["update"]``): the mean
absolute change of the log-probs of the round's first group of completions between the weights that wrote them and
the round's final weights, per token (``mean_abs_logp``), with its KL estimate.  In a round whose steps had no
gradient (every group's rewards equal) it measures a probe step instead (``source: probe``): the optimizer's first
step at the run's learning rate on a unit signal over the same completions.

The band the figure is judged against (``BAND``) is what a useful update measured on the math seed's small size
(SmolLM2-135M, groups of 4; ``tests/test_a3_update.py`` keeps the figures): it lies between a rate that leaves
the exam as it was and one that undoes earlier rounds.  Trusted code on the trainer's record; no harness code
runs here.

    checks, finding = update_check(result["eval"].get("update"), knobs)   # finding None inside the band
"""

from __future__ import annotations

import math
from typing import NamedTuple

PREFIX = "main:"
NAME = "update_size"
SMALL, LARGE = "update_too_small", "update_too_large"
SOURCE = "update_checks"


class Band(NamedTuple):
    low: float
    high: float

    @property
    def target(self) -> float:
        """The movement a repair aims at: the band's geometric middle."""
        return math.sqrt(self.low * self.high)


BAND = Band(0.05, 1.0)
"""Mean |delta log p| per token of the round's first group that a useful round moves.  At 1.0 the round changes
the probability of the very tokens the policy just wrote by a factor e on average: it throws away what it had; at
0.05 by 5%: a round of a few steps that changes the policy's greedy answers no more than sampling noise.  Measured
at the offline bench's size (1 step of 2 groups of 4, round 0, a fresh Adam; seed 0, whose round had no gradient so
a probe step measured it / seed 1, its own step): learning_rate 2e-7 0.0045 / -; 1e-6 (12h's default-lr) 0.023 /
0.014; 2e-5 (the seed's, which learnt over three rounds) 0.449 / 0.254; 2e-4 (in-sample lr-too-high, which fell
back live) 2.88 / 2.06; 1e-3 - / 8.42.  The figure is about proportional to the rate below 1.  The seed at its own
size (3 steps of 4 groups, seed 0, its own steps): 0.297."""


def band_for(steps: int, source: str | None) -> Band:
    """``BAND`` for a round of ``steps`` optimizer steps: a round's movement grows with its steps, about as their
    square root where the steps' directions differ (at the seed's rate, seed 1: one step of 2 groups moved 0.254, six
    such steps 1.21), so the band widens by sqrt(steps): the seed's own 3 steps (0.297) and 6 steps (1.21) lie inside,
    1e-6 and 2e-4 still outside at 1 step.  A probe step is one step, whatever the round's."""
    scale = math.sqrt(steps) if source != "probe" and isinstance(steps, int) and steps > 1 else 1.0
    return Band(BAND.low * scale, BAND.high * scale)


ERROR_FACTOR = 10.0
"""Outside the band by this factor or more: an error (the round is spent, or wrecks the policy), else a warning."""


def update_check(update: dict | None, knobs: dict) -> tuple[dict, dict | None]:
    """(the check as the digest records it, the ``main:update_too_small`` / ``main:update_too_large`` finding or
    None).  ``update``: the round's ``eval["update"]`` (None where the backend does not measure it); ``knobs``:
    main's ``grpo``.  The finding's rate is how far outside the band the figure lies, in decades (at most 1);
    its ``evidence`` carries the figure, the band and target it was judged against and the knobs that set a
    step's size, the figures a repair aims from."""
    figure = (update or {}).get("mean_abs_logp")
    if not isinstance(figure, int | float) or not math.isfinite(figure) or not (update or {}).get("tokens"):
        why = "the backend records no policy shift" if not update else "no token of the round's first group trained"
        return {"name": NAME, "passed": True, "detail": f"not measured: {why}"}, None
    lr, steps = knobs.get("learning_rate", update.get("learning_rate")), knobs.get("steps_per_round")
    source = "a probe step (the round's steps had no gradient)" if update.get("source") == "probe" else "the round"
    band = band_for(steps, update.get("source"))
    detail = (f"{source} moved the policy {figure:.3g} per token (mean |delta log p| of the round's first group, "
              f"{update.get('tokens')} tokens, KL {update.get('kl')}); a useful round moves it "
              f"{band.low:.3g}..{band.high:.3g}; learning_rate {lr}, {steps} steps a round")
    inside = band.low <= figure <= band.high
    check = {"name": NAME, "passed": inside, "detail": detail}
    if inside:
        return check, None
    small = figure < band.low
    bound = band.low if small else band.high
    decades = abs(math.log10(max(figure, 1e-12) / bound))
    evidence = {"mean_abs_logp": figure, "kl": update.get("kl"), "tokens": update.get("tokens"),
                "source": update.get("source"), "band": [band.low, band.high], "target": round(band.target, 6),
                "learning_rate": lr, "steps_per_round": steps, "beta": knobs.get("beta")}
    what = "too small: the round barely moves the policy" if small else "too large: the round throws the policy"
    return check, {"name": PREFIX + (SMALL if small else LARGE), "source": SOURCE,
                   "severity": "error" if decades >= math.log10(ERROR_FACTOR) else "warning",
                   "rate": round(min(1.0, decades), 4), "message": f"the update is {what}: {detail}"[:400],
                   "examples": [], "evidence": evidence}
