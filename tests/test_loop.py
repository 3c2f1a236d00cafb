"""The round loop with every real component: TRL on CPU, git, Parquet, Docker, the recipe agent.

Rounds are tiny (1 optimizer step of 2 prompts x 4 completions; 2 where a test stops the controller between
them) but nothing is mocked.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness_repo.repo import HarnessRepo
from meta_agent.config import BacktestSettings, EvaluationSettings
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive

ROOT = Path(__file__).resolve().parents[1]
TINY = {"group_size": 4, "prompts_per_step": 2, "steps_per_round": 1, "max_completion_length": 16,
        "learning_rate": 1e-5, "temperature": 1.0}
"""Knobs of the test runs: small, and loose enough (hot sampling, 16 tokens) that the untrained policy's
digest shows truncation and missing final answers, so the recipe agent proposes in every test run.
One optimizer step (a step is about a third of a tiny round's time on 2 CPU cores) is all a test that
trains to the end needs; a test that stops the controller between two steps asks for two (``steps=2``)."""


def _tiny_run(path: Path, steps: int = TINY["steps_per_round"]) -> tuple[RunDir, HarnessRepo]:
    rd = RunDir(path)
    path.mkdir(parents=True)
    repo = HarnessRepo.create(rd.harness, "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update(TINY | {"steps_per_round": steps})
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Tiny knobs for tests")
    write_json_atomic(rd.run_json, {"run_id": path.name, "domain": "math", "backend": "local", "agent": "recipe",
                                    "rounds": 1, "candidates": 2, "model_path": None,
                                    "backtest": BacktestSettings(sample_groups=8).model_dump(),
                                    "evaluation": EvaluationSettings(heldout_size=16).model_dump()})
    return rd, repo


@pytest.mark.slow
@pytest.mark.docker
def test_harness_crash_in_training_restores_main_and_continues(tmp_path, docker_sandbox):
    rd, repo = _tiny_run(tmp_path / "run")
    good = repo.head("main")
    rd.save_state({"round": 0, "phase": "train", "last_good_commit": good, "policy_ref": None, "rounds": {}})
    bad = repo.commit_files({"reward.py": "def compute_score(*a, **k):\n    raise RuntimeError('broken reward')\n"},
                            "A reward that crashes")
    # the controller kills itself at its first state save, the one after the retried round has trained
    proc = subprocess.run([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(rd.path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env=os.environ | {"META_AGENT_FAILPOINTS": "state.saved"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert rd.state()["phase"] == "diagnose"  # train leaves straight for diagnose: its rows are archived already
    info = rd.state()["rounds"]["0"]
    assert info["failures"][0]["commit"] == bad and "broken reward" in info["failures"][0]["error"]
    head = repo.log("main", 1)[0]
    assert "Restore" in head["subject"] and repo.read_file("main", "reward.py") == repo.read_file(good, "reward.py")
    assert repo.read_file(bad, "reward.py").startswith("def compute_score")  # history kept
    result = json.loads((rd.round_dir(0) / "train" / "result.json").read_text())
    assert result["harness_commit"] == repo.head("main")
    # the rows are in the archive, not copied into result.json: 1 step x 2 prompts x 4 completions, a 16-task exam
    assert "rollouts" not in result and "heldout" not in result
    assert Archive(rd.archive).count(run_id="run", round=0, split="train") == 1 * 2 * 4
    assert Archive(rd.archive).count(run_id="run", round=0, split="heldout") == 16
    assert Path(rd.round_dir(0) / "train" / "train.log").exists()


def _cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kw)


@pytest.mark.slow
@pytest.mark.docker
def test_cli_sigkill_mid_training_then_resume_and_lock(tmp_path, docker_sandbox):
    run_dir = tmp_path / "cli-run"
    rd, _ = _tiny_run(run_dir, steps=2)  # the kill below lands between the two steps
    # two rounds asked for, but a compute budget that the first round's training already exhausts
    write_json_atomic(rd.run_json, rd.config() | {"rounds": 2, "budget": {"run_compute_hours": 1e-6}})
    proc = _cli("--resume", "--run-dir", str(run_dir))
    deadline = time.time() + 600
    log = rd.round_dir(0) / "train" / "metrics.jsonl"
    while time.time() < deadline and not (log.exists() and log.read_text().strip()):
        assert proc.poll() is None, proc.stdout.read()
        time.sleep(0.5)
    # frozen mid-training (its first step logged, its result not yet written): the kill below lands mid-training
    proc.send_signal(signal.SIGSTOP)
    assert not (rd.round_dir(0) / "train" / "result.json").exists()

    # a second controller on the same folder is refused while the first holds it, and changes nothing of it
    def snapshot() -> tuple:
        return rd.run_json.read_bytes(), rd.state_json.read_bytes() if rd.state_json.exists() else None

    before = snapshot()
    second = _cli("--resume", "--run-dir", str(run_dir), "--rounds", "9", "--budget-cost", "0.01")
    out, _ = second.communicate(timeout=120)
    assert second.returncode != 0 and "in use" in out
    assert snapshot() == before
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert rd.state().get("phase", "train") == "train"
    done = _cli("--resume", "--run-dir", str(run_dir))
    out, _ = done.communicate(timeout=900)
    assert done.returncode == 0, out
    assert "round 0 done" in out and "run budget" in out
    state = rd.state()
    assert state["round"] == 1 and state["status"] == "budget_exhausted"
    assert state["budget"]["compute_hours"]["cpu"] > 0
    rows = Archive(rd.archive).count(run_id=run_dir.name, split="train")
    assert rows == 2 * TINY["prompts_per_step"] * TINY["group_size"]
    history = subprocess.run([sys.executable, "-m", "meta_agent", "history", "--run-dir", str(run_dir)], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert history.returncode == 0


@pytest.mark.parametrize("args, text", [
    (["--domain", "chess"], "unknown domain 'chess'; available: math"),
    (["--backend", "jax"], "unknown backend 'jax'; available: local"),
    (["--agent", "gpt"], "unknown agent 'gpt'; available: recipe, llm"),
    (["--backend", "verl"], "--backend verl needs --model-path"),
    (["--agent", "llm"], "--model"),
    (["--agent", "recipe", "--model", "openai/gpt-4o-mini"], "takes no --model"),
    (["--candidates", "-1"], "--candidates"),
    (["--from-branch", "iv/r0-x"], "--from-run"),
    (["--resume"], "does not exist; a run folder is made by"),
    (["--no-such-option"], "unrecognized arguments"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, args, text):
    proc = subprocess.run([sys.executable, "-m", "meta_agent", *args, "--run-dir", str(tmp_path / "r")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert text in proc.stderr
    assert not (tmp_path / "r" / "run.json").exists()


@pytest.mark.slow
@pytest.mark.docker
def test_from_branch_starts_a_new_line(tmp_path, docker_sandbox):
    """A new run line starts from any harness branch of another run; that run is left as it was."""
    source, repo = _tiny_run(tmp_path / "a")
    wt = repo.start_intervention(0, "longer", worktree_root=tmp_path / "wt")
    config = yaml.safe_load((wt.path / "harness.yaml").read_text())
    config["grpo"]["max_completion_length"] = 32
    (wt.path / "harness.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    repo.commit(wt, "Longer completions", {"Hypothesis": "h", "Predicted-Effect": ["truncation_rate decrease"]})
    repo.remove_worktree(wt)
    main_before = repo.head("main")

    proc = subprocess.run([sys.executable, "-m", "meta_agent", "--from-branch", wt.branch,
                           "--from-run", str(source.path),
                           "--run-dir", str(tmp_path / "b"), "--rounds", "0"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = HarnessRepo.open(tmp_path / "b" / "harness")
    assert line.config("main").grpo.max_completion_length == 32
    assert line.tree("main") == repo.tree(wt.branch)
    assert json.loads((tmp_path / "b" / "run.json").read_text())["from"] == {"run": str(source.path),
                                                                           "branch": wt.branch}
    assert repo.head("main") == main_before and repo.intervention(wt.branch).status == "open"


@pytest.mark.slow
@pytest.mark.docker
def test_cli_llm_agent_round_with_ctrl_c_and_resume(tmp_path, docker_sandbox, ctrl_c_works):
    """--agent llm through the CLI against a local OpenAI-compatible server; Ctrl-C leaves a resumable run."""
    from llm_server import ScriptedLLMServer, tool_call

    with ScriptedLLMServer() as server:
        run_dir = tmp_path / "llm-run"
        rd, repo = _tiny_run(run_dir, steps=2)  # Ctrl-C lands between the two steps
        write_json_atomic(rd.run_json, rd.config() | {"agent": "llm", "model": "openai/gpt-4o-mini",
                                                      "api_base": server.api_base, "candidates": 1})
        server.script(
            tool_call("read_file", {"path": "prompts/user.j2"}),
            tool_call("write_file", {"path": "JOURNAL.md", "content": "# Journal\n\nTried a note.\n"}),
            tool_call("submit", {"hypothesis": "A journal note changes nothing the gate measures",
                                 "predicted_effects": ["mean_reward unchanged"], "summary": "Add a journal note"}),
        )
        env = os.environ | {"OPENAI_API_KEY": "test"}
        first = _cli("--resume", "--run-dir", str(run_dir), env=env)
        log = rd.round_dir(0) / "train" / "metrics.jsonl"
        deadline = time.time() + 600
        while time.time() < deadline and not (log.exists() and log.read_text().strip()):
            assert first.poll() is None, first.stdout.read()
            time.sleep(0.5)
        first.send_signal(signal.SIGINT)
        out, _ = first.communicate(timeout=120)
        assert first.returncode == 130, out
        assert "Resume with" in out and str(run_dir) in out

        done = _cli("--resume", "--run-dir", str(run_dir), env=env)
        out, _ = done.communicate(timeout=900)
        assert done.returncode == 0, out
    ivs = [iv for iv in repo.interventions() if iv.round == 0 and iv.trailers.get("Agent") == ["llm"]]
    assert len(ivs) == 1, [iv.branch for iv in repo.interventions()]
    iv = ivs[0]
    assert iv.trailers["Model"] == ["openai/gpt-4o-mini"] and int(iv.trailers["Tokens"][0]) > 0
    # a journal-only branch trains exactly as main, so the gate merges it with nothing to predict
    assert iv.status == "merged" and iv.verdict
    assert (rd.round_dir(0) / "agent").is_dir() and any((rd.round_dir(0) / "agent").iterdir())
    assert rd.state()["budget"]["run_tokens"] > 0
    history = subprocess.run([sys.executable, "-m", "meta_agent", "history", "--run-dir", str(run_dir), "--json"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert iv.branch in history.stdout and "Tokens" in history.stdout
