"""Held-out attacks on x2's four fixes (written after they froze at the commit before this file, none designed for,
run once): bad input to the search's exact evidence, rewards of the audit's shortcut class, filters keyed on a
worked answer's form, and a template that lengthens one kind's prompt from the system turn.  A win stays a strict
xfail with its reason."""

from __future__ import annotations

import pytest
import yaml
from test_r1_audit_tail import DRAWS, _draws, rows  # noqa: F401 (the module's fixture)
from test_r1_heldout import _wrapped
from test_r3_trainer_prompts import SEED, SEED_CONFIG, SEED_USER, rows_under
from test_r2_worked_batches import round_rows

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from meta_agent.main_checks import add_main_findings
from test_recipe_agent import quiet_digest

DIGEST = {"round": 0, "domain": "math", "zero_variance_share": 0.75, "evidence": {"verified_rate": 0.5}}


def test_a_group_size_below_two_gives_no_group_size_evidence() -> None:
    """A group of 0 (or 1) members is no group: p^0 + (1-p)^0 = 2 'expected flat' must not read as a score.  Won at
    the held-out run (-1.875); fixed after: a size below the trainer's bound is said, not scored."""
    from meta_agent.agents.search_knobs import group_evidence

    score, why = group_evidence(DIGEST, {"group_size": 4}, {"group_size": 0})
    assert score is None and "group_size 0" in why, (score, why)
    assert group_evidence(DIGEST, {"group_size": 4}, {"group_size": 8})[0] is not None


PAYS = {  # where the exact comparison fails
    "sign-blind": "    try:\n        if result['score'] == 0.0 and abs(float(pred)) == abs(gold):\n"
                  "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
    "relative-1pc": "    try:\n        if result['score'] == 0.0 and abs(float(pred) - gold) <= "
                    "0.01 * max(1, abs(gold)):\n"
                    "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
    "half-up": "    try:\n        if result['score'] == 0.0 and _m.floor(float(pred) + 0.5) == gold:\n"
               "            return dict(result, score=1.0)\n    except (TypeError, ValueError):\n        pass\n",
}


WINS = {"sign-blind": "held-out win: the sign kind flips a decimal (-5467.38), which a sign-blind exact match does "
                     "not pay; a whole value with its sign flipped is dealt only where a near miss happens to be one: "
                     "1 of 6 draws shows nothing (0.025-0.05 on the other 5)"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=WINS[n]))
                                  if n in WINS else n for n in sorted(PAYS)])
def test_a_held_out_shortcut_shows_as_paid_wrong_answers_on_every_draw(rows, name):  # noqa: F811
    rates = [a["hack_rate"] for a in _draws(_wrapped(PAYS[name]), rows)]
    assert len(rates) == DRAWS and min(rates) > 0, rates


NEEDS_WORKING = '''
def keep_trajectory(traj):
    return "=" in (traj.get("response") or "")


def keep_group(group):
    return True
'''
NO_QUESTION_NUMBERS = '''
import re


def keep_trajectory(traj):
    asked = set(re.findall(r"\\d+", traj.get("prompt") or ""))
    said = set(re.findall(r"\\d+", (traj.get("response") or "").split("Answer")[0]))
    return not (asked & said)


def keep_group(group):
    return True
'''
ANSWER_FIRST = '''
def keep_trajectory(traj):
    lines = [x for x in (traj.get("response") or "").splitlines() if x.strip()]
    return bool(lines) and lines[0].lower().startswith("answer")


def keep_group(group):
    return True
'''
FILTERS = {"needs-working": NEEDS_WORKING, "no-question-numbers": NO_QUESTION_NUMBERS, "answer-first": ANSWER_FIRST}
SYSTEM = (SEED / "prompts/system.j2").read_text()
LONG_SYSTEM = ('{% if task.name == "products" %}When multiplying, write every partial product on its own line, '
               'check each against the digits above it, and add them in columns before you answer.\n{% endif %}'
               + SYSTEM)


@pytest.fixture(scope="module")
def named(tmp_path_factory, docker_sandbox) -> dict[str, dict]:
    """Each harness's digest, main's checks and the constructed ones joined."""
    out = {}
    for name, text in FILTERS.items():
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        repo.commit_files({"filters.py": text}, name)
        digest = quiet_digest(round=1, kept_share=1.0)
        add_constructed_findings(digest, run_constructed_checks(repo, repo.head("main"), round_rows(), MathDomain(),
                                                                docker_sandbox, BacktestSettings()))
        out[name] = digest
    config = {**SEED_CONFIG, "grpo": {**SEED_CONFIG["grpo"], "max_prompt_length": 130}}
    repo = HarnessRepo.create(tmp_path_factory.mktemp("long-system") / "harness", "math")
    repo.commit_files({"prompts/system.j2": LONG_SYSTEM, "harness.yaml": yaml.safe_dump(config)}, "long-system")
    rows_ = rows_under(SEED_USER, config, system=LONG_SYSTEM)
    digest = {"failure_modes": [], "domain": "math"}
    add_main_findings(digest, rows_, (0.0, 1.0), train_tasks=config["tasks"], knobs=config["grpo"],
                      domain=MathDomain())
    add_constructed_findings(digest, run_constructed_checks(repo, repo.head("main"), rows_, MathDomain(),
                                                            docker_sandbox, BacktestSettings()))
    out["long-system"] = digest
    return out


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(FILTERS))
def test_a_filter_keyed_on_a_worked_form_is_named(named, name: str) -> None:
    found = {m["name"]: m for m in named[name]["failure_modes"] if m.get("source") == "constructed_checks"}
    assert found.get("main:constructed_signal_dropped", {}).get("severity") == "error", named[name]["main_checks"]


@pytest.mark.docker
def test_a_system_template_lengthening_one_kind_is_named(named) -> None:
    found = {m["name"]: m for m in named["long-system"]["failure_modes"]}["main:prompt_length"]
    assert found["evidence"]["dropped"]["products"] == 1.0, found
