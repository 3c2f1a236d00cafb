"""Held-out attacks on the search agent's preview rule for a recipe's edit (``preview_evidence.vetoes``) and the
group-size evidence (``search_knobs.group_evidence``), written after the fix of test_s38_preview_veto was frozen
(4ce6e25) and run once; an attack that wins stays a strict xfail with its reason."""

from __future__ import annotations

import json
from pathlib import Path

from test_s38_preview_veto import SAME, TINY_DIGEST, _rates, _run

WARM_DIGEST = {"round": 0, "domain": "math", "zero_variance_share": 0.75,
               "evidence": {"verified_rate": 0.5, "identical_share": 0.8},
               "failure_modes": [{"name": "zero_variance_groups", "severity": "warning", "rate": 0.75}]}
COLD = {"harness.yaml": lambda t: t.replace("temperature: 0.7", "temperature: 0.05")}


def _warm(**intervals: list[float]) -> dict:
    """warm-sampling's preview: the identical share falls, with the other rates as given."""
    rates = dict(identical=[-0.5, -0.125], truncated=[0.0, 0.0], no_final_answer=[0.0, 0.0], unsolved=[0.0, 0.0])
    return {"branch": "iv/r0-warm-sampling", "symptom": "identical", "main": 0.8, "candidate": 0.5,
            "interval": rates["identical"], "tasks": 4, "seconds": 9.0, "main_seconds": 9.0,
            "rates": _rates(**(rates | intervals))}


def test_h1_a_hotter_sampler_that_makes_answers_unreadable_is_withheld(tmp_path: Path) -> None:
    _, proposed, recipes, preview = _run(tmp_path, COLD, WARM_DIGEST,
                                         {"iv/r0-warm-sampling": _warm(no_final_answer=[0.125, 0.5])})
    assert preview.asked[:1] == ["iv/r0-warm-sampling"], preview.asked
    assert "iv/r0-warm-sampling" not in proposed, recipes["warm-sampling"]
    assert "unreadable answers rose beyond noise" in recipes["warm-sampling"]["reason"], recipes["warm-sampling"]


def test_h2_a_hotter_sampler_whose_preview_helps_is_still_proposed(tmp_path: Path) -> None:
    """The control of h1: the same edit, its preview clean."""
    _, proposed, recipes, _ = _run(tmp_path, COLD, WARM_DIGEST, {"iv/r0-warm-sampling": _warm()})
    assert "iv/r0-warm-sampling" in proposed, recipes["warm-sampling"]


def test_h3_a_preview_where_no_task_improved_and_some_got_worse_is_withheld(tmp_path: Path) -> None:
    """Won at the held-out run (proposed as inconclusive), and in tiny-groups' cell (cool-sampling at [+0.000,
    +0.375]); fixed after: a rate that rises is stopped."""
    worse = _warm(identical=[0.0, 0.375])
    worse["candidate"] = 0.925
    _, proposed, recipes, _ = _run(tmp_path, COLD, WARM_DIGEST, {"iv/r0-warm-sampling": worse})
    assert "iv/r0-warm-sampling" not in proposed, recipes["warm-sampling"]
    assert "the symptom rose 0.8 -> 0.925" in recipes["warm-sampling"]["reason"], recipes["warm-sampling"]


def test_h4_dynamic_sampling_on_a_noisy_preview_of_the_same_batch_is_withheld(tmp_path: Path) -> None:
    """Won at the held-out run (only an exact [0, 0] read as no change); fixed after with h3: an unmoved mean is."""
    noisy = json.loads(json.dumps(SAME))
    noisy["interval"] = noisy["rates"]["identical"]["interval"] = [-0.0625, 0.0625]
    digest = dict(TINY_DIGEST, evidence={"verified_rate": 0.5})
    _, proposed, recipes, _ = _run(tmp_path, {}, digest, {"iv/r0-dynamic-sampling": noisy})
    assert "iv/r0-dynamic-sampling" not in proposed, recipes["dynamic-sampling"]
    assert "the preview saw the edit move nothing" in recipes["dynamic-sampling"]["reason"], recipes


def test_h5_a_group_size_move_on_a_round_where_no_group_mixed_is_withheld(tmp_path: Path) -> None:
    """Every group flat (zero-variance share 1.0) at a pooled solve rate of 0.125: the prompts are all-right or
    all-wrong, and no group size mixes them; the pooled rate alone would predict fewer flat groups."""
    tiny = {"harness.yaml": lambda t: t.replace("group_size: 4", "group_size: 2").replace(
        "prompts_per_step: 4", "prompts_per_step: 8")}
    digest = dict(TINY_DIGEST, zero_variance_share=1.0)
    _, proposed, recipes, preview = _run(tmp_path, tiny, digest, {})
    assert "iv/r0-larger-groups" not in proposed, recipes["larger-groups"]
    assert "no group of the round mixed verdicts" in recipes["larger-groups"]["reason"], recipes["larger-groups"]
    assert "iv/r0-larger-groups" not in preview.asked, preview.asked


def test_h6_a_corrupt_solve_rate_gives_no_group_size_evidence() -> None:
    """verified_rate 1.5 (not a rate): the formula's arithmetic must not read as a score."""
    from meta_agent.agents.search_knobs import group_evidence, masking_evidence

    score, why = group_evidence(dict(TINY_DIGEST, evidence={"verified_rate": 1.5}), {"group_size": 2},
                                {"group_size": 6})
    assert score is None, (score, why)
    assert "verified_rate 1.5 lies outside [0, 1]" in why, why
    score, why = group_evidence(dict(TINY_DIGEST, evidence={"verified_rate": 0.5}, zero_variance_share=-0.25),
                                {"group_size": 2}, {"group_size": 6})
    assert score is None and "lies outside [0, 1]" in why, (score, why)
    score, _ = group_evidence(dict(TINY_DIGEST, evidence={"verified_rate": 0.5}), {"group_size": 2}, {"group_size": 6})
    assert score is not None and score > 0, score
    # the same reading where the mask's evidence is built: a truncation rate of 1.5 is no share of a batch
    score, why = masking_evidence(dict(TINY_DIGEST, truncation_rate=1.5), {"mask_truncated": True}, {})
    assert score is None and "truncation_rate 1.5 lies outside [0, 1]" in why, (score, why)
    assert masking_evidence(dict(TINY_DIGEST, truncation_rate=0.25), {"mask_truncated": True}, {})[0] == 0.25
