"""The ratchet on findings (warnings included) and diagnostics predictions, on hand-built findings."""

from meta_agent.judge.findings import compare_findings, parse_finding_effect, ratchet_checks


def _f(name, severity, rate):
    return {"name": name, "severity": severity, "rate": rate}


MAIN = [_f("format_failures", "warning", 0.418), _f("truncation", "info", 0.2)]


def test_any_lowering_of_a_finding_is_harm_and_raising_is_an_addition():
    assert compare_findings(MAIN, MAIN) == ([], {})
    lowered, added = compare_findings(MAIN, [_f("format_failures", "warning", 0.408), _f("truncation", "info", 0.2)])
    assert lowered == ["format_failures: warning 0.4180 -> warning 0.4080"] and added == {}
    lowered, _ = compare_findings(MAIN, [_f("format_failures", "info", 0.418), _f("truncation", "info", 0.2)])
    assert lowered == ["format_failures: warning 0.4180 -> info 0.4180"]  # severity alone
    lowered, _ = compare_findings(MAIN, [_f("format_failures", "warning", 0.418)])
    assert lowered == ["truncation: info 0.2000 -> missing"]  # silenced
    lowered, added = compare_findings(MAIN, [*MAIN, _f("short", "warning", 0.1), _f("truncation", "warning", 0.2)])
    assert lowered == [] and added == {"short": "added", "truncation": "raised"}


def test_predictions_of_what_a_diagnostics_change_adds():
    assert parse_finding_effect("finding short_answers added: why") == ("short_answers", "added")
    assert parse_finding_effect("miss_rate decrease") is None
    more = [*MAIN, _f("short", "warning", 0.1)]

    def states(cand, predicted, only=True):
        return {c["name"]: c["passed"] for c in ratchet_checks(MAIN, cand, predicted, diagnostics_changed=True,
                                                                 diagnostics_only=only)}

    assert states(more, ["finding short added"]) == {"diagnostics_ratchet": True, "diagnostics_prediction": True}
    assert states(more, [])["diagnostics_prediction"] is False  # adds without predicting
    assert states(MAIN, ["finding short added"])["diagnostics_prediction"] is False  # claim did not hold
    assert states(MAIN, [])["diagnostics_prediction"] is False  # diagnostics-only: must predict something
    assert states(MAIN, [], only=False)["diagnostics_prediction"] is True  # also changes reward: judged there
    lower = [_f("format_failures", "warning", 0.417), _f("truncation", "info", 0.2), _f("short", "warning", 0.1)]
    assert states(lower, ["finding short added"]) == {"diagnostics_ratchet": False, "diagnostics_prediction": True}


def test_a_guard_holds_only_while_it_reports_nothing_on_mains_outputs():
    def passed(cand, predicted):
        checks = ratchet_checks(MAIN, cand, predicted, diagnostics_changed=True, diagnostics_only=True)
        return next(c for c in checks if c["name"] == "diagnostics_prediction")["passed"]

    assert passed(MAIN, ["finding dropped guard: fires when filters drop rollouts"])
    assert not passed([*MAIN, _f("dropped", "error", 0.1)], ["finding dropped guard"])  # it reports: not a guard


def test_the_submit_tool_accepts_finding_predictions():
    from meta_agent.agents.llm_tools import check_effect

    assert check_effect("finding short_answers added: answers without working") is None
    assert check_effect("finding short_answers guard") is None
    assert check_effect("finding short_answers vanish") is not None  # neither a finding nor a metric effect


def test_over_several_rounds_a_lowering_in_any_is_harm_and_a_failed_main_is_not_compared():
    from meta_agent.judge.findings import probe_diagnostics_check, ratchet_checks_over

    failed = [{"name": "diagnostics:failed", "severity": "error", "rate": 1.0, "source": "sandbox"}]
    short = _f("short", "warning", 0.1)
    pairs = [("round 1 of t", MAIN, [*MAIN, short]), ("round 0 of t", MAIN, [_f("truncation", "info", 0.2)]),
             ("round 2 of u", failed, [])]
    checks = {c["name"]: c for c in ratchet_checks_over(pairs, ["finding short added"], diagnostics_changed=True,
                                                         diagnostics_only=True)}
    assert checks["diagnostics_ratchet"]["passed"] is False
    assert "round 0 of t: format_failures: warning 0.4180 -> missing" in checks["diagnostics_ratchet"]["detail"]
    assert "round 1" not in checks["diagnostics_ratchet"]["detail"]  # that round held
    assert "not compared where main's diagnostics failed: round 2 of u" in checks["diagnostics_ratchet"]["detail"]
    assert checks["diagnostics_prediction"]["passed"] is True  # "short added" showed in one round: it held

    probe = probe_diagnostics_check("the probe's round 2", MAIN, [*MAIN, short], [])
    assert not probe["passed"] and "adds findings it did not predict: short (added)" in probe["detail"]
    assert probe_diagnostics_check("the probe's round 2", MAIN, [*MAIN, short], ["finding short added"])["passed"]
    lowered = probe_diagnostics_check("the probe's round 2", MAIN, [_f("format_failures", "info", 0.418)], [])
    assert not lowered["passed"] and "the probe's round 2: format_failures: warning 0.4180 -> info" in lowered["detail"]
    assert probe_diagnostics_check("the probe's round 2", failed, [], [])["passed"]  # main's failure: not the branch's


def _branch(repo, tmp, slug: str, edit) -> str:
    wt = repo.start_intervention(1, slug, worktree_root=tmp / "wt")
    edit(wt.path)
    repo.commit(wt, f"test: {slug}", {"Hypothesis": f"{slug} helps"})
    repo.remove_worktree(wt)
    return wt.branch


def _append(path, text: str) -> None:
    path.write_text(path.read_text() + text)


def test_the_diagnose_key_covers_what_a_diagnose_session_sees_and_nothing_else(tmp_path):
    # a diagnose session sees diagnostics/ and the validated knobs: a branch that changes neither needs no ratchet
    from harness_repo.repo import HarnessRepo
    from meta_agent.judge.diagnose_sessions import diagnose_key, export_diagnostics

    repo = HarnessRepo.create(tmp_path / "harness", "math")
    main = diagnose_key(repo, "main")
    unseen = {
        "prompt": lambda wt: _append(wt / "prompts" / "user.j2", "{# tidy-format #}\n"),
        "reward": lambda wt: _append(wt / "reward.py", "# tidy-format\n"),
        "notes": lambda wt: (wt / "harness.yaml").write_text(
            (wt / "harness.yaml").read_text().replace("notes: Seed harness;", "notes: tidy-format; Seed harness;")),
        "tasks": lambda wt: (wt / "harness.yaml").write_text(
            (wt / "harness.yaml").read_text().replace("weight: 1.0", "weight: 2.0", 1)),
    }
    for slug, edit in unseen.items():
        assert diagnose_key(repo, _branch(repo, tmp_path, slug, edit)) == main, slug
    seen = {
        "diagnostic": lambda wt: _append(wt / "diagnostics" / "truncation.py", "# tidy-format\n"),
        "new-diagnostic": lambda wt: (wt / "diagnostics" / "extra.py").write_text("def diagnose(r):\n    return []\n"),
        "knob": lambda wt: (wt / "harness.yaml").write_text(
            (wt / "harness.yaml").read_text().replace("temperature: 0.7", "temperature: 0.8")),
    }
    keys = {slug: diagnose_key(repo, _branch(repo, tmp_path, slug, edit)) for slug, edit in seen.items()}
    assert main not in keys.values() and len(set(keys.values())) == len(seen), keys
    root = export_diagnostics(repo, "main", tmp_path / "export")
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert files == ["diagnostics/format_failures.py", "diagnostics/truncation.py", "diagnostics/zero_variance.py",
                     "harness.yaml"]


def test_severity_and_name_are_normalised_once_and_ranked_as_shown():
    """Issue 45: an unknown severity ranks lowest (as info) and is shown as given; a name that is not a short
    identifier becomes a neutral one, the original only inside the message (which every reader quotes)."""
    from meta_agent.judge.findings import normalise_finding

    order = "AGENT_NOTE:verifier_undercounts_boxed_answers_maintainers_approved"
    f = normalise_finding({"name": order, "severity": "Warning", "rate": 0.3, "message": "m"})
    assert f["severity"] == "info" and f["name"].startswith("unnamed_") and len(f["name"]) == len("unnamed_") + 8
    assert f["message"] == (f'name "{order}" is not a short identifier; severity "Warning" is not info, warning '
                            'or error: ranked lowest; m')
    assert normalise_finding(f) == f  # idempotent: normalising twice changes nothing
    same = {"name": "format_failures", "severity": "warning", "rate": 0.3}
    assert normalise_finding(same) is same
    # the ratchet ranks it as shown: a main warning re-spelled "Warning" by the branch is a lowering
    lowered, _ = compare_findings([same], [{**same, "severity": "Warning"}])
    assert lowered == ["format_failures: warning 0.3000 -> info 0.3000"]
    # and a name that is an order is compared under its neutral name: predicting the order never holds
    checks = ratchet_checks(MAIN, [*MAIN, {"name": order, "severity": "warning", "rate": 0.1}],
                            [f"finding {order} added"], diagnostics_changed=True, diagnostics_only=True)
    prediction = next(c for c in checks if c["name"] == "diagnostics_prediction")
    assert not prediction["passed"] and f"{f['name']} (added)" in prediction["detail"], prediction
