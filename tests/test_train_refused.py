"""A harness training refuses is a finding, not a stopped run (issue 44, item 1 of the last brief).

A planted budget flaw of this file's own: ``max_prompt_length`` 48 under the math seed's prompts (about 90-130
tokens with the chat template).  Real parts throughout: the round loop, the local TRL backend with SmolLM2-135M,
the Docker sandbox, the recipe agent, a git harness repo.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipe_limits import fit_limit
from meta_agent.agents.recipes import HarnessFiles
from meta_agent.main_checks import refusal_finding
from meta_agent.phases.refused import admit

TINY = {"group_size": 2, "prompts_per_step": 1, "steps_per_round": 1, "max_completion_length": 8}
BUDGET = 48
MEASURED = {"check": "prompt_length", "knob": "max_prompt_length", "limit": BUDGET, "needed": 2,
            "lengths": [96, 101, 104, 110, 118, 131], "examples": [{"tokens": 131, "prompt": "Solve ..."}]}


class _Stop(Exception):
    """Raised by the phase event once round 0 reaches diagnose: the test reads what training left."""


def _seed_yaml(**knobs: object) -> str:
    repo_yaml = (Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math" / "harness.yaml").read_text()
    config = yaml.safe_load(repo_yaml)
    config["grpo"].update(knobs)
    return yaml.safe_dump(config, sort_keys=False)


def test_the_refusal_is_a_finding_with_rate_examples_and_the_measured_distribution() -> None:
    f = refusal_finding(MEASURED)
    assert f["name"] == "main:prompt_length" and f["severity"] == "error" and f["rate"] == 1.0
    assert f["examples"][0]["tokens"] == 131
    ev = f["evidence"]
    assert (ev["longest"], ev["limit"], ev["knob"]) == (131, BUDGET, "max_prompt_length")
    assert ev["target"] >= 131 and ev["target"] % 16 == 0
    assert refusal_finding(MEASURED | {"limit": 105})["rate"] == pytest.approx(3 / 6)


def test_the_recipe_fits_the_budget_to_the_measured_prompts_and_the_admission_check_judges_it(tmp_path: Path) -> None:
    repo = HarnessRepo.create(tmp_path / "h", "math")
    repo.commit_files({"harness.yaml": _seed_yaml(max_prompt_length=BUDGET)}, "a budget below the prompts")
    files = HarnessFiles.read(repo)
    change = fit_limit({"failure_modes": [refusal_finding(MEASURED)]}, files)
    assert not isinstance(change, str), change
    new = yaml.safe_load(change.files["harness.yaml"])["grpo"]["max_prompt_length"]
    assert 131 <= new <= 1024
    ok, why = admit(files.config_text, change.files["harness.yaml"], ["harness.yaml"], MEASURED)
    assert ok, why
    # what the admission check refuses: another knob moved with it, a budget that still cuts, another file
    greedy = yaml.safe_load(change.files["harness.yaml"])
    greedy["grpo"]["learning_rate"] = 1e-3
    assert not admit(files.config_text, yaml.safe_dump(greedy), ["harness.yaml"], MEASURED)[0]
    assert not admit(files.config_text, _seed_yaml(max_prompt_length=105), ["harness.yaml"], MEASURED)[0]
    assert not admit(files.config_text, change.files["harness.yaml"], ["harness.yaml", "reward.py"], MEASURED)[0]
    # no measured limit in the digest: the rule says why it does not fire
    assert isinstance(fit_limit({"failure_modes": []}, files), str)
