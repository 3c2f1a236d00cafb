"""The findings ratchet and a diagnostic that is repaired rather than silenced (held-out set 12f's misnamed-finding,
12g's crash-on-clean-batch).

A diagnostic of main's that reports under a name no reader knows (``zero-variance`` where the digest and the
recipes read ``zero_variance``), restored to report the name the seed's diagnostic reports, loses nothing: the same
diagnostic says the same thing, no weaker, under the name its readers look for.  A diagnostic of main's that
crashed (``truncation:crashed``), repaired to run and report, loses nothing either: the crash was no observation of
the policy.  Both were read as "main's finding missing" and the repair rejected.  Every other disappearance stays a
lowering: a read name traded away, an unread name traded for another unread one, a weaker rename, a crash hidden by
deleting the diagnostic.
"""

from __future__ import annotations

from meta_agent.judge.findings import probe_diagnostics_check, ratchet_checks


def _f(name: str, severity: str, rate: float, diagnostic: str) -> dict:
    return {"name": name, "severity": severity, "rate": rate, "example_ids": ["a-0"], "message": name,
            "diagnostic": diagnostic}


MISNAMED = _f("zero-variance", "warning", 1.0, "zero_variance.py")
RESTORED = _f("zero_variance", "warning", 1.0, "zero_variance.py")


def _verdict(main: list[dict], candidate: list[dict], predicted: list[str]) -> dict[str, dict]:
    return {c["name"]: c for c in ratchet_checks(main, candidate, predicted, diagnostics_changed=True,
                                                 diagnostics_only=True)}


def test_a_misnamed_finding_restored_to_the_read_name_is_not_lost() -> None:
    checks = _verdict([MISNAMED], [RESTORED], ["finding zero_variance added: the restored diagnostic reports it"])
    assert checks["diagnostics_ratchet"]["passed"], checks["diagnostics_ratchet"]["detail"]
    assert checks["diagnostics_prediction"]["passed"], checks["diagnostics_prediction"]["detail"]
    probe = probe_diagnostics_check("the probe's round", [dict(MISNAMED, severity="info", rate=0.5)],
                                    [dict(RESTORED, severity="info", rate=0.5)], ["finding zero_variance added"])
    assert probe["passed"], probe["detail"]


def test_renames_that_hide_or_weaken_a_finding_stay_lowerings() -> None:
    away = _verdict([RESTORED], [MISNAMED], ["finding zero-variance added"])  # a read name traded away
    assert not away["diagnostics_ratchet"]["passed"] and "zero_variance: warning" in away["diagnostics_ratchet"][
        "detail"]
    unread = _verdict([MISNAMED], [_f("zv_flat", "warning", 1.0, "zero_variance.py")], ["finding zv_flat added"])
    assert not unread["diagnostics_ratchet"]["passed"]
    weaker = _verdict([MISNAMED], [dict(RESTORED, severity="info")], ["finding zero_variance added"])
    assert not weaker["diagnostics_ratchet"]["passed"]
    lower = _verdict([MISNAMED], [dict(RESTORED, rate=0.5)], ["finding zero_variance added"])
    assert not lower["diagnostics_ratchet"]["passed"]
    other = _verdict([MISNAMED], [dict(RESTORED, diagnostic="mine.py")], ["finding zero_variance added"])
    assert not other["diagnostics_ratchet"]["passed"]  # another diagnostic's finding carries nothing of this one


CRASHED = _f("truncation:crashed", "error", 1.0, "truncation.py")


def test_a_crashed_diagnostic_repaired_to_report_is_not_a_lowering() -> None:
    repaired = _f("truncation", "info", 0.0, "truncation.py")
    checks = _verdict([CRASHED], [repaired], ["finding truncation:crashed guard: the diagnostic no longer crashes"])
    assert checks["diagnostics_ratchet"]["passed"], checks["diagnostics_ratchet"]["detail"]
    assert checks["diagnostics_prediction"]["passed"], checks["diagnostics_prediction"]["detail"]
    probe = probe_diagnostics_check("the probe's round", [CRASHED], [repaired],
                                    ["finding truncation:crashed guard"])
    assert probe["passed"], probe["detail"]


def test_a_crash_hidden_by_deleting_the_diagnostic_or_kept_stays_judged() -> None:
    deleted = _verdict([CRASHED], [], ["finding truncation:crashed guard"])
    assert not deleted["diagnostics_ratchet"]["passed"]
    elsewhere = _verdict([CRASHED], [_f("truncation", "info", 0.0, "other.py")], ["finding truncation added"])
    assert not elsewhere["diagnostics_ratchet"]["passed"]
    still = _verdict([CRASHED], [CRASHED], ["finding truncation:crashed guard"])
    assert still["diagnostics_ratchet"]["passed"] and not still["diagnostics_prediction"]["passed"]
