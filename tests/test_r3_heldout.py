"""Held-out attacks on r3's checks and recipes (written after freezing them at cb4fb68, none designed for): what
each does to main's prompts, and whether main's checks name it and the recipe repairs it.  Wins stay strict
xfails with why."""

from __future__ import annotations

import pytest
import yaml
from test_r3_trainer_prompts import SEED, SEED_CONFIG, SEED_USER, files_of, names, rows_under

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from meta_agent.main_checks import add_main_findings
from meta_agent.agents.recipe_markup import strip_markup
from meta_agent.agents.recipe_types import Change

SYSTEM = (SEED / "prompts/system.j2").read_text()


def test_end_of_text_token_closing_the_user_template() -> None:
    """A template ported from a completion pipeline ends the prompt on the tokenizer's end-of-text token."""
    user = SEED_USER.rstrip("\n") + "<|endoftext|>\n"
    found = names(user, SEED_CONFIG)
    assert found["main:chat_markup"]["evidence"]["tokens"] == ["<|endoftext|>"]
    change = strip_markup({"failure_modes": list(found.values())}, files_of(user, SEED_CONFIG))
    assert isinstance(change, Change) and change.files["prompts/user.j2"] == SEED_USER.rstrip("\n") + "\n"


LONG_PRODUCTS = ('{% if task.name == "products" %}Multiply carefully, digit by digit, checking each partial '
                 'product against the digits you wrote before, and then add the partial products in columns.\n'
                 '{% endif %}' + SEED_USER)
LIMIT = 130
LONGER_PRODUCTS = ('{% if task.name == "products" %}{% for _ in range(40) %}Check each digit again. {% endfor %}\n'
                   '{% endif %}' + SEED_USER)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, docker_sandbox) -> dict[str, dict]:
    """Each harness's digest, main's checks and the constructed ones joined (the kinds' prompts rendered by main's
    templates in the sandbox): the seed's templates and a user template that lengthens only the products' prompt,
    both at max_prompt_length 130, and the seed as it is."""
    out = {}
    unset = {**SEED_CONFIG, "grpo": {k: v for k, v in SEED_CONFIG["grpo"].items() if k != "max_prompt_length"}}
    for name, user, config in [("seed", SEED_USER, SEED_CONFIG), ("seed-130", SEED_USER, _limited(LIMIT)),
                               ("long-products", LONG_PRODUCTS, _limited(LIMIT)),
                               ("default-limit", LONGER_PRODUCTS, unset)]:
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        repo.commit_files({"prompts/user.j2": user, "harness.yaml": yaml.safe_dump(config)}, name)
        rows = rows_under(user, config)
        digest: dict = {"failure_modes": [], "domain": "math"}
        add_main_findings(digest, rows, (0.0, 1.0), train_tasks=config["tasks"], knobs=config["grpo"],
                          domain=MathDomain())
        add_constructed_findings(digest, run_constructed_checks(repo, repo.head("main"), rows, MathDomain(),
                                                                docker_sandbox, BacktestSettings()))
        out[name] = digest
    return out


def _limited(limit: int) -> dict:
    return {**SEED_CONFIG, "grpo": {**SEED_CONFIG["grpo"], "max_prompt_length": limit}}


def _named(digest: dict) -> dict[str, dict]:
    return {m["name"]: m for m in digest["failure_modes"]}


@pytest.mark.docker
def test_template_lengthening_only_one_kind(rendered) -> None:
    """Won at the first run: the lengths were measured by re-filling an archived prompt of the kind that fit, and
    the archive holds none of the branch.  Now main's templates render fresh tasks of each kind in the sandbox."""
    found = _named(rendered["long-products"])["main:prompt_length"]
    assert found["evidence"]["dropped"]["products"] == 1.0, found
    assert found["evidence"]["dropped"]["chain_sum"] == 0.0, found
    assert "rendered in the sandboxed runtime" in found["evidence"]["measured_by"], found
    assert len([m for m in rendered["long-products"]["failure_modes"] if m["name"] == "main:prompt_length"]) == 1


@pytest.mark.docker
@pytest.mark.parametrize("name", ["seed", "seed-130"])
def test_the_seed_templates_fit_where_the_branch_does_not(rendered, name: str) -> None:
    """The attack's control: the same limit without the branch, and the seed as it is, name no length."""
    assert "main:prompt_length" not in _named(rendered[name]), rendered[name]["main_checks"]["prompt_length"]
    check = rendered[name]["main_checks"]["prompt_length"]
    assert check["passed"] and "rendered in the sandboxed runtime" in check["detail"], check


def test_markup_in_the_system_template_only() -> None:
    """The system prompt, not the user's, writes its own turn markers: main's rows under it are named, and the
    recipe edits system.j2 alone, back to the text between the markers."""
    marked = "<|im_start|>system\n" + SYSTEM.rstrip("\n") + "<|im_end|>\n"
    found = names(SEED_USER, SEED_CONFIG, system=marked)
    assert found["main:chat_markup"]["rate"] == 1.0
    files = files_of(SEED_USER, SEED_CONFIG)
    files.system_prompt = marked
    change = strip_markup({"failure_modes": list(found.values())}, files)
    assert isinstance(change, Change) and set(change.files) == {"prompts/system.j2"}
    assert change.files["prompts/system.j2"] == SYSTEM.rstrip("\n") + "\n"


@pytest.mark.docker
def test_a_harness_that_sets_no_limit_is_measured_against_the_trainers_default(rendered) -> None:
    """harness.yaml without max_prompt_length trains under GRPOKnobs' default (256): the products' prompts
    lengthened past it are dropped all the same."""
    found = _named(rendered["default-limit"])["main:prompt_length"]
    assert found["evidence"]["limit"] == 256 and found["evidence"]["dropped"]["products"] == 1.0, found
