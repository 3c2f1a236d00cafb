"""Held-out cases for ``main:diagnostic_disagrees`` and restore-diagnostic's calibration
(``meta_agent.diagnostic_checks``), written after the code froze at c3c00ce: diagnostics that report a wrong rate
in ways the checks were not designed around, each planted on the seed and run in the sandboxed runtime on the
constructed batches of one untrained round (``test_a2_constructed.round_rows``).  A case the checks miss stays a
strict xfail that says why.

Closed in session 37 (the tests pass now; they were strict xfails at the freeze): the last-eight format share, by a
constructed batch whose failures all come first; the silent ``health.py``, by the one diagnostic naming no finding.

Written but dropped: a format diagnostic that caches its first call's finding in a module-level list is inert here,
since the runtime gives each diagnose call fresh module state (measured: each constructed batch got its own rate).
"""

from __future__ import annotations

import subprocess

import pytest

from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipes import restore_diagnostic
from test_a2_disagree import _disagrees, _named
from test_recipe_agent import propose, quiet_digest

pytestmark = pytest.mark.docker

_SEED = SEEDS_DIR / "math" / "diagnostics"


def _plant(stem: str, old: str, new: str) -> tuple[str, str]:
    text = (_SEED / f"{stem}.py").read_text()
    assert old in text, f"the seed's {stem}.py changed: {old!r} is not in it"
    return f"diagnostics/{stem}.py", text.replace(old, new)


CASES = {
    # flat groups keyed by the task (every constructed group answers one task; a round's groups each their own)
    "task-keyed": _plant("zero_variance", 'groups.setdefault(str(r.get("group_id")), [])',
                         'groups.setdefault(str(r.get("task_id")), [])'),
    # only the wrong answers that were cut off count as truncated
    "cut-and-wrong": _plant("truncation", 'r.get("truncated") or r.get("finish_reason") == "length"',
                            '(r.get("truncated") or r.get("finish_reason") == "length") and not r.get("reward")'),
    # the share of groups WITH signal, under a name of the harness's own
    "signal-named": ("diagnostics/signal.py", "def diagnose(rollouts):\n    groups = {}\n    for r in rollouts:\n"
                     "        groups.setdefault(r.get('group_id'), set()).add(r.get('reward'))\n"
                     "    if not groups:\n        return []\n"
                     "    rate = sum(len(v) == 1 for v in groups.values()) / len(groups)\n"
                     "    return [{'name': 'learning_signal', 'severity': 'info', 'rate': 1 - rate, "
                     "'message': 'groups without signal'}]\n"),
    # the last eight answers only
    "last-eight": _plant("format_failures", "failed = [r for r in rollouts if",
                         "rollouts = rollouts[-8:]\n    failed = [r for r in rollouts if"),
}
MISSED: dict[str, str] = {
    "signal-named": "a finding is matched to the mode it reports by the words of its name or file (MODES' words); "
                    "'learning_signal' in 'signal.py' names none, so its rate (the share of groups WITH signal, "
                    "the complement of the flat share) is compared with nothing",
}


def planted_digests(cases: dict[str, tuple[str, str]], tmp_path_factory,
                    docker_sandbox) -> dict[str, tuple[HarnessRepo, dict]]:
    """Each case's file planted in a seed harness of its own, and main's digest of it (shared by held-out sets)."""
    out = {}
    for name, (path, text) in cases.items():
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        repo.commit_files({path: text}, name)
        out[name] = repo, _named(repo, "main", docker_sandbox)
    return out


@pytest.fixture(scope="module")
def digests(tmp_path_factory, docker_sandbox) -> dict[str, tuple[HarnessRepo, dict]]:
    return planted_digests(CASES, tmp_path_factory, docker_sandbox)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=MISSED[c]))
                                  if c in MISSED else c for c in CASES])
def test_a_held_out_wrong_rate_is_named_and_calibrated(digests, docker_sandbox, case: str) -> None:
    repo, digest = digests[case]
    named = _disagrees(digest)
    assert named is not None, digest["main_checks"]
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    [path] = p.files_changed
    assert path == CASES[case][0] and repo.read_file(p.branch, path).startswith(CASES[case][1].rstrip("\n"))
    after = _named(repo, p.branch, docker_sandbox)
    assert _disagrees(after) is None, after["main_checks"]["diagnostic_disagrees"]


SILENT_NO_WORDS = '"""Diagnostic: health of the round."""\n\n\ndef diagnose(rollouts):\n    return []\n'


def test_a_silent_diagnostic_whose_name_says_nothing_is_repaired(tmp_path) -> None:
    """The seed's truncation.py replaced by a silent 'health.py': the digest sees truncation, nothing reports it.
    (A held-out winner at c3c00ce; closed in session 37: the one diagnostic of main's whose code names no finding is
    given the unreported mode, under the mode's name.)"""
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    repo.commit_files({"diagnostics/health.py": SILENT_NO_WORDS}, "planted")
    for args in (["rm", "-q", "diagnostics/truncation.py"], ["commit", "-q", "-m", "planted"]):
        subprocess.run(["git", "-C", str(repo.path), *args], check=True)
    digest = quiet_digest(round=1, truncation_rate=0.5, failure_modes=[
        {"name": "truncation", "source": "trusted", "severity": "warning", "rate": 0.5, "message": "", "examples": []}])
    proposals = propose(repo, digest, rules=(restore_diagnostic,))
    assert [p.files_changed for p in proposals] == [["diagnostics/health.py"]]
    assert proposals[0].predicted_effects == ["finding truncation added: the diagnostic reports truncation again"]
    # a second diagnostic naming no finding: which one watches the mode is not known, so nothing is proposed
    repo.commit_files({"diagnostics/round_notes.py": SILENT_NO_WORDS}, "a second")
    assert propose(repo, digest, rules=(restore_diagnostic,)) == []
