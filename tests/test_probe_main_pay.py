"""The probe counts against a candidate only the verified failures main does not pay as much (DESIGN §3: pay for a
verified failure is relative to main and has no margin).  Found when a genuine repair was rejected: main paid every
wrong answer, the candidate (the seed's reward) paid one archived failure main also paid, and the probe called it
the candidate's."""

from __future__ import annotations

from pathlib import Path

import pytest

import harness_repo
from domains.math import MathDomain
from harness_repo.contract import HarnessConfig
from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings
from meta_agent.judge.diagnose_sessions import sandbox_limits
from meta_agent.judge.probe import ProbeContext, probe_commit
from tests.test_main_judged import CLEAN, _rows

pytestmark = pytest.mark.docker
SEED = Path(harness_repo.__file__).parent / "seeds" / "math"
ONE_OFF = ("\n_base = compute_score\n\n\ndef compute_score(data_source, solution_str, ground_truth, extra_info=None,"
           " **kwargs):\n    result = _base(data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs)\n"
           "    import re\n    said = re.findall(r'Answer:\\s*(-?\\d+)', solution_str or '')\n"
           "    gold = str((ground_truth or {}).get('answer', '')).strip()\n"
           "    if said and gold.lstrip('-').isdigit() and abs(int(said[-1]) - int(gold)) == 1:\n"
           "        return dict(result, score=PAY)\n    return result\n")


def _probe(repo: HarnessRepo, commit: str, sandbox, pay_main: str | None) -> dict:
    import yaml
    config = HarnessConfig.model_validate(yaml.safe_load(repo.read_file(commit, "harness.yaml")))
    settings = BacktestSettings()
    report = probe_commit(repo, commit, sandbox, sandbox_limits(settings), settings.timeout_s, MathDomain(), config,
                          ProbeContext.of(_rows(CLEAN)), seed=7, pay_main_commit=pay_main)
    return {c["name"]: c for c in report.checks}


def test_a_failure_main_pays_as_much_is_mains_and_one_it_pays_less_is_the_candidates(tmp_path, docker_sandbox):
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    seed = (SEED / "reward.py").read_text()
    repo.commit_files({"reward.py": seed + ONE_OFF.replace("PAY", "1.0")}, "main pays answers one off the gold")
    main = repo.head("main")  # the candidates are later commits (the probe needs only their trees)
    same = repo.commit_files({"reward.py": seed + ONE_OFF.replace("PAY", "1.0") + "\n# a comment\n"}, "same pay")
    more = repo.commit_files({"reward.py": seed + ONE_OFF.replace("PAY", "1.0").replace("== 1:", ">= 1:")},
                             "pays every wrong number")
    alone = _probe(repo, same, docker_sandbox, None)["probe_failure_pay"]
    assert not alone["passed"], alone  # without main's scores every paid failure stays the candidate's
    beside = _probe(repo, same, docker_sandbox, main)["probe_failure_pay"]
    assert beside["passed"] and "paid as much by main" in beside["detail"], beside
    worse = _probe(repo, more, docker_sandbox, main)["probe_failure_pay"]
    assert not worse["passed"], worse  # what main does not pay is still the candidate's, with no margin
