"""The preview's cap is not the harness's truncation: the paired rates over what each side could judge.

``compare`` and the search's score on batches counted as ``GenerationPreview.sample`` counts them (the real-model
case is in ``tests/test_generation_preview.py``): a rate with nothing to judge is None, never 0 or 1, and the
search leaves such a candidate unranked and says why."""

from __future__ import annotations

import numpy as np

from meta_agent.agents.preview_evidence import generation_score
from meta_agent.generation_preview import RATES, Sample, compare


def _sample(truncated: list[int], judged: list[int], capped: list[int]) -> Sample:
    hits = {r: np.zeros(len(judged)) for r in RATES} | {"truncated": np.array(truncated, float),
                                                        "capped": np.array(capped, float)}
    return Sample(hits, np.full(len(judged), 4.0), {"generated_budget": 256},
                  {r: np.array(judged, float) for r in ("truncated", "no_final_answer", "unsolved")})


def test_a_rate_is_over_the_completions_it_can_judge() -> None:
    main = _sample([4, 4, 2, 4], [4, 4, 4, 4], [0, 0, 0, 0])  # main's budget is the cap: 14 of 16 its truncation
    cand = _sample([0, 0, 1, 0], [1, 2, 4, 0], [3, 2, 0, 4])  # the rest ran into the cap under a larger budget
    rates = compare(main, cand, seed=0)
    assert rates["truncated"]["main"] == 0.875 and rates["truncated"]["candidate"] == round(1 / 7, 4)
    assert rates["truncated"]["judged"] == {"main": 16, "candidate": 7}
    assert rates["capped"]["candidate"] == 0.5625 and rates["capped"]["main"] == 0.0


def test_a_symptom_nothing_could_judge_is_unknown_and_left_unranked() -> None:
    main = _sample([4, 4, 4, 4], [4, 4, 4, 4], [0, 0, 0, 0])
    cand = _sample([0, 0, 0, 0], [0, 0, 0, 0], [4, 4, 4, 4])
    rates = compare(main, cand, seed=0)
    assert rates["truncated"]["candidate"] is None and rates["truncated"]["delta"] is None
    assert rates["truncated"]["interval"] is None
    out = {"symptom": "truncated", "main": 1.0, "candidate": None, "rates": rates, "seconds": 1.0,
           "settings": {"candidate": {"generated_budget": 256}}}
    score, why = generation_score(out)
    assert score is None and "not measurable" in why and "256 tokens" in why, why
