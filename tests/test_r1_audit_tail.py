"""The reward audit holds answers a verifier decides one way and a reward's shortcut the other (issue 44, set k).

Attacks first (written before ``judge.audit_tail``): a reward whose format rule is anchored at the end of the text
(a right answer followed by any line unpaid) and one that, where the exact comparison fails, compares a rounded
value with the gold (``6.7`` paid for 7).  Neither is the planted text of set k; both are the class.  Every audit
draw must show each (a miss for the first, a paid wrong answer for the second), on a round whose policy solved
nothing, and the seed's and the verifier-answers reward must show neither.  The rewards run on the host on the
views a reward is sent (``sent_views``), as ``tests/test_b_seed_audit.py`` runs them.
"""

from __future__ import annotations

import random

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR
from meta_agent.agents import recipe_edits
from meta_agent.judge.reward_audit import audit_calls, sent_views, summarize
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_runtime.harness import normalise_score
from tests.test_heldout_b45c import _reward_fn

VERIFY = MathDomain().verify
SEED = (SEEDS_DIR / "math" / "reward.py").read_text()
CONTROL = recipe_edits.verifier_answers(SEED)
DRAWS = 6

END_ANCHORED = CONTROL + r'''

import re as _re_end
_scored = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _scored(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    if not _re_end.search(r"(answer|boxed)[^\n]*\s*\Z", str(solution_str or ""), _re_end.IGNORECASE):
        return dict(result, score=0.0)
    return result
'''
ROUNDED = CONTROL + r'''

_scored = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _scored(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)
    try:
        if result["score"] == 0.0 and round(float(result.get("pred"))) == round(float(_va_gold(ground_truth))):
            return dict(result, score=1.0)
    except (TypeError, ValueError, OverflowError):
        pass
    return result
'''


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """Two groups of four that solved nothing and wrote no final answer (set k's round 0), golds of both signs."""
    out = synthetic_math_rows("k", 0, 2, 4, seed=11, verify=VERIFY)
    for row in out:
        row.update(response="First add the numbers step by step.", reward=0.0, verified=0.0)
    return out


def audit_of(reward_text: str, rows: list[dict], draw: int) -> dict:
    fn = _reward_fn(reward_text)
    calls = audit_calls(rows, VERIFY, random.Random(draw))
    paid = [[normalise_score(fn(v["data_source"], v["response"], v["ground_truth"], v["extra_info"]))[0]
             for v in sent_views(call)] for call in calls]
    return summarize(calls, paid)


def _draws(reward_text: str, rows: list[dict]) -> list[dict]:
    return [audit_of(reward_text, rows, draw) for draw in range(DRAWS)]


def test_an_end_anchored_format_rule_shows_as_misses_on_every_draw(rows):
    audits = _draws(END_ANCHORED, rows)
    assert len(audits) == DRAWS
    assert min(a["miss_rate"] for a in audits) > 0, [a["miss_rate"] for a in audits]


def test_a_rounding_shortcut_shows_as_paid_wrong_answers_on_every_draw(rows):
    audits = _draws(ROUNDED, rows)
    assert len(audits) == DRAWS
    assert min(a["hack_rate"] for a in audits) > 0, [a["hack_rate"] for a in audits]


def test_the_seed_and_the_verifiers_rules_show_no_new_disagreement(rows):
    """The control (the verifier's own rules) agrees with the verifier on every new answer; the seed pays none of
    the new wrong answers (its two documented gaps, ``tests/test_b_seed_audit.py``, stay 2 of 5)."""
    for audit in _draws(CONTROL, rows):
        assert (audit["miss_rate"], audit["hack_rate"]) == (0.0, 0.0), audit["examples"]
    for audit in _draws(SEED, rows):
        assert audit["hack_rate"] == pytest.approx(0.4), audit["examples"]


def test_every_shortcut_is_graded_wrong_and_each_kind_keeps_what_its_shortcut_keeps():
    from meta_agent.judge.audit_tail import SHORTCUTS, shortcut_value

    rng = random.Random(4)
    seen = {kind: 0 for kind in SHORTCUTS}
    for gold in ("0", "7", "-5", "42", "0.5", "-2.25", "1000"):
        g = float(gold)
        for kind in SHORTCUTS:
            for _ in range(20):
                text = shortcut_value(gold, kind, rng)
                assert VERIFY("math", f"3 + 4\nAnswer: {text}", {"answer": gold})[0] == 0.0, (gold, kind, text)
                v = float(text)
                if kind in ("away", "lead"):  # truncation keeps the gold's integer part
                    assert int(v) == int(g), (gold, kind, text)
                if kind == "toward" and g == int(g) and g != 0:  # one below in magnitude: round or floor keeps it
                    assert abs(v) < abs(g) and g in (round(v), float(int(v) + (1 if g > 0 else -1))), (gold, text)
                if kind == "sign" and g != 0:
                    assert (v < 0) != (g < 0), (gold, text)
                if kind == "lead":
                    assert text.lstrip("-").startswith("0"), text
                seen[kind] += 1
    assert min(seen.values()) == 7 * 20


def test_the_gold_and_the_policys_words_are_not_the_tails_only_shape():
    """Tails differ within one audit: several kinds and several texts, so no one ending can be spared."""
    from meta_agent.judge.audit_tail import TailDeck

    deck = TailDeck(random.Random(2))
    tails = [deck.tail("7", "First add the numbers step by step.".split()) for _ in range(16)]
    assert len(set(tails)) >= 8 and any("= 7" in t for t in tails) and any(t.startswith("\n\n") for t in tails)
    assert all(VERIFY("math", "3 + 4\nAnswer: 7" + t, {"answer": "7"})[0] == 1.0 for t in tails)


@pytest.mark.parametrize("flawed", [END_ANCHORED, ROUNDED], ids=["end-anchored", "rounded"])
def test_verifier_answers_fires_on_the_audit_and_its_reward_agrees_on_a_fresh_audit(rows, flawed):
    """The digest of a round that solved nothing, with the audit of the flawed reward, gets verifier-answers (the
    reward rebuilt from the seed's with the verifier's rules); the rebuilt reward shows neither on fresh draws."""
    from meta_agent.agents.recipe_reward import verifier_answers
    from meta_agent.agents.recipe_types import HarnessFiles
    from meta_agent.digest import build_digest

    audit = audit_of(flawed, rows, 100)
    digest = build_digest(0, rows, metrics=[], findings=[], eval={}, previous=[], audit=audit)
    assert {"audit_misses", "audit_hacking"} & {m["name"] for m in digest["failure_modes"]}, digest["failure_modes"]
    files = HarnessFiles((SEEDS_DIR / "math" / "harness.yaml").read_text(), flawed,
                         (SEEDS_DIR / "math" / "prompts" / "user.j2").read_text())
    change = verifier_answers(digest, files)
    assert change.key == "verifier-answers:rebuilt" and change.files["reward.py"] == CONTROL, change
    fixed = [audit_of(change.files["reward.py"], rows, draw) for draw in range(101, 101 + DRAWS)]
    assert [(a["miss_rate"], a["hack_rate"]) for a in fixed] == [(0.0, 0.0)] * DRAWS
