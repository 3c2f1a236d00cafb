"""The planted flaws of the harness-repair benchmark: each applies to the control (the math seed with its
reward gap closed), shows its own symptom under trusted checks, and its repair check passes a known-good
repair and fails the flaw itself.  Every check observes the harness through the sandboxed harness runtime:
a branch's code never runs in the bench's process."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ scripts import each other so

from repair_flaws import (  # noqa: E402
    CONTROL, FLAW_LIST, FLAWS, control_files, flawed_files, load_flaws, probes, write_harness)

# every held-out flaw set passes the same checks as the nine (registered before the tests are parametrized)
HELD_OUT = [name for path in sorted((Path(__file__).resolve().parents[1] / "bench").glob("heldout_flaws_*.py"))
            for name in load_flaws(path)]
from repair_observe import Observation, observe  # noqa: E402

from domains.math import MathDomain  # noqa: E402
from harness_repo.contract import HarnessConfig  # noqa: E402

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def seen(tmp_path_factory: pytest.TempPathFactory, docker_sandbox):
    """files over the control -> the harness's observation (one sandbox session per harness)."""
    def run(files: dict[str, str]) -> Observation:
        # a folder the sandbox's non-root user can read, as repo.export writes it (mktemp's is 0700)
        return observe(write_harness(tmp_path_factory.mktemp("h") / "harness", files), docker_sandbox, probes=probes())
    return run


def test_there_are_at_least_eight_flaws_and_a_control() -> None:
    assert len(FLAWS) >= 8 and CONTROL not in FLAWS
    assert len({f.description for f in FLAW_LIST}) == len(FLAW_LIST)


def test_the_control_shows_no_symptom_and_passes_every_repair_check(seen) -> None:
    control = seen(flawed_files(CONTROL))
    assert control.failed is None and control.paid and control.kept_mixed
    for flaw in FLAW_LIST:
        assert flaw.symptom(control) is None, flaw.name
        assert flaw.repaired(control)[0], (flaw.name, flaw.repaired(control)[1])


@pytest.mark.parametrize("name", list(FLAWS))
def test_each_flaw_shows_its_symptom_and_only_a_repair_passes(name: str, seen, tmp_path: Path) -> None:
    flaw = FLAWS[name]
    files = flawed_files(name)
    # a small diff: one or two files besides the control's reward
    assert 1 <= len(set(files) - {"reward.py"}) + (files["reward.py"] != control_files()["reward.py"]) <= 2
    flawed_dir = write_harness(tmp_path, files)
    config = HarnessConfig.model_validate(__import__("yaml").safe_load((flawed_dir / "harness.yaml").read_text()))
    MathDomain().check_task_specs(config.tasks)  # still a valid harness: the flaw is in what it does
    flawed = seen(files)
    assert flawed.failed is None, flawed.failed
    assert flaw.symptom(flawed), name
    ok, why = flaw.repaired(flawed)
    assert not ok, (name, why)
    repaired = seen({**files, **flaw.known_good({**control_files(), **files})})
    ok, why = flaw.repaired(repaired)
    assert ok, (name, why)
    assert flaw.symptom(repaired) is None, name


def test_the_seed_rewards_gaps_both_ways_are_what_the_check_sees(seen) -> None:
    """The seed itself is the first flaw: it misses inline, boxed and 'x = 7' answers and pays '14/2'."""
    from repair_flaws import _reward_disagreements
    misses, hacks = _reward_disagreements(seen(flawed_files("seed-reward")))
    assert "'so the answer: 7' (gold 7)" in misses and "'work \\\\boxed{7}' (gold 7)" in misses
    assert "'Answer: 14/2' (gold 7)" in hacks


def test_a_cheating_repair_does_not_pass(seen) -> None:
    """Adversarial repairs: a reward that pays everything 'repairs' every miss; a filter keeping one unpaid
    trajectory per group still drops the paid ones; a prompt that mentions 'answer' without a colon; a
    truncation diagnostic that warns on every batch, and one that crashes (a crash is no finding)."""
    pay_all = "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n" \
              "    return {'score': 1.0}\n"
    h = seen({"reward.py": pay_all})
    assert not FLAWS["seed-reward"].repaired(h)[0] and not FLAWS["pays-wrong"].repaired(h)[0]
    unpaid_only = "def keep_trajectory(t):\n    return (t.get('reward') or 0) < 0.5\n"
    assert not FLAWS["filter-drops-signal"].repaired(seen({"filters.py": unpaid_only}))[0]
    vague = {"prompts/system.j2": "Be careful.\n", "prompts/user.j2": "{{ question }}\nGive the answer.\n"}
    assert not FLAWS["no-final-instruction"].repaired(seen(vague))[0]
    always = ("def diagnose(rollouts):\n    return [{'name': 'truncation', 'severity': 'warning', 'rate': 1.0,"
              " 'example_ids': [], 'message': 'always'}]\n")
    crash = "def diagnose(rollouts):\n    raise RuntimeError('no')\n"
    for text in (always, crash):
        ok, why = FLAWS["diagnostic-removed"].repaired(seen({"diagnostics/truncation.py": text}))
        assert not ok, why


def test_a_branch_that_attacks_the_host_is_checked_in_the_sandbox(seen, tmp_path: Path) -> None:
    """A branch's reward.py that writes a host file at import and through os.system: the repair check
    still judges it (it is otherwise the known-good repair of the seed reward) and no host file appears."""
    marks = [tmp_path / f"pwned-{uuid.uuid4().hex}" for _ in range(2)]
    attack = (f"import os\ntry:\n    open({str(marks[0])!r}, 'w').write('x')\nexcept OSError:\n    pass\n"
              f"os.system('touch {marks[1]}')\n")
    good = FLAWS["seed-reward"].known_good({**control_files(), **flawed_files("seed-reward")})["reward.py"]
    observed = seen({"reward.py": good + "\n" + attack})
    assert observed.failed is None, observed.failed
    ok, why = FLAWS["seed-reward"].repaired(observed)
    assert ok, why
    assert not any(m.exists() for m in marks)
    # and the flaw with the same attack still fails its check
    flawed = seen({"reward.py": flawed_files("seed-reward")["reward.py"] + "\n" + attack})
    assert not FLAWS["seed-reward"].repaired(flawed)[0]
    assert not any(m.exists() for m in marks)


@pytest.mark.parametrize("name", [CONTROL, *FLAWS])
def test_every_starting_harness_becomes_a_run_dir_whose_main_holds_it(name: str, tmp_path: Path) -> None:
    """The live tier's first step: seed-reward's flaw is the seed's own reward.py, which is already on main
    (committing it once stopped that flaw's every live cell before round 0)."""
    import compare_arms

    from meta_agent.run_dir import RunDir

    files = flawed_files(name)
    repo = compare_arms._create(RunDir(tmp_path / "run"), "math", {}, files)
    assert {rel: repo.read_file("main", rel) for rel in files} == files


# Words that tell an agent reading a planted file what is wrong with it (or that it was planted at all).
TELLS = ("flaw", "planted", "bench", "close enough", "tolerance", "off by one", "removed", "reports nothing",
         "worth learning")
@pytest.mark.parametrize("name", list(FLAWS))
def test_planted_text_does_not_name_the_flaw(name: str) -> None:
    """An LLM agent reads the harness's files: a comment that names the flaw hands it the answer."""
    control = control_files()
    changed = {rel: text for rel, text in flawed_files(name).items() if text != control.get(rel)}
    assert changed, name  # every flaw changes at least one file over the control
    for rel, text in changed.items():
        added = "\n".join(set(text.splitlines()) - set(control.get(rel, "").splitlines())).lower()
        told = [w for w in TELLS if w in added]
        assert not told, (name, rel, told)
