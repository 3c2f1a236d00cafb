"""Recipes for the failure modes that had none: code programs killed by the grader's limits or using
forbidden operations, answers without a loadable function, SWE agents that submit untested, empty patches.
Each is a prompt line (the reward is unchanged), fires on its mode and stays quiet without it."""

from __future__ import annotations

from pathlib import Path

import harness_repo
from meta_agent.agents.code_recipes import code_format_example, code_limits_prompt
from meta_agent.agents.recipes import Change, HarnessFiles
from meta_agent.agents.swe_recipes import swe_format_example, swe_test_first

SEEDS = Path(harness_repo.__file__).parent / "seeds"


def _files(domain: str) -> HarnessFiles:
    seed = SEEDS / domain
    return HarnessFiles(config_text=(seed / "harness.yaml").read_text(), reward=(seed / "reward.py").read_text(),
                        user_prompt=(seed / "prompts" / "user.j2").read_text())


def _finding(name: str, rate: float, source: str = "diagnostics") -> dict:
    return {"name": name, "source": source, "severity": "warning", "rate": rate}


def test_code_limits_prompt_fires_on_timeouts_and_any_forbidden_operation() -> None:
    files = _files("code")
    quiet = {"domain": "code", "code": {"timeout_rate": 0.1, "forbidden_rate": 0.0}, "failure_modes": []}
    assert "not above" in code_limits_prompt(quiet, files)
    for digest in (quiet | {"code": {"timeout_rate": 0.3, "forbidden_rate": 0.0}},
                   quiet | {"code": {"timeout_rate": 0.0, "forbidden_rate": 0.05}},
                   quiet | {"failure_modes": [_finding("resource_limits", 0.4)]}):
        change = code_limits_prompt(digest, files)
        assert isinstance(change, Change), digest
        assert set(change.files) == {"prompts/user.j2"}
        assert "recipe: code-limits-prompt" in change.files["prompts/user.j2"]
        assert change.files["prompts/user.j2"].startswith(files.user_prompt.rstrip("\n"))
    # once in main's prompt it does not fire again; a trusted-source mode of that name is not the diagnostic's
    merged = HarnessFiles(files.config_text, files.reward, change.files["prompts/user.j2"])
    assert "already" in code_limits_prompt(quiet | {"code": {"timeout_rate": 0.3}}, merged)
    assert "not above" in code_limits_prompt(quiet | {"failure_modes": [_finding("timeouts", 0.9, "trusted")]}, files)
    assert "not a code round" in code_limits_prompt({"domain": "math"}, files)


def test_code_format_example_counts_missing_and_unloadable_functions() -> None:
    files = _files("code")
    digest = {"domain": "code", "code": {"no_code_rate": 0.0}, "failure_modes": [_finding("missing_function", 0.2)]}
    assert "not above" in code_format_example(digest, files)
    digest["failure_modes"].append(_finding("load_errors", 0.2))
    assert isinstance(code_format_example(digest, files), Change)


def test_swe_test_first_fires_on_untested_submissions_and_empty_patches_count_as_malformed() -> None:
    files = _files("swe")
    swe = {"domain": "swe", "swe": {}, "format_error_rate": 0.3, "failure_modes": []}
    assert "no agent-behaviour finding" in swe_test_first(swe, files)
    assert "not above" in swe_test_first(swe | {"failure_modes": [_finding("repeated_commands", 0.2)]}, files)
    change = swe_test_first(swe | {"failure_modes": [_finding("no_test_before_submit", 0.6)]}, files)
    assert isinstance(change, Change) and "recipe: swe-test-first" in change.files["prompts/user.j2"]
    assert "not above" in swe_format_example(swe, files)
    assert isinstance(swe_format_example(swe | {"failure_modes": [_finding("empty_patch", 0.3)]}, files), Change)
    assert "not a SWE round" in swe_test_first({"domain": "math"}, files)
