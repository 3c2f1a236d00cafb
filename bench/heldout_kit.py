"""What the held-out flaw sets (``bench/heldout_flaws_*.py``) share beyond ``repair_flaws``: a probe that scores
(gold, response) pairs as one group of its own, and the symptom and repair checks of a flaw in the reward read
off such a probe against the verifier."""

from __future__ import annotations

from collections.abc import Callable

from repair_flaws import _no_pay_for_wrong, against_verifier
from repair_observe import REWARD_RANGE, Observation, view


def score_probe(name: str, group: str, pairs: list[tuple[str, str]]) -> Callable:
    """A probe scoring ``pairs`` as one group of its own (a task id no other probe uses)."""
    def probe(session) -> list[float | None]:
        scored = session.score([view(k, group, gold, r) for k, (gold, r) in enumerate(pairs)],
                               reward_range=REWARD_RANGE)
        return [None if s.error or s.reward is None else round(float(s.reward), 3) for s in scored]
    probe.__name__ = f"probe_{name}"
    return probe


def reward_flaw_checks(name: str, pairs: list[tuple[str, str]], wrong_what: str) -> tuple[Callable, Callable]:
    """(symptom, repaired) of a reward flaw whose probe ``name`` scored ``pairs``: any pair against the verifier
    is the symptom; repaired when none is and nothing wrong is paid."""
    def symptom(obs: Observation) -> str | None:
        wrong = against_verifier(pairs, obs.extra.get(name) or [])
        return f"{len(wrong)} of {len(pairs)} {wrong_what} scored against the verifier, e.g. {wrong[0]}" \
            if wrong else None

    def repaired(obs: Observation) -> tuple[bool, str]:
        wrong = against_verifier(pairs, obs.extra.get(name) or [])
        ok, why = _no_pay_for_wrong(obs)
        return ok and not wrong, f"{len(wrong)} of {len(pairs)} {wrong_what} scored against the verifier; {why}"

    return symptom, repaired
