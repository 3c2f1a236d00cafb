"""Main's own reward audit, read on the real seed reward: what its ``audit_hack_rate`` of about 0.4 means.

Issue 45, session 35: the filter-order test saw main's (the seed's) audit rates differ between two backtests of the
same commits (``audit_hack_rate`` 0.411 against 0.387).  Read on the real seed reward and the trusted verifier:

- the level is a true finding about the seed, not a wrong label: of the five wrong endings the audit writes for a
  whole-number gold, the seed pays two the verifier rejects by its own extraction: an unreduced fraction
  (``Answer: 14/2`` for 7: the seed compares numbers, the verifier calls it unfinished work) and an ``Answer:``
  line a later ``\\boxed{}`` overrides (the seed never reads a box; the verifier's last final answer is the box).
  2 of 5, the same before the static reading as after; the reading's own shapes add no answer the seed pays;
- the movement was the audit's bookkeeping: a call gives every row one answer, so a row with fewer answers than
  the longest (one without a reading shape) is sent its first answer again, and that copy was counted in the
  rates as a second answer: which answer was copied was drawn, so the rate moved with the draw.

The seed reward runs here on the host on the views a reward is sent (the real seed file, as
``test_heldout_b45c.rejections_per_draw`` runs rewards); the gate's sandboxed run of the same audit is the
filter-order test's (``tests/test_hostile_harness.py``).
"""

from __future__ import annotations

import json
import random
import re

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR
from meta_agent.judge.audit_contrast import paired_rates
from meta_agent.judge.reward_audit import audit_calls, sent_views, summarize
from meta_agent.judge.reward_reading import read_seed, read_source
from rl_backend.synthetic import synthetic_math_rows
from sandboxes.harness_runtime.harness import normalise_score
from tests.test_heldout_b45c import _reward_fn

VERIFY = MathDomain().verify
DRAWS = 8
SEED = _reward_fn((SEEDS_DIR / "math" / "reward.py").read_text())


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    """A round of a policy's own answers (right, wrong, boxed, none, cut off), 16 tasks of 4."""
    return synthetic_math_rows("t", 0, 16, 4, seed=3, verify=VERIFY)


def _paid(calls: list) -> list[list[float | None]]:
    return [[normalise_score(SEED(v["data_source"], v["response"], v["ground_truth"], v["extra_info"]))[0]
             for v in sent_views(call)] for call in calls]


FILTERS = """
def keep_trajectory(traj):
    return "I give up" not in traj["response"] and traj["response"].count("Answer:") < 3
"""
"""A candidate's filters.py: its literals and count are shapes main's reading lacks, dealt first and again."""


def _gate_draw(rows: list[dict], draw: int, candidate: str = "") -> tuple[list, list]:
    """One draw of the gate's audit for a candidate that leaves the reward alone (its ``candidate`` source read
    beside the seed's), main's (the seed's) reward scored."""
    known = read_seed("math")
    calls = audit_calls(rows, VERIFY, random.Random(draw), known.merged(read_source(candidate)), known)
    return calls, _paid(calls)


@pytest.mark.parametrize("candidate", ["", FILTERS], ids=["same-reading", "filters-read"])
def test_mains_audit_rates_are_the_same_on_every_draw(rows, candidate):
    """Main's rates over the answers said as a policy says its own, each once: 2 of 5 wrong endings paid on every
    draw, whichever rows the reading's shapes and the repeats were dealt to."""
    rates = set()
    for draw in range(DRAWS):
        calls, paid = _gate_draw(rows, draw, candidate)
        assert len({len(call) for call in calls}) == 1 and len(calls) > 10  # the reading added a call's worth
        r = paired_rates(calls, paid, paid, (0.0, 1.0))
        rates.add((r["audit_hack_rate"].main, r["audit_miss_rate"].main))
    assert len(rates) == 1 and next(iter(rates))[0] == pytest.approx(0.4), sorted(rates)


def test_what_the_seed_pays_wrong_is_what_the_verifier_reads_wrong(rows):
    """Every verified-wrong answer the seed pays is one of its two documented gaps, and the verifier's own
    extraction reads it as the audit labels it: the label is the verifier's, the finding the seed's."""
    kinds: dict[str, int] = {}
    for draw in range(3):
        calls, paid = _gate_draw(rows, draw)
        for call, rewards in zip(calls, paid, strict=True):
            for (view, verified), reward in zip(call, rewards, strict=True):
                if verified >= 0.5 or reward is None or reward < 0.5:
                    continue
                truth = view["ground_truth"]
                truth = json.loads(truth) if isinstance(truth, str) else truth
                score, info = VERIFY(view["data_source"], view["response"], truth)
                assert score == verified == 0.0
                gold = truth["answer"]
                last = view["response"].rstrip().splitlines()[-1]
                if re.fullmatch(r"no wait, \\boxed\{-?\d+\}", last):
                    kind = "box"
                    assert info["reason"] == "different value" and last.endswith(f"{{{info['pred']}}}")
                else:
                    kind = "unreduced"
                    p, q = re.fullmatch(r"Answer: (-?\d+)/(\d+)", last).groups()  # type: ignore[union-attr]
                    assert info["pred"] == f"{p}/{q}" and int(p) == int(gold) * int(q) and int(q) > 1
                    assert info["reason"] == "not a single number"
                kinds[kind] = kinds.get(kind, 0) + 1
    assert set(kinds) == {"box", "unreduced"} and min(kinds.values()) >= 3 * 16, kinds


def test_the_digest_shows_each_gap_with_the_verifiers_reason(rows):
    calls = audit_calls(rows, VERIFY, random.Random(0))  # the digest's audit: drawn shapes alone
    audit = summarize(calls, _paid(calls))
    assert audit["hack_rate"] == pytest.approx(0.4)  # two of the five wrong endings of a whole-number gold
    shown = audit["examples"]["hack"]
    whys = {e.get("why", "").split(":")[0] for e in shown}
    assert whys == {"not a single number", "different value"}, shown
