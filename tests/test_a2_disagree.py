"""A diagnostic of main's that reports a wrong rate (not nothing, no crash) is named and repaired from evidence
(issue 44; held-out set 12h's ungrouped-variance: the zero-variance diagnostic grouping by a key rows lack).

The flaws planted here are this file's own, unlike 12h's: a truncation diagnostic that counts cut-off answers by a
length field of its own (``response_tokens`` over a line) in place of the rows' ``truncated``, a format diagnostic
that divides its failures by the number of groups, a zero-variance diagnostic that reports its share as a
percentage; and a silent truncation diagnostic of the harness's own (a stem the seed has not).  Each runs in the
sandboxed runtime on the constructed batches (``meta_agent.constructed_checks``), where the trusted rate is computed
on the host; the seed is named for nothing.
"""

from __future__ import annotations

import subprocess

import pytest

from domains.math import MathDomain
from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipes import restore_diagnostic
from meta_agent.config import BacktestSettings
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from test_a2_constructed import round_rows
from test_recipe_agent import propose, quiet_digest

pytestmark = pytest.mark.docker

_SEED = SEEDS_DIR / "math" / "diagnostics"


def _plant(stem: str, old: str, new: str) -> dict[str, str]:
    text = (_SEED / f"{stem}.py").read_text()
    assert old in text, f"the seed's {stem}.py changed: {old!r} is not in it"
    return {f"diagnostics/{stem}.py": text.replace(old, new)}


BY_TOKENS = _plant("truncation", 'r.get("truncated") or r.get("finish_reason") == "length"',
                   '(r.get("response_tokens") or 0) >= 256')
PER_GROUP = _plant("format_failures", "rate = len(failed) / len(rollouts)",
                   'rate = len(failed) / len({str(r.get("group_id")) for r in rollouts})')
PERCENT = _plant("zero_variance", "rate = len(flat) / len(groups)", "rate = 100.0 * len(flat) / len(groups)")
SILENT_OWN = '''"""Diagnostic: answers cut off."""


def diagnose(rollouts):
    return []
'''
PLANTED = {"truncation": (BY_TOKENS, "truncation"), "format_failures": (PER_GROUP, "format_failures"),
           "zero_variance": (PERCENT, "zero_variance")}


def _named(repo: HarnessRepo, ref: str, sandbox) -> dict:
    digest = quiet_digest(round=1, kept_share=1.0, truncation_rate=0.25)
    add_constructed_findings(digest, run_constructed_checks(repo, repo.head(ref), round_rows(), MathDomain(),
                                                            sandbox, BacktestSettings()))
    return digest


def _disagrees(digest: dict) -> dict | None:
    return next((m for m in digest["failure_modes"] if m["name"] == "main:diagnostic_disagrees"), None)


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_a_diagnostic_reporting_a_wrong_rate_is_named_and_repaired_from_main_s_own_code(tmp_path, docker_sandbox,
                                                                                       planted) -> None:
    files, finding = PLANTED[planted]
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files(files, "planted")
    digest = _named(repo, "main", docker_sandbox)
    named = _disagrees(digest)
    assert named is not None, digest["main_checks"]
    assert list(named["evidence"]["disagrees"]) == [finding], named["evidence"]
    assert not digest["main_checks"]["diagnostic_disagrees"]["passed"]
    assert named["examples"][0]["reported"] != named["examples"][0]["trusted"]
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    [path] = files
    assert repo.changed_paths(p.branch) == [path] == p.files_changed
    repaired = repo.read_file(p.branch, path)
    assert repaired.startswith(files[path].rstrip("\n")) and repaired != (_SEED / path.split("/")[1]).read_text()
    after = _named(repo, p.branch, docker_sandbox)
    assert _disagrees(after) is None, after["main_checks"]["diagnostic_disagrees"]
    assert after["main_checks"]["diagnostic_disagrees"]["passed"]


def test_the_seed_disagrees_with_nothing(tmp_path, docker_sandbox) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    digest = _named(repo, "main", docker_sandbox)
    check = digest["main_checks"]["diagnostic_disagrees"]
    assert check["passed"] and _disagrees(digest) is None, check
    compared = int(check["detail"].rsplit("(", 1)[1].split()[0])
    assert compared >= 3 * 8, check  # each of the three seed diagnostics on every batch but the unscored one


def test_a_silent_diagnostic_of_the_harness_s_own_is_repaired_from_evidence(tmp_path, docker_sandbox) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"diagnostics/cut_off.py": SILENT_OWN}, "planted")
    for args in (["rm", "-q", "diagnostics/truncation.py"], ["commit", "-q", "-m", "planted"]):
        subprocess.run(["git", "-C", str(repo.path), *args], check=True)
    digest = quiet_digest(round=1, truncation_rate=0.5, failure_modes=[
        {"name": "truncation", "source": "trusted", "severity": "warning", "rate": 0.5, "message": "", "examples": []}])
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    assert repo.changed_paths(p.branch) == ["diagnostics/cut_off.py"], p.files_changed
    assert repo.read_file(p.branch, "diagnostics/cut_off.py").startswith(SILENT_OWN.rstrip("\n"))
    after = _named(repo, p.branch, docker_sandbox)
    check = after["main_checks"]["diagnostic_disagrees"]
    assert check["passed"] and "cut_off" not in check["detail"], check
    assert p.predicted_effects == ["finding cut_off added: the diagnostic reports truncation again"]


def test_the_round_s_own_batch_is_compared_within_the_band_of_sound_definitions() -> None:
    """On the round's rows: a boxed-only right answer is a final answer to the verifier, not to an Answer:-line
    check (the seed's format_failures reads 3 of 8 where the verifier reads 2 of 8: no disagreement; 1.0 is one);
    a zero-variance finding of 0.0 where one of the round's two groups is flat is one."""
    from meta_agent.diagnostic_checks import round_bands

    rows = round_rows()
    rows[0] = dict(rows[0], response="3 + 4 = 7 so \\boxed{7}", reward=1.0, verified=1.0,
                   verifier_info={"reason": "equal"})
    rows[4] = dict(rows[4], reward=1.0)
    rows = [dict(r, verifier_info={"reason": "different value" if "Answer:" in r["response"] else
                                   "no final answer"}) if k else r for k, r in enumerate(rows)]
    rows = [dict(r, reward=1.0) if r["group_id"] == "g1" else r for r in rows]
    modes = [{"name": "format_failures", "source": "diagnostics", "severity": "info", "rate": 0.375},
             {"name": "zero_variance", "source": "diagnostics", "severity": "info", "rate": 0.0}]
    digest = quiet_digest(round=1, failure_modes=list(modes))
    record = {"checks": [], "findings": [], "round_bands": round_bands(rows)}
    assert record["round_bands"]["no_final_answer"][:2] == (0.25, 0.375), record["round_bands"]
    add_constructed_findings(digest, record)
    named = _disagrees(digest)
    assert named is not None and list(named["evidence"]["disagrees"]) == ["zero_variance"], named
    assert named["severity"] == "warning" and named["examples"][0]["trusted"] == 0.5, named
    assert not digest["main_checks"]["diagnostic_disagrees"]["passed"]
    digest = quiet_digest(round=1, failure_modes=[modes[0], dict(modes[1], rate=0.5)])
    add_constructed_findings(digest, record)
    assert _disagrees(digest) is None, digest["failure_modes"]
    digest = quiet_digest(round=1, failure_modes=[dict(modes[0], rate=1.0, severity="warning"), modes[1]])
    add_constructed_findings(digest, record)
    named = _disagrees(digest)
    assert sorted(named["evidence"]["disagrees"]) == ["format_failures", "zero_variance"], named
    fmt = next(e for e in named["examples"] if e["finding"] == "format_failures")
    assert (fmt["reported"], fmt["trusted"], named["rate"]) == (1.0, [0.25, 0.375], 1.0), named
