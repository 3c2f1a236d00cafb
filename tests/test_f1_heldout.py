"""Held-out attacks on the ratchet's calibration (written after the code froze at bf74123, run once): shapes the
rule was not designed around.  A case the ratchet lets through stays a strict xfail that says why."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness_repo
from meta_agent.diagnostic_checks import round_bands, trusted_rates
from meta_agent.judge.diagnose_sessions import diagnose_views
from meta_agent.judge.findings import compare_findings
from test_recipe_agent import load_path, scenario_rows


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    reward = load_path(Path(harness_repo.__file__).parent / "seeds" / "math" / "reward.py")
    return scenario_rows("h", 0, [("R", "T", "W", "I"), ("R", "W", "N", "I")] * 4, reward)


def _f(name: str, severity: str, rate: object) -> dict:
    return {"name": name, "severity": severity, "rate": rate, "example_ids": [], "message": ""}


# The two word-matched cases below won in the held-out run (a finding was matched to a trusted mode by the words of
# its name, diagnostic_checks.watched_mode); the calibration now admits only a name the seeds report the mode by
# (judge.findings.read_names): in-sample since, with their cost, a harness's own name, beside them.


def test_a_finding_of_another_mode_named_like_a_trusted_one_stays_ratcheted(rows) -> None:
    """'truncated_reasoning' (working that stops before its last step, in answers that finish) is no cut-off
    count; lowering it from warning 1.0 to the batch's truncation rate hides what only it reports."""
    bands = trusted_rates(diagnose_views(rows))
    lowered, _ = compare_findings([_f("truncated_reasoning", "warning", 1.0)],
                                  [_f("truncated_reasoning", "info", 0.125)], bands)
    assert lowered == ["truncated_reasoning: warning 1.0000 -> info 0.1250"]


def test_a_units_format_finding_is_not_the_final_answer_mode(rows) -> None:
    bands = round_bands(rows)
    low = bands["no_final_answer"][0]
    lowered, _ = compare_findings([_f("format_of_units", "warning", 1.0)], [_f("format_of_units", "warning", low)],
                                  bands)
    assert lowered == [f"format_of_units: warning 1.0000 -> warning {low:.4f}"]


def test_calibrated_under_another_name_leaves_main_s_finding_missing(rows) -> None:
    bands = trusted_rates(diagnose_views(rows))
    lowered, added = compare_findings([_f("truncation", "warning", 1.0)], [_f("truncation_rate", "info", 0.125)],
                                      bands)
    assert lowered == ["truncation: warning 1.0000 -> missing"] and added == {"truncation_rate": "added"}


@pytest.mark.parametrize("rate", [float("nan"), "0.125", True, pytest.param(None, marks=pytest.mark.xfail(
    strict=True, raises=TypeError, reason="a rate of None crashes compare_findings (its float() of the rate, older "
    "than the calibration); the runtime's checked_finding never hands one over, a diagnostic's rate is a finite "
    "number in [0, 1] by then"))])
def test_a_rate_that_is_no_number_is_no_calibration(rows, rate) -> None:
    bands = trusted_rates(diagnose_views(rows))
    lowered, added = compare_findings([_f("truncation", "warning", 1.0)], [_f("truncation", "info", rate)], bands)
    assert len(lowered) == 1 and lowered[0].startswith("truncation: warning 1.0000 -> info") and added == {}


def test_a_band_that_straddles_the_warning_line_keeps_the_warning(rows) -> None:
    """no_final_answer here: 1 of 4 by the verifier, 2 of 4 by an Answer:-line check (an inline 'so the answer:'),
    on either side of the trusted warning line 0.3: a sound definition says warning."""
    bands = round_bands(rows)
    assert bands["no_final_answer"][:2] == (0.25, 0.5), bands
    lowered, _ = compare_findings([_f("format_failures", "warning", 1.0)], [_f("format_failures", "info", 0.25)],
                                  bands)
    assert lowered == ["format_failures: warning 1.0000 -> info 0.2500"]
    assert compare_findings([_f("format_failures", "warning", 1.0)], [_f("format_failures", "warning", 0.25)],
                            bands) == ([], {"format_failures": "calibrated"})


def test_a_harness_s_own_name_for_a_trusted_mode_is_not_calibrated(rows) -> None:
    """The cost of the fix above: main's own 'cut_off' over-report moved onto the trusted rate stays a lowering."""
    bands = trusted_rates(diagnose_views(rows))
    lowered, _ = compare_findings([_f("cut_off", "warning", 1.0)], [_f("cut_off", "info", 0.125)], bands)
    assert lowered == ["cut_off: warning 1.0000 -> info 0.1250"]
