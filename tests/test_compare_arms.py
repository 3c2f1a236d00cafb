"""bench/compare_arms.py end to end on a tiny configuration: two arms, one seed, one round, real training."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from meta_agent.run_dir import RunLock

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--no-record", "--seeds", "1", "--rounds", "1", "--heldout-size", "4", "--candidates", "1",
        "--knob", "steps_per_round=1", "--knob", "group_size=2", "--knob", "prompts_per_step=2",
        "--knob", "max_completion_length=12"]


def _compare(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "bench/compare_arms.py", "--out", str(out), *TINY, *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800,
                          env=os.environ | {"COLUMNS": "1000", "PYTHONPATH": str(ROOT)})  # a script in bench/


def _row(stdout: str, arm: str) -> list[str]:
    [line] = [line for line in stdout.splitlines() if line.startswith(f"| {arm} |")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_two_arms_one_seed_one_round_then_nothing_is_redone(tmp_path: Path, docker_sandbox) -> None:
    out = tmp_path / "compare"
    first = _compare(out, "--arms", "recipe", "fixed")
    assert first.returncode == 0, first.stderr[-3000:]
    header = [c.strip() for c in next(line for line in first.stdout.splitlines()
                                      if line.startswith("| arm |")).strip("|").split("|")]
    assert header[:4] == ["arm", "runs finished", "base", "round 0"]
    fixed, recipe = _row(first.stdout, "fixed"), _row(first.stdout, "recipe")
    assert fixed[1] == recipe[1] == "1/1"
    # the same untrained policy sits the same 4 exam tasks greedily in both arms: the same base figure
    assert fixed[2] == recipe[2] and fixed[2].endswith("]")
    assert fixed[4] == "-" and recipe[4].startswith(("+", "-")) and "[" in recipe[4]  # recipe minus fixed
    assert fixed[5] == recipe[5] == "-"  # one round: nothing trained after round 0
    assert fixed[6] == "0 / 0"  # the fixed arm proposes nothing, so nothing is merged or rejected
    assert "train" in fixed[7]
    assert fixed[8:] == ["0", "0.0000"]  # no LLM arm, no tokens
    result = out / "fixed" / "seed0" / "rounds" / "0" / "train" / "result.json"
    trained_at = result.stat().st_mtime_ns
    # round 0 trained once for both arms: each arm's round 0 is a copy of the shared one, and says so
    round0 = Path("seed0") / "rounds" / "0" / "train" / "result.json"
    assert result.read_text() == (out / "shared" / round0).read_text() == (out / "recipe" / round0).read_text()
    assert json.loads((out / "recipe" / "seed0" / "compare.json").read_text())["round0"] == "shared: shared/seed0"

    again = _compare(out, "--arms", "fixed", "recipe")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "fixed seed 0: finished" in again.stdout
    assert result.stat().st_mtime_ns == trained_at  # read back, not trained again
    assert _row(again.stdout, "fixed")[:7] == fixed[:7] and _row(again.stdout, "recipe")[:7] == recipe[:7]


def test_llm_arm_without_a_model_is_refused(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "bench/compare_arms.py", "--out", str(tmp_path), "--arms", "fixed", "llm"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "the llm arm needs --model" in proc.stderr


def test_a_seed_outside_seeds_is_refused_before_any_run(tmp_path: Path) -> None:
    # --seeds 3 means seeds 0, 1 and 2: a process for seed 3 would train a run the table never shows
    proc = subprocess.run([sys.executable, "bench/compare_arms.py", "--out", str(tmp_path / "c"), "--seeds", "3",
                           "--only-seed", "3"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2 and "--only-seed 3: seeds are 0 to 2" in proc.stderr
    assert not (tmp_path / "c").exists()


def test_a_second_process_on_a_seed_in_use_stops_before_touching_it(tmp_path: Path, docker_sandbox) -> None:
    # this test process stands in for a compare already running seed 0 in the same folder
    out = tmp_path / "c"
    with RunLock(out / ".seed0.lock"):
        proc = _compare(out)
    assert proc.returncode == 1
    assert f"seed 0: {out} is in use by controller pid {os.getpid()}" in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == [".seed0.lock"]  # no run folder was made


def test_a_dead_endpoint_marks_its_arm_incomplete_and_a_killed_compare_resumes(tmp_path: Path,
                                                                                docker_sandbox) -> None:
    """The llm arm's provider (a real HTTP server) answers one call, then 500 forever.  The compare is
    SIGKILLed as soon as the fixed arm's record says finished, then run again: the fixed run is read back
    untouched, the llm arm resumes and ends marked incomplete with the endpoint's error, not dropped."""
    from llm_server import ScriptedLLMServer, tool_call

    out = tmp_path / "compare"
    fixed_record = out / "fixed" / "seed0" / "compare.json"
    with ScriptedLLMServer() as server:
        server.script(tool_call("read_file", {"path": "harness.yaml"}))  # then server.default: a 500 error
        args = ["--arms", "fixed", "llm", "--model", "openai/test-model", "--api-base", server.api_base]
        env = os.environ | {"COLUMNS": "1000", "PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "test"}
        first = subprocess.Popen([sys.executable, "bench/compare_arms.py", "--out", str(out), *TINY, *args],
                                 cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 1500  # a guard against a hang, not a measurement
        while not (fixed_record.exists() and json.loads(fixed_record.read_text()).get("status") == "finished"):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()[0][-3000:]
            time.sleep(0.2)
        first.send_signal(signal.SIGKILL)
        first.wait()
        finished_at, record = fixed_record.stat().st_mtime_ns, fixed_record.read_text()
        shared_round0 = out / "shared" / "seed0" / "rounds" / "0" / "train" / "result.json"
        trained_at = shared_round0.stat().st_mtime_ns

        again = subprocess.run([sys.executable, "bench/compare_arms.py", "--out", str(out), *TINY, *args], cwd=ROOT,
                               env=env, capture_output=True, text=True, timeout=1800)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "fixed seed 0: finished" in again.stdout
    assert (fixed_record.stat().st_mtime_ns, fixed_record.read_text()) == (finished_at, record)  # not redone
    assert shared_round0.stat().st_mtime_ns == trained_at  # round 0 not trained again for the resumed arm
    fixed, llm = _row(again.stdout, "fixed"), _row(again.stdout, "llm")
    assert fixed[1] == "1/1"
    assert llm[1].startswith("0/1 (incomplete: the LLM endpoint failed, round 0: openai/test-model at "
                             f"{server.api_base}: InternalServerError after ")
    assert llm[2] == fixed[2]  # still in the table: the same base exam as the fixed arm
    assert len(server.requests) >= 2  # the served call, then the failing ones


def test_a_round_0_that_fails_marks_every_arm_incomplete_and_the_table_is_still_printed(tmp_path: Path,
                                                                                          docker_sandbox) -> None:
    """GRPO needs two completions per prompt to compare; a group of one is refused when round 0 trains.  That
    round is shared by the arms, so each arm is marked incomplete with the harness's error (not a traceback
    that loses the table), on a second compare too."""
    out = tmp_path / "compare"
    for _ in range(2):  # the second compare tries round 0 again, it does not read a failure back as finished
        proc = _compare(out, "--arms", "fixed", "recipe", "--knob", "group_size=1")
        assert proc.returncode == 0, proc.stderr[-3000:]
        for arm in ("fixed", "recipe"):
            finished = _row(proc.stdout, arm)[1]
            assert finished.startswith("0/1 (incomplete: shared round 0: RoundFailed: Round 0 of run 'seed0' failed")
            assert "grpo.group_size Input should be greater than or equal to 2" in finished
            assert f"{arm} seed 0: incomplete: shared round 0" in proc.stdout
    assert not (out / "fixed" / "seed0").exists()  # no arm went on from a failed round 0
