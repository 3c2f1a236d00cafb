"""An update size wrong for the run, named from one round (``main:update_too_small`` / ``main:update_too_large``).

Plants of our own, unlike held-out set 12h's ``default-lr`` (1e-6): main's learning rate at 2e-7 (too small) and at
1e-3 (too large), beside the seed's 2e-5 at two seeds (named nothing).  Their figures are what real TRL rounds of
the math seed recorded at the offline bench's size (``eval["update"]``: steps_per_round 1, prompts_per_step 2,
groups of 4, SmolLM2-135M on CPU, round 0 from the base policy, 2026-12-07: ``LocalBackend().train_round`` on the
seed harness with the rate set, one round per rate and seed).
No model here: the digest and the recipe on a real git harness.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from test_recipe_agent import world  # noqa: F401 - the gate test's fixture
from test_stall import _repo


from meta_agent.main_checks import add_main_findings
from meta_agent.update_checks import BAND

RANGE = (0.0, 1.0)
ROUNDS = {  # learning rate @ seed -> the round's eval["update"], as the local trainer recorded it
    "1e-6@0": {"mean_abs_logp": 0.02266071, "kl": 0.0006676507, "tokens": 72, "learning_rate": 1e-06,
               "source": "probe", "seconds": 55.9},
    "2e-5@1": {"mean_abs_logp": 0.25426513, "kl": 0.1302735955, "tokens": 88, "learning_rate": 2e-05,
               "source": "round", "seconds": 8.39},
    "1e-6@1": {"mean_abs_logp": 0.01393218, "kl": 0.0003687306, "tokens": 88, "learning_rate": 1e-06,
               "source": "round", "seconds": 10.43},
    "2e-4@1": {"mean_abs_logp": 2.055583, "kl": 1.942181468, "tokens": 88, "learning_rate": 0.0002,
               "source": "round", "seconds": 15.57},
    "2e-7@0": {"mean_abs_logp": 0.0045144, "kl": 2.6529e-05, "tokens": 72, "learning_rate": 2e-07,
               "source": "probe", "seconds": 85.67, "cpu_s": 16.94},
    "1e-3@1": {"mean_abs_logp": 8.42303181, "kl": 8.1003675461, "tokens": 88, "learning_rate": 0.001,
               "source": "round", "seconds": 18.15, "cpu_s": 3.03},
    "2e-5@0": {"mean_abs_logp": 0.44866201, "kl": 0.2303664982, "tokens": 72, "learning_rate": 2e-05,
               "source": "probe", "seconds": 93.71, "cpu_s": 14.43},
    "2e-4@0": {"mean_abs_logp": 2.88356209, "kl": 6.9945497513, "tokens": 72, "learning_rate": 0.0002,
               "source": "probe", "seconds": 94.11, "cpu_s": 14.09},
    "2e-5@0 seed size": {"mean_abs_logp": 0.29679722, "kl": 0.1519264281, "tokens": 54, "learning_rate": 2e-05,
                         "source": "round", "seconds": 16.92, "cpu_s": 2.79},  # 3 steps of 4 groups
}
SEED_ROUNDS = ("2e-5@0", "2e-5@1", "2e-5@0 seed size")


def _digest(key: str, **knobs) -> dict:
    update = ROUNDS[key]
    digest: dict = {"round": 0, "domain": "math", "failure_modes": [], "evidence": {}}
    add_main_findings(digest, [], RANGE, update=update,
                      knobs={"learning_rate": update["learning_rate"], "steps_per_round": 1, "beta": 0.0, **knobs})
    return digest


def _named(digest: dict) -> list[dict]:
    return [m for m in digest["failure_modes"] if str(m["name"]).startswith("main:update_too_")]


def test_a_round_at_1e_6_is_named_too_small_with_its_figure_and_band() -> None:
    [found] = _named(_digest("1e-6@0"))
    assert found["name"] == "main:update_too_small", found
    assert found["evidence"]["mean_abs_logp"] == 0.02266071 and found["evidence"]["source"] == "probe", found
    low, high = found["evidence"]["band"]
    assert low > 0.02266071 and found["evidence"]["target"] > low, found["evidence"]


def test_the_seeds_rate_is_named_nothing() -> None:
    """The seed's 2e-5 (it learnt over three rounds, +0.089 paired) at the same size: inside the band."""
    for key in SEED_ROUNDS:
        digest = _digest(key)
        assert _named(digest) == [], (key, _named(digest))
        assert digest["main_checks"]["update_size"]["passed"] is True, digest["main_checks"]


def test_own_plants_are_named_each_way() -> None:
    """2e-7 (five times below 12h's default-lr) too small; 1e-3 (fifty times the seed's) too large."""
    [small] = _named(_digest("2e-7@0"))
    [large] = _named(_digest("1e-3@1"))
    assert small["name"] == "main:update_too_small" and large["name"] == "main:update_too_large", (small, large)
    assert small["severity"] == "error" and small["rate"] > 0.5, small  # > 10x below the band
    assert large["evidence"]["mean_abs_logp"] > large["evidence"]["band"][1], large["evidence"]
    assert "learning_rate 0.001" in large["message"], large["message"]


def test_no_figure_names_nothing_and_says_why() -> None:
    for update, why in ((None, "records no policy shift"), ({"mean_abs_logp": None, "tokens": 0}, "first group")):
        digest: dict = {"round": 0, "domain": "math", "failure_modes": []}
        add_main_findings(digest, [], RANGE, update=update, knobs={"learning_rate": 1e-6})
        assert _named(digest) == [] and why in digest["main_checks"]["update_size"]["detail"], digest["main_checks"]


@pytest.mark.parametrize("key, low, high", [("1e-6@0", 5e-6, 5e-5),  # 12h's repair range
                                            ("2e-7@0", 2e-6, 2e-6),  # x10, the most a round
                                            ("2e-4@1", 1e-5, 5e-5),  # in-sample lr-too-high's: <= 5e-5
                                            ("2e-4@0", 1e-5, 5e-5),
                                            ("1e-3@1", 1e-4, 1e-4)])  # /10, the most a round
def test_the_recipe_scales_the_rate_by_the_target_over_the_measured(tmp_path: Path, key: str, low: float,
                                                                     high: float) -> None:
    from meta_agent.agents.recipe_types import Change, HarnessFiles
    from meta_agent.agents.recipe_update import resize_update
    lr = ROUNDS[key]["learning_rate"]
    repo = _repo(tmp_path, learning_rate=lr)
    change = resize_update(_digest(key), HarnessFiles.read(repo))
    assert isinstance(change, Change), change
    new = yaml.safe_load(change.files["harness.yaml"])["grpo"]["learning_rate"]
    assert low <= new <= high and (new > lr) == (ROUNDS[key]["mean_abs_logp"] < BAND.low), (key, new)
    assert change.effects == [e for e in change.effects if e.startswith("heldout_accuracy increase")], change.effects


def test_the_recipe_declines_at_the_trainers_highest_rate(tmp_path: Path) -> None:
    from meta_agent.agents.recipe_types import HarnessFiles
    from meta_agent.agents.recipe_update import resize_update
    repo = _repo(tmp_path, learning_rate=1e-2)
    why = resize_update(_digest("1e-6@0", learning_rate=1e-2), HarnessFiles.read(repo))
    assert isinstance(why, str) and "bound" in why, why


def test_both_rounds_at_1e_6_are_named_whichever_way_they_were_measured() -> None:
    """Seed 0's round had no gradient (a probe step measured it); seed 1's trained: its own step."""
    assert [m["evidence"]["source"] for k in ("1e-6@0", "1e-6@1") for m in _named(_digest(k))] == ["probe", "round"]


CONSTANT_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": 0.0}
'''


@pytest.mark.slow
@pytest.mark.docker
def test_a_real_round_without_gradient_records_a_probe_step_and_leaves_the_weights(tmp_path: Path,
                                                                                   docker_sandbox) -> None:
    """One tiny TRL round (1 prompt x 2 completions of 8 tokens) whose reward pays nothing: no step has a gradient,
    so the trainer measures a probe step, then puts every weight back: the saved policy is the base model, bit for
    bit, and the figure names the rate too small."""
    from test_local_backend import load_weights, make_harness, spec_for

    from rl_backend.local import LocalBackend
    from rl_backend.model import ensure_base_model
    harness = make_harness(tmp_path / "h", {"learning_rate": 1e-7}, {"reward.py": CONSTANT_REWARD})
    result = LocalBackend(sandbox=docker_sandbox).train_round(spec_for(tmp_path, "probe", harness, None))
    update = result.eval["update"]
    assert update["source"] == "probe" and update["learning_rate"] == 1e-7 and update["tokens"] > 0, update
    assert 0 < update["mean_abs_logp"] < 0.05 and update["kl"] >= 0, update
    base, after = load_weights(str(ensure_base_model())), load_weights(result.policy_ref)
    assert base.keys() == after.keys() and [k for k in base if not (base[k] == after[k]).all()] == []
    digest: dict = {"round": 0, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], RANGE, update=update, knobs={"learning_rate": 1e-7, "steps_per_round": 1})
    assert [m["name"] for m in _named(digest)] == ["main:update_too_small"], digest["main_checks"]


@pytest.mark.docker
def test_gate_merges_resize_update_on_probation(world, docker_sandbox, tmp_path: Path) -> None:  # noqa: F811
    """The recipe's branch on a seed harness at 1e-6, judged by the gate: a training knob only, so rewards and keep
    masks are main's and it merges on probation (only the next rounds can show the policy moving)."""
    from test_recipe_agent import SETTINGS, gate_view, propose

    from meta_agent.agents.recipe_update import resize_update
    from meta_agent.backtest import backtest_branch
    repo = _repo(tmp_path, learning_rate=1e-6)
    digest = dict(world.digests["unanswered"], round=1)
    add_main_findings(digest, [], RANGE, update=ROUNDS["1e-6@0"], knobs={"learning_rate": 1e-6})
    [p] = propose(repo, digest, rules=(resize_update,))
    assert p.branch == "iv/r1-resize-update" and 5e-6 <= repo.config(p.branch).grpo.learning_rate <= 5e-5
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, world.root / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert gate_view(outcome)[1] == {"heldout_accuracy increase": "live"}


def test_a_stall_and_a_small_update_get_one_learning_rate_branch(tmp_path: Path) -> None:
    """Both findings raise the rate: unstall leaves it to resize-update (aimed from the measured movement), so the
    two branches cannot conflict on the same line of harness.yaml."""
    import json

    from meta_agent.agents.recipe_stall import unstall
    from meta_agent.agents.recipe_types import Change, HarnessFiles
    from meta_agent.agents.recipe_update import resize_update
    stall = json.loads((Path(__file__).parent / "data" / "stall_exams.json").read_text())["stalled"]
    digest: dict = {"round": 1, "domain": "math", "failure_modes": []}
    add_main_findings(digest, [], RANGE, exam=stall["round1"]["heldout"], exam_before=stall["round0_heldout"],
                      metrics=[], update=ROUNDS["1e-6@1"], knobs={"learning_rate": 1e-6})
    names = {m["name"] for m in digest["failure_modes"]}
    assert {"main:policy_stalled", "main:update_too_small"} <= names, names
    files = HarnessFiles.read(_repo(tmp_path, learning_rate=1e-6))
    why = unstall(digest, files)
    assert isinstance(why, str) and "resize-update" in why, why
    assert isinstance(resize_update(digest, files), Change)
