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


# -- the repair benchmark's diagnosis: causes first, a budget far below the seed's, a hot sampler ----------

def _math(**grpo: float) -> HarnessFiles:
    import yaml
    files = _files("math")
    config = yaml.safe_load(files.config_text)
    config["grpo"].update(grpo)
    return HarnessFiles(yaml.safe_dump(config, sort_keys=False), files.reward, files.user_prompt)


def test_truncation_doubles_a_budget_that_cut_every_answer_and_never_aims_at_the_seeds() -> None:
    """With no finished answer anywhere the length needed is unknown past the cut: twice the budget, from 8 as
    from the seed's 32 (the old recipe went back to 32, the seed's, from below and x1.5 above it); with no
    archive evidence at all, x1.5."""
    import yaml
    from meta_agent.agents.recipes import truncation
    nothing_finished = {"truncation_rate": 0.6, "evidence": {"answer_tokens": [], "finished_tokens": []}}
    change = truncation(nothing_finished, _math(max_completion_length=8))
    assert isinstance(change, Change), change
    assert yaml.safe_load(change.files["harness.yaml"])["grpo"]["max_completion_length"] == 16
    assert change.root_cause
    at_seed = truncation(nothing_finished, _math())
    assert yaml.safe_load(at_seed.files["harness.yaml"])["grpo"]["max_completion_length"] == 64
    blind = truncation({"truncation_rate": 0.6}, _math(max_completion_length=8))
    assert yaml.safe_load(blind.files["harness.yaml"])["grpo"]["max_completion_length"] == 12


def test_cool_sampling_cools_by_the_rambling_share_from_any_temperature() -> None:
    import yaml
    from meta_agent.agents.recipes import cool_sampling
    hot = cool_sampling({"no_final_answer_rate": 0.8}, _math(temperature=1.3))
    assert isinstance(hot, Change) and hot.root_cause and hot.effects == [
        "no_final_answer_rate decrease: a cooler sampler stays on task"]
    assert yaml.safe_load(hot.files["harness.yaml"])["grpo"]["temperature"] == 0.6  # from 1 at most: x(1 - 0.8 / 2)
    at_seed = cool_sampling({"no_final_answer_rate": 0.8}, _math())
    assert yaml.safe_load(at_seed.files["harness.yaml"])["grpo"]["temperature"] == 0.42
    assert "not above" in cool_sampling({"no_final_answer_rate": 0.2}, _math(temperature=1.3))
    repeated = {"no_final_answer_rate": 0.8, "evidence": {"identical_share": 0.75}}
    assert "repeat each other" in cool_sampling(repeated, _math(temperature=1.3))


def test_a_cause_outranks_the_stronger_symptoms_it_produces(tmp_path: Path) -> None:
    """Every group flat and most lines missing (strength 1.0 each) because answers are cut off (0.5): the
    truncation recipe takes a slot ahead of them; the strongest symptom takes the other."""
    from test_recipe_agent import propose, quiet_digest, transcript

    from harness_repo.repo import HarnessRepo
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"prompts/user.j2": "{{ question }}\n"}, "No final-answer line")  # the seed's asks already
    digest = quiet_digest(zero_variance_share=1.0, no_final_answer_rate=1.0, truncation_rate=0.625)
    branches = [p.branch for p in propose(repo, digest)]
    # the two symptoms tie at 1.0 and keep rule order: the prompt line before larger groups
    assert branches == ["iv/r1-truncation", "iv/r1-final-answer-prompt"], branches
    assert transcript(repo, 1)["larger-groups"]["reason"] == "outranked (max_candidates=2)"


def test_restore_diagnostic_fires_only_when_a_changed_diagnostic_went_silent_on_a_seen_mode() -> None:
    from meta_agent.agents.recipes import restore_diagnostic
    seed = (SEEDS / "math" / "diagnostics" / "truncation.py").read_text()
    silent = "def diagnose(rollouts):\n    return []\n"
    trusted = {"name": "truncation", "source": "trusted", "severity": "info", "rate": 0.125}
    files = _math()
    files.diagnostics = {"truncation": silent}
    change = restore_diagnostic({"failure_modes": [trusted]}, files)
    # main's own code, calibrated to the trusted measure (a2, session 36): never the seed's file as the target
    assert isinstance(change, Change) and list(change.files) == ["diagnostics/truncation.py"]
    assert change.files["diagnostics/truncation.py"].startswith(silent) and change.files[
        "diagnostics/truncation.py"] != seed and "_uncalibrated_diagnose = diagnose" in change.files[
        "diagnostics/truncation.py"]
    assert change.effects == ["finding truncation added: the diagnostic reports truncation again"]
    # the harness's diagnostic reported (any severity), or it is the seed's own, or the digest saw nothing
    assert isinstance(restore_diagnostic({"failure_modes": [trusted, _finding("truncation", 0.1)]}, files), str)
    files.diagnostics = {"truncation": seed}
    assert isinstance(restore_diagnostic({"failure_modes": [trusted]}, files), str)
    files.diagnostics = {"truncation": silent}
    assert isinstance(restore_diagnostic({"failure_modes": [dict(trusted, rate=0.0)]}, files), str)


def test_groups_too_small_to_vary_get_larger_before_flat_ones_are_dropped(tmp_path: Path) -> None:
    """tiny-groups' round: groups of 2, 75% flat.  Dynamic sampling and larger groups tie at 0.5 and both edit
    harness.yaml; the group size is the cause, so larger groups takes the slot and dynamic sampling waits.
    At the seed's groups of 4 the order stays the rule order."""
    import yaml
    from test_recipe_agent import propose, quiet_digest, transcript

    from harness_repo.repo import HarnessRepo
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(group_size=2, prompts_per_step=8)
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Groups of 2")
    assert [p.branch for p in propose(repo, quiet_digest(zero_variance_share=0.75))] == ["iv/r1-larger-groups"]
    assert transcript(repo, 1)["dynamic-sampling"]["reason"].startswith("deferred: harness.yaml")
    seed = HarnessRepo.create(tmp_path / "seed", "math")
    assert [p.branch for p in propose(seed, quiet_digest(zero_variance_share=0.75))] == ["iv/r1-dynamic-sampling"]


def test_a_mode_reported_by_the_trusted_digest_and_a_harness_diagnostic_is_listed_once():
    from meta_agent.agents.recipe import _unaddressed

    same = {"name": "truncation", "severity": "warning", "rate": 0.4375}
    digest = {"failure_modes": [dict(same, source="diagnostics"), dict(same, source="trusted"),
                                dict(same, rate=0.5, source="trusted")]}
    lines = _unaddressed(digest, [{"rule": "truncation", "reason": "deferred: harness.yaml already edited"}])
    rest = "restore-diagnostic: not run by this agent; unmask-truncation: not run by this agent"
    assert lines == ["truncation (warning, rate 0.438): truncation: deferred: harness.yaml already edited; " + rest,
                     "truncation (warning, rate 0.500): truncation: deferred: harness.yaml already edited; " + rest]


def test_two_changes_predicting_one_benefit_are_not_proposed_in_one_round(tmp_path: Path) -> None:
    """hot-sampling's live round 0: cool-sampling and final-answer-prompt both predict ``no_final_answer_rate
    decrease``.  Merged together, the next round's fall is credited to neither (live_check: shared) and both,
    on probation, were reverted, so the repair was lost and never proposed again ("already tried").  The cause
    (the sampler) takes the slot; the prompt line waits for a later round, and is proposed then if still needed."""
    import yaml
    from test_recipe_agent import propose, quiet_digest, transcript

    from harness_repo.repo import HarnessRepo
    from meta_agent.live_check import claimed_benefits
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"]["temperature"] = 1.3
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Hot sampling")
    repo.commit_files({"prompts/user.j2": "{{ question }}\n"}, "No final-answer line")
    digest = quiet_digest(round=0, no_final_answer_rate=0.9)
    proposals = propose(repo, digest)
    assert [p.branch for p in proposals] == ["iv/r0-cool-sampling"]
    reason = transcript(repo, 0)["final-answer-prompt"]["reason"]
    assert reason == "deferred: no_final_answer_rate is already the predicted benefit of cool-sampling this round"
    # the seed's temperature: nothing else claims the field, and the prompt line is proposed
    repo.commit_files({"harness.yaml": repo.read_file("main", "harness.yaml").replace("1.3", "0.7")}, "Cool")
    assert [p.branch for p in propose(repo, quiet_digest(round=1, no_final_answer_rate=0.9))] == [
        "iv/r1-final-answer-prompt"]
    assert claimed_benefits(["no_final_answer_rate decrease: x", "kept_share decrease: y",
                             "audit_miss_rate decrease: z"]) == {"no_final_answer_rate"}
