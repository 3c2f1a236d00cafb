"""Held-out attacks on recipe set 6's defences, written after the code froze (commit 0aab59b), run once:

- the gate's reward_auc settled by the order of the rewards (``judge.verifier_order``);
- predictions fitted to the preview (``agents.fit_predictions``);
- answer lines aligned with the verifier (``agents.prompt_align``);
- loosen-filters judging main's keep mask.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from test_main_judged_filter import INVERTED
from test_recipe_agent import propose, quiet_digest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.fit_predictions import fit_effects
from meta_agent.agents.prompt_align import aligned
from meta_agent.config import GateThresholds
from meta_agent.gate import Arm, Sample, decide
from meta_agent.main_checks import judge_main

N = 80


def test_a_reward_that_errs_on_every_failure_moves_toward_the_verifier_and_is_still_rejected() -> None:
    """An error counts at the bottom of the range: 'toward the verifier' on failures, settled AUC, and the
    execution check still refuses it."""
    sample = Sample(np.repeat(np.arange(N // 4), 4), np.zeros(N, bool))
    main = Arm(np.full(N, 0.5), np.ones(N, bool), np.zeros(N, bool))
    cand = Arm(np.full(N, np.nan), np.ones(N, bool), np.ones(N, bool))
    r = decide(main, cand, sample, ["failure_pay decrease"], GateThresholds(bootstrap_samples=200),
               reward_range=(0.0, 1.0))
    assert r.decision == "reject" and any(c["name"] == "execution" and not c["passed"] for c in r.checks)


def test_fitting_never_drops_a_contradicted_prediction() -> None:
    effects = ["hack_rate decrease: x", "failure_pay decrease: y", "audit_hack_rate decrease: z"]
    report = {"gate": {"effects": [
        {"text": effects[0], "kind": "benefit", "status": "inconclusive"},
        {"text": effects[1], "kind": "benefit", "status": "contradicted"},
        {"text": effects[2], "kind": "benefit", "status": "live"}]}}
    assert fit_effects(effects, report) == [effects[1], effects[2]]


def test_fitting_keeps_everything_when_the_preview_judged_nothing() -> None:
    effects = ["hack_rate decrease: x", "audit_hack_rate decrease: z"]
    assert fit_effects(effects, {"gate": {"decision": "reject", "effects": []}}) == effects


def test_an_example_whose_working_has_no_number_does_not_take_one_from_the_question() -> None:
    """The working says it in words; the nearest number above is the question's operand (250), a wrong answer to
    put in an example."""
    system = ("Reply with a line of working, then \"Answer: <the total in words>\".\n\nExample:\nQuestion: What is "
              "125 + 250?\nReply:\nI add them and get the total.\nAnswer: three hundred seventy-five\n")
    out = aligned(system)
    assert "Answer: 250" not in out, out
    assert "in words" not in out
    assert "Answer: 375" in out, out  # fixed (issue 44, a1): the value of the question the example restates


def test_an_aligned_placeholder_inside_a_jinja_expression_still_renders() -> None:
    import jinja2
    user = '{{ question }}\n\n{{ "End with \\"Answer: <value in words>\\"." }}\n'
    out = aligned(user)
    rendered = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string(out).render(question="Q")
    assert "Answer: <number>" in rendered and "words" not in rendered


def test_an_inverted_filter_behind_truncation_masking_is_loosened_in_filters_py(tmp_path) -> None:
    """mask_truncated on and a keep_group rebound by assignment: the source reads as keeping all, but the members
    dropped were judged and not cut off, which masking never drops: the filters did it (held out, won against
    0aab59b; fixed by the finding's measured ``dropped_not_truncated``)."""
    hidden = ("def keep_trajectory(traj):\n    return True\n\n\ndef keep_group(group):\n    return True\n\n\n"
              "def _consistent(group):\n    return len({t.get('reward') for t in group}) == 1\n\n\n"
              "keep_group = _consistent\n")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["mask_truncated"] = True
    repo.commit_files({"filters.py": hidden, "harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "start")
    [mode] = [m for m in judge_main(INVERTED, (0.0, 1.0)) if m["name"] == "main:informative_dropped"]
    [p] = propose(repo, quiet_digest(kept_share=20 / 32, failure_modes=[mode]))
    assert repo.changed_paths(p.branch) == ["filters.py"], repo.changed_paths(p.branch)


def test_drops_that_masking_explains_still_turn_masking_off(tmp_path) -> None:
    """Not held out: the counterpart the fix keeps.  Every dropped member was cut off, so masking can explain the
    drops and the filters (keeping all) are left alone: mask_truncated goes off."""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["mask_truncated"] = True
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "start")
    cut = [dict(r, truncated=r["kept"] is False) for r in INVERTED]
    [mode] = [m for m in judge_main(cut, (0.0, 1.0)) if m["name"] == "main:informative_dropped"]
    assert mode["evidence"] == {"dropped": 12, "dropped_not_truncated": 0}, mode
    [p] = propose(repo, quiet_digest(kept_share=20 / 32, failure_modes=[mode]))
    assert repo.changed_paths(p.branch) == ["harness.yaml"], repo.changed_paths(p.branch)
    assert yaml.safe_load(repo.read_file(p.branch, "harness.yaml"))["grpo"]["mask_truncated"] is False


@pytest.mark.parametrize("line", ["Answer: XLII", "Answer: forty-two"])
def test_an_example_answer_after_a_blank_line_is_dropped_not_guessed(line: str) -> None:
    system = f"Give \"Answer: <number>\".\n\nExample:\nQuestion: What is 40 + 2?\n\n{line}\n"
    out = aligned(system)
    assert line not in out and "Answer: 2" not in out and "Answer: 40" not in out, out
