"""Recipes for the reward: make it pay what the trusted verifier accepts, in both directions.

Verified-correct answers left unpaid (``miss_rate``) need a reward that reads every form the verifier
reads; paid answers the verifier rejects (``hack_rate``) need a stricter one.

    from meta_agent.agents.recipe_reward import verifier_answers
    decision = verifier_answers(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from harness_repo.repo import SEEDS_DIR
from meta_agent.agents import recipe_edits as edits
from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles, below_threshold, overshoot

MISS_RATE_THRESHOLD = 0.2
MAIN_FINDINGS = {
    "main:failure_pay_new": "failure_pay decrease: verified failures earn 0",
    "main:failure_spread": "failure_spread decrease: every verified failure earns the same 0",
    "main:flat_failure_share": "flat_failure_share decrease: no group of failures is told one is better",
    "main:execution": "error_rate decrease: the verifier's rules score every response, a number in it or not",
    "main:reward_validity": "error_rate decrease: every reward is 0 or 1, inside the domain's range",
}
"""main's own gate checks (``meta_agent.main_checks``) verifier-answers is listed for, each with the gate metric its
finding measured: a reward that pays failures below the paid cut, spreads them, errs or leaves its range disagrees
with the verifier as surely as one that pays a wrong answer in full."""


def _rate(value: object, shown: object) -> float:
    # the digest shows examples of each disagreement it counts; a rate without one is not evidence
    return float(value) if isinstance(value, int | float) and value > 0 and shown else 0.0


def verifier_answers(d: dict, f: HarnessFiles) -> Decision:
    """The reward and the trusted verifier disagree, either way -> pay exactly what the verifier accepts.

    Verified-correct answers left unpaid (``miss_rate``: an ``Answer:`` inside a line, ``x = 7``, a box,
    ``$7$``...) need a reward that reads every form the verifier reads; paid answers the verifier rejects
    (``hack_rate``: ``14/2``, ``6 or 7``, an ``Answer:`` line overridden by a later box) need a stricter
    one.  One reward does both: the verifier's own rules for a numeric gold answer, an exact match
    otherwise (``recipe_edits.verifier_answers``).  Math only: other domains' verifiers run code.

    The disagreement is read in the sample (``miss_rate``/``hack_rate``, measured again offline by the
    gate) and in the reward audit (``audit_miss_rate``/``audit_hack_rate``: constructed answers to the
    round's tasks, which a round without a right answer still has; measured again live next round).  A
    reward that carries this rule's block and still disagrees was edited since: it is rebuilt from the
    seed's reward with the block, dropping what was added around it.
    """
    shown = d.get("disagreements") or {}
    audit = (d.get("audit") or {}).get("examples") or {}
    miss, hack = _rate(d.get("miss_rate"), shown.get("miss")), _rate(d.get("hack_rate"), shown.get("hack"))
    audit_miss = _rate(d.get("audit_miss_rate"), audit.get("miss"))
    audit_hack = _rate(d.get("audit_hack_rate"), audit.get("hack"))
    named = {m["name"]: _rate(m.get("rate"), m.get("examples")) for m in d.get("failure_modes") or []
             if m.get("name") in MAIN_FINDINGS and m.get("severity") in ("warning", "error")}
    named = {k: v for k, v in named.items() if v > 0}
    if max(miss, hack, audit_miss, audit_hack, *named.values()) <= 0:
        return ("the reward and the verifier agree (no miss or hack example in the digest's disagreements "
                "or its reward audit, and none of main's reward checks failed with an example)")
    if f.config.get("domain") != "math":
        return f"the verifier's answer rules are written for the math domain, not {f.config.get('domain')!r}"
    if f.reward is None:
        return "main has no reward.py to fix"
    new = edits.verifier_answers(f.reward)
    rebuilt = edits.has_marker(f.reward, "verifier-answers")
    if rebuilt:
        seed = SEEDS_DIR / "math" / "reward.py"
        new = edits.verifier_answers(seed.read_text())
        if f.reward == new:
            return "reward.py is the seed's reward with the verifier's answer rules already"
    effects, seen = [], []
    if miss > 0:
        effects.append("miss_rate decrease: every answer form the verifier accepts is paid")
        seen.append(f"miss_rate {miss:.3f}")
    if hack > 0:
        effects += ["hack_rate decrease: no answer the verifier rejects is paid",
                    "failure_pay decrease: verified failures earn 0"]
        seen.append(f"hack_rate {hack:.3f}")
    if miss > 0 or hack > 0:  # the sample holds answers both ways to measure it on
        effects.append("reward_auc increase: the reward reads the answer the verifier reads")
    for name in (n for n in MAIN_FINDINGS if n in named):  # the metric each of main's failed checks measured
        if (line := MAIN_FINDINGS[name]).split(":")[0] not in {e.split(":")[0] for e in effects}:
            effects.append(line)
        seen.append(f"{name} {named[name]:.3f}")
    if audit_miss > 0:
        effects.append("audit_miss_rate decrease: constructed answers in every form the verifier accepts are paid")
        seen.append(f"audit_miss_rate {audit_miss:.3f}")
    if audit_hack > 0:
        effects.append("audit_hack_rate decrease: no constructed answer the verifier rejects is paid")
        seen.append(f"audit_hack_rate {audit_hack:.3f}")
    key = "verifier-answers:rebuilt" if rebuilt else "verifier-answers"
    return Change(
        "verifier-answers", key, max(overshoot(x, 0.0) for x in (miss, hack, audit_miss, audit_hack, *named.values())),
        "Pay exactly the final answers the verifier accepts",
        f"{' and '.join(seen)} > 0: the reward and the trusted verifier disagree on the same responses."
        + (" reward.py carries the verifier's rules but was edited since: rebuilt from the seed's." if rebuilt
           else ""),
        "The reward reads answers differently from the verifier: it leaves verified-correct answers unpaid "
        "(an Answer: not at the start of a line, a box, x = 7) and/or pays answers the verifier rejects "
        "(an unreduced fraction, a hedge, an Answer: line overridden by a later box, a near miss). A reward "
        "that applies the verifier's answer rules pays every form it accepts and nothing it rejects.",
        effects, {"reward.py": new},
        "miss_rate, hack_rate, audit_miss_rate, audit_hack_rate or a failed reward check of main's "
        "(main:failure_pay_new, failure_spread, flat_failure_share, execution, reward_validity) > 0 with an "
        "example (math)",
        root_cause=True,
    )


def _audit_shown(d: dict, kind: str, contains: str = "") -> bool:
    """Whether the digest's reward audit (constructed answers, ``judge.reward_audit``) shows a ``kind`` example
    (``miss``/``hack``) with a rate above 0, holding ``contains`` where given: a finding the gate measures on the
    same constructed answers where the audit spans enough tasks, and the next round's live check where not."""
    shown = ((d.get("audit") or {}).get("examples") or {}).get(kind) or []
    return _rate(d.get(f"audit_{kind}_rate"), shown) > 0 and any(contains in str(e.get("response", "")) for e in shown)


def boxed_answers(d: dict, f: HarnessFiles) -> Decision:
    """Verified-correct answers the reward does not pay, written as ``\\boxed{}`` -> read them as the verifier does.

    Predicts the sample's ``miss_rate``, and ``audit_miss_rate`` where the audit left boxed right answers unpaid
    (a round whose misses sit in few groups cannot show the first; ``recipe_predict``)."""
    miss = d.get("miss_rate")
    if reason := below_threshold(miss, MISS_RATE_THRESHOLD, "miss_rate"):
        return reason
    examples = list(d.get("disagreements", {}).get("miss", []))
    examples += [e for m in d.get("failure_modes", []) for e in m.get("examples", [])]
    boxed = sum("\\boxed" in str(e.get("response", "")) for e in examples)
    if not boxed:
        return "no failure example contains \\boxed"
    if f.reward is None:
        return "main has no reward.py to fix"
    if edits.has_marker(f.reward, "boxed-answers") or edits.code_mentions(f.reward, "boxed"):
        return "reward.py already handles \\boxed"
    return Change(
        "boxed-answers", "boxed-answers", overshoot(miss, MISS_RATE_THRESHOLD),
        "Read a final \\boxed{} answer in the reward, as the verifier does",
        f"miss_rate {miss:.3f} > {MISS_RATE_THRESHOLD}; {boxed} failure examples contain \\boxed{{}}.",
        "The reward reads only the last Answer: line, while the verifier takes the last \\boxed{} when it "
        "comes later; verified-correct boxed answers earn 0. Scoring the box in that case pays them "
        "and pays nothing the verifier rejects.",
        ["miss_rate decrease: verified-correct boxed answers are paid",
         "reward_auc increase: the reward reads the answer the verifier reads"]
        + (["audit_miss_rate decrease: constructed boxed answers the verifier accepts are paid"]
           if _audit_shown(d, "miss", "\\boxed") else []),
        {"reward.py": edits.accept_boxed(f.reward)},
        f"miss_rate > {MISS_RATE_THRESHOLD} and a failure example contains \\boxed",
        root_cause=True,
    )


def seed_reward(d: dict, f: HarnessFiles) -> Decision:
    """The reward pays answers the verifier rejects -> go back to the domain's seed reward (exact final answer).

    Predicts the sample's ``hack_rate`` and ``failure_pay``, and ``audit_hack_rate`` where the audit saw main
    paying constructed wrong answers (the seed pays only a final line equal to the gold)."""
    rate = d.get("hack_rate")
    if reason := below_threshold(rate, 0.0, "hack_rate"):
        return reason
    seed = SEEDS_DIR / str(f.config.get("domain")) / "reward.py"
    if not seed.is_file():
        return f"no seed reward.py for domain {f.config.get('domain')!r}"
    if f.reward == seed.read_text():
        return "reward.py is the seed's exact-answer reward already; verifier-answers is the stricter one"
    if edits.has_marker(f.reward, "verifier-answers"):
        return "reward.py applies the verifier's answer rules (verifier-answers), stricter than the seed's"
    return Change(
        "seed-reward", "seed-reward", overshoot(rate, 0.0),
        "Go back to the seed reward, which pays only an exact final answer",
        f"hack_rate {rate:.3f} > 0: verified failures are paid at or above the gate's high_reward.",
        "Some edit since the seed made the reward pay answers the verifier rejects; the seed's reward pays "
        "only a final Answer: line equal to the gold answer, so wrong answers go back to earning 0 (fixes "
        "merged since, e.g. reading \\boxed{}, are lost and may be proposed again).",
        ["hack_rate decrease: the seed reward pays no answer the verifier rejects",
         "failure_pay decrease: verified failures earn 0 again"]
        + (["audit_hack_rate decrease: the seed reward pays no constructed answer but the gold's final line"]
           if _audit_shown(d, "hack") else []),
        {"reward.py": seed.read_text()},
        "hack_rate > 0 and reward.py differs from the seed's",
        root_cause=True,
    )
