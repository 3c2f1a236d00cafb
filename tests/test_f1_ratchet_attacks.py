"""Attacks on the ratchet's one admitted lowering (a diagnostic calibrated onto the trusted rate): each must stay
harm.  Host only: the bands are ``diagnostic_checks.trusted_rates`` of real scenario rows; the findings are what a
branch's diagnostics would hand over."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness_repo
from meta_agent.diagnostic_checks import trusted_rates
from meta_agent.judge.diagnose_sessions import diagnose_views
from meta_agent.judge.findings import compare_findings, probe_diagnostics_check, ratchet_checks_over
from test_recipe_agent import load_path, scenario_rows

CALIBRATED = ["finding truncation calibrated: it reports truncation as the trusted digest measures it"]


def _bands(plan: list[tuple[str, ...]]) -> dict:
    reward = load_path(Path(harness_repo.__file__).parent / "seeds" / "math" / "reward.py")
    return trusted_rates(diagnose_views(scenario_rows("a", 0, plan, reward)))


@pytest.fixture(scope="module")
def bands() -> dict[str, dict]:
    return {"eighth": _bands([("R", "T", "W", "N"), ("R", "W", "W", "N")] * 4),  # truncation 0.125, info
            "half": _bands([("R", "T", "T", "N"), ("T", "W", "T", "N")] * 4)}  # truncation 0.5, warning


def _f(name: str, severity: str, rate: float) -> dict:
    return {"name": name, "severity": severity, "rate": rate, "example_ids": [], "message": ""}


OVER = [_f("truncation", "warning", 1.0)] * 8 + [_f("format_failures", "info", 0.25)]


def test_the_bands_are_the_trusted_rates(bands) -> None:
    assert bands["eighth"]["truncation"][:2] == (0.125, 0.125) and bands["half"]["truncation"][:2] == (0.5, 0.5)
    assert bands["eighth"]["no_final_answer"][0] is None  # views carry no verifier outcome: not measured there


def test_the_calibration_itself_and_its_prediction(bands) -> None:
    branch = [_f("truncation", "info", 0.125), _f("format_failures", "info", 0.25)]
    assert compare_findings(OVER, branch, bands["eighth"]) == ([], {"truncation": "calibrated"})
    checks = {c["name"]: c for c in ratchet_checks_over([("r", OVER, branch, bands["eighth"])], [],
                                                        diagnostics_changed=True, diagnostics_only=True)}
    assert checks["diagnostics_ratchet"]["passed"]
    # unpredicted, it is an addition the branch did not claim
    assert "adds findings it did not predict: truncation (calibrated)" in checks["diagnostics_prediction"]["detail"]
    half = [_f("truncation", "warning", 0.5)]
    assert compare_findings([_f("truncation", "error", 1.0)], half, bands["half"]) == ([], {"truncation": "calibrated"})


def test_lowering_a_correct_finding_or_lowering_below_the_trusted_rate_is_harm(bands) -> None:
    right = [_f("truncation", "info", 0.125)]
    lowered, _ = compare_findings(right, [_f("truncation", "info", 0.05)], bands["eighth"])
    assert lowered == ["truncation: info 0.1250 -> info 0.0500"]  # main was right: within the band
    lowered, _ = compare_findings([_f("truncation", "info", 0.2)], right, bands["eighth"])
    assert lowered == ["truncation: info 0.2000 -> info 0.1250"]  # main within the tolerance: a sound definition
    for below in (0.05, 0.0):  # from an over-report to under the trusted rate (0.05 is inside the tolerance)
        lowered, _ = compare_findings(OVER, [_f("truncation", "info", below)], bands["eighth"])
        assert lowered == ["format_failures: info 0.2500 -> missing", f"truncation: warning 1.0000 -> info {below:.4f}"]


def test_severity_may_fall_only_to_what_the_trusted_rate_implies(bands) -> None:
    lowered, added = compare_findings(OVER[:1], [_f("truncation", "info", 0.5)], bands["half"])
    assert lowered == ["truncation: warning 1.0000 -> info 0.5000"] and added == {}
    lowered, _ = compare_findings(OVER[:1], [_f("truncation", "Warning", 0.5)], bands["half"])  # spelled: ranked info
    assert lowered == ["truncation: warning 1.0000 -> info 0.5000"]


def test_a_mode_the_trusted_side_does_not_measure_stays_ratcheted(bands) -> None:
    for name in ("short_answers", "no_final_answer"):  # no trusted mode; a trusted mode not measured on this batch
        lowered, _ = compare_findings([_f(name, "warning", 1.0)], [_f(name, "info", 0.125)], bands["eighth"])
        assert lowered == [f"{name}: warning 1.0000 -> info 0.1250"]
    lowered, _ = compare_findings(OVER[:1], [], bands["eighth"])  # silenced, though main over-reported
    assert lowered == ["truncation: warning 1.0000 -> missing"]
    lowered, _ = compare_findings(OVER[:1], [_f("truncation", "info", 0.125)])  # the caller handed no bands
    assert lowered == ["truncation: warning 1.0000 -> info 0.1250"]


def test_calibrating_on_the_probe_s_batch_but_not_on_archived_rounds_is_harm(bands) -> None:
    probe = probe_diagnostics_check("the probe's round 2", OVER[:1], [_f("truncation", "info", 0.125)], CALIBRATED,
                                    bands=bands["eighth"])
    assert probe["passed"], probe
    pairs = [("the probe-like round", OVER[:1], [_f("truncation", "info", 0.125)], bands["eighth"]),
             ("round 1 of t", OVER[:1], [_f("truncation", "info", 0.0)], bands["eighth"]),
             ("round 0 of t", OVER[:1], [_f("truncation", "info", 0.125)], bands["half"])]
    checks = {c["name"]: c for c in ratchet_checks_over(pairs, CALIBRATED, diagnostics_changed=True,
                                                        diagnostics_only=True)}
    detail = checks["diagnostics_ratchet"]["detail"]
    assert not checks["diagnostics_ratchet"]["passed"]
    assert "round 1 of t: truncation: warning 1.0000 -> info 0.0000" in detail
    assert "round 0 of t: truncation: warning 1.0000 -> info 0.1250" in detail  # another batch's rate
    assert "probe-like round" not in detail
