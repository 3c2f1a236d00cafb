"""What the trainer does to main's prompts before the policy sees them (issue 44, held-out set 12k): it keeps only
prompts that fit max_prompt_length (a kind of the mix can vanish, nothing fails) and wraps the rendered messages in
the policy's chat template (markup a template writes by hand is wrapped again).  Real seed templates rendered with
jinja, the real math generator, the real SmolLM2 tokenizer the loop trains with; main's own checks and recipes."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
import yaml

from domains.math import MathDomain
from harness_repo.contract import TaskSpec
from harness_repo.repo import SEEDS_DIR
from meta_agent.agents.recipe_limits import fit_limit
from meta_agent.agents.recipe_markup import markup_evidence, strip_markup
from meta_agent.agents.recipe_types import Change, HarnessFiles
from meta_agent.main_checks import add_main_findings

SEED = SEEDS_DIR / "math"
POLICY = Path.home() / ".cache/meta_agent/models/SmolLM2-135M-Instruct"
MARKED_USER = ('<|im_start|>user\n{{ question }}\n\nEnd with the line "Answer: <number>".<|im_end|>\n'
               '<|im_start|>assistant\n')
pytestmark = pytest.mark.skipif(not POLICY.exists(), reason=f"the policy's tokenizer is not at {POLICY}")


def rows_under(user: str, config: dict, n: int = 8, system: str | None = None) -> list[dict]:
    """A round's training rows as the trainer archives them: tasks of the mix's first kind (the one that fits),
    messages rendered by the templates (system from the seed), a reply each."""
    env = jinja2.Environment()
    system = (SEED / "prompts/system.j2").read_text() if system is None else system
    spec = TaskSpec.model_validate(config["tasks"][0])
    rows = []
    for i, t in enumerate(MathDomain().tasks("train", [spec], n, 1)):
        view = {"question": t.question, "task": t.template_vars()}
        msgs = [{"role": "system", "content": env.from_string(system).render(**view).strip()},
                {"role": "user", "content": env.from_string(user).render(**view).strip()},
                {"role": "assistant", "content": "Answer: 3"}]
        rows.append({"traj_id": f"r-{i}", "group_id": f"g{i // 4}", "task_id": t.task_id, "split": "train",
                     "prompt": "", "response": "Answer: 3", "messages": json.dumps(msgs), "reward": 0.0,
                     "verified": 0.0, "kept": True, "truncated": False, "policy_ref": str(POLICY),
                     "ground_truth": json.dumps(t.ground_truth), "task": json.dumps(
                         {"question": t.question, "vars": t.template_vars()})})
    return rows


def names(user: str, config: dict, system: str | None = None) -> dict[str, dict]:
    digest: dict = {"failure_modes": [], "domain": "math"}
    add_main_findings(digest, rows_under(user, config, system=system), (0.0, 1.0), train_tasks=config["tasks"],
                      knobs=config["grpo"], domain=MathDomain())
    return {m["name"]: m for m in digest["failure_modes"]}


SEED_CONFIG = yaml.safe_load((SEED / "harness.yaml").read_text())
TIGHT = {**SEED_CONFIG, "grpo": {**SEED_CONFIG["grpo"], "max_prompt_length": 120}}


def test_budget_between_kinds_is_named() -> None:
    found = names((SEED / "prompts/user.j2").read_text(), TIGHT)
    assert found["main:prompt_length"]["evidence"]["dropped"]["products"] == 1.0


def test_hand_markup_is_named() -> None:
    found = names(MARKED_USER, SEED_CONFIG)
    assert found["main:chat_markup"]["rate"] == 1.0


SEED_USER = (SEED / "prompts/user.j2").read_text()


def files_of(user: str, config: dict) -> HarnessFiles:
    return HarnessFiles(yaml.safe_dump(config), (SEED / "reward.py").read_text(), user,
                        system_prompt=(SEED / "prompts/system.j2").read_text())


def test_the_seed_is_named_neither() -> None:
    found = names(SEED_USER, SEED_CONFIG)
    assert "main:prompt_length" not in found and "main:chat_markup" not in found


def test_fit_limit_raises_the_budget_to_what_each_kind_needs() -> None:
    digest = {"failure_modes": list(names(SEED_USER, TIGHT).values())}
    change = fit_limit(digest, files_of(SEED_USER, TIGHT))
    assert isinstance(change, Change), change
    new = yaml.safe_load(change.files["harness.yaml"])
    assert new["grpo"]["max_prompt_length"] == 160
    assert new["tasks"] == TIGHT["tasks"]  # both kinds stay in the mix
    assert change.effects[0].startswith("heldout_accuracy increase")
    assert "main:prompt_length" not in names(SEED_USER, new)  # the check re-run on the branch's config


def test_strip_markup_keeps_the_text_between_markers() -> None:
    digest = {"failure_modes": list(names(MARKED_USER, SEED_CONFIG).values())}
    change = strip_markup(digest, files_of(MARKED_USER, SEED_CONFIG))
    assert isinstance(change, Change), change
    user = change.files["prompts/user.j2"]
    assert user == '{{ question }}\n\nEnd with the line "Answer: <number>".\n'
    assert markup_evidence(digest, change) == ""
    assert "main:chat_markup" not in names(user, SEED_CONFIG)  # the check re-run on the branch's templates


def test_strip_markup_declines_what_the_templates_do_not_write() -> None:
    digest = {"failure_modes": [{"name": "main:chat_markup", "rate": 1.0, "evidence": {"tokens": ["<|im_start|>"]}}]}
    assert "neither template" in strip_markup(digest, files_of(SEED_USER, SEED_CONFIG))


@pytest.mark.docker
def test_gate_merges_strip_markup_on_probation(docker_sandbox, tmp_path: Path) -> None:
    """12k's hand-marked user template on a seed harness, named by main:chat_markup: the stripped templates render,
    fit and are judged by the real gate over the world's archive; the branch merges on probation (its benefit, the
    exam's prompt shape, shows only in a trained round)."""
    from test_recipe_agent import SETTINGS, World, gate_view, propose

    from harness_repo.repo import HarnessRepo
    from meta_agent.backtest import backtest_branch
    world = World(tmp_path / "world")
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/user.j2": MARKED_USER}, "plant")
    mode = names(MARKED_USER, SEED_CONFIG)["main:chat_markup"]
    digest = dict(world.digests["unanswered"], failure_modes=[mode])
    [p] = propose(repo, digest, rules=(strip_markup,))
    assert p.branch.endswith("-strip-markup") and "<|im_start|>" not in repo.read_file(p.branch, "prompts/user.j2")
    outcome = backtest_branch(repo, world.archive, p.branch, docker_sandbox, tmp_path / "backtests",
                              settings=SETTINGS, run_id="unanswered")
    assert (outcome.decision, outcome.report["gate"]["probation"]) == ("merge", True), outcome.reasons
    assert set(gate_view(outcome)[1].values()) == {"live"}, gate_view(outcome)


def test_markup_goes_before_the_cue_it_shows(tmp_path: Path) -> None:
    """12k's round named main:answer_cue on the cue '<|im_start|>assistant' (the markup read as a cue) beside the
    markup: the recipe agent proposes strip-markup for prompts/user.j2, answer-cue deferred behind it."""
    from test_recipe_agent import propose

    from harness_repo.repo import HarnessRepo
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/user.j2": MARKED_USER}, "plant")
    cue = {"name": "main:answer_cue", "source": "main_checks", "severity": "error", "rate": 1.0, "message": "cue",
           "examples": [], "evidence": {"cause": "trailing_cue", "cue": "<|im_start|>assistant", "form": None,
                                        "label": None, "shots": [], "rows": 8, "missing": 1.0, "right_unread": 0.25}}
    digest = {"round": 0, "domain": "math",
              "failure_modes": [cue, names(MARKED_USER, SEED_CONFIG)["main:chat_markup"]]}
    proposals = propose(repo, digest)
    assert [p.branch.rsplit("-", 2)[-2:] for p in proposals][0] == ["strip", "markup"]
    assert "<|im_start|>" not in repo.read_file(proposals[0].branch, "prompts/user.j2")
