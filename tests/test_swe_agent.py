"""Agent mode for real: a scripted OpenAI-compatible server drives bash in the task's own container.

The sqlparse task is built and checked once (cached by swe_env.build); each episode starts a
fresh container from its image, and the grader runs the tests of the patch the episode left.
"""

from __future__ import annotations

import base64
import json
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from swe_env.agent_env import LABEL, AgentLimits, BashEnvironment
from swe_env.agent_loop import collect, parse_action, run_episode
from harness_repo.contract import TaskSpec
from domains.swe import SweDomain
from swe_env.policy_client import PolicyClient, PolicyEndpointError
from tests.llm_server import Reply, ScriptedLLMServer, text

REPO = Path(__file__).resolve().parents[1]
TASK_ID = "sqlparse-0.5.5-begin-transaction"
SOURCE = "sqlparse/engine/statement_splitter.py"


@pytest.fixture(scope="module")
def task(docker_sandbox, swe_cache):
    from swe_env.build import check_spec
    from swe_env.checked import load_task
    from swe_env.tasks import find_spec

    record = check_spec(find_spec(TASK_ID), log=lambda _: None)  # once per test session (swe_cache)
    assert record.checked, record.reason
    return load_task(TASK_ID)


def fixed_source(task, tmp_path: Path) -> str:
    """The source file with the gold change applied, by git on the host (what a solving policy writes)."""
    from swe_env.tasks import buggy_sources, gold_patch

    repo = tmp_path / "fix"
    (repo / SOURCE).parent.mkdir(parents=True)
    (repo / SOURCE).write_text(buggy_sources(task)[SOURCE])
    (repo / "gold.patch").write_text(gold_patch(task))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "apply", "gold.patch"], check=True)
    return (repo / SOURCE).read_text()


def domain_tasks() -> list:
    return SweDomain().tasks("train", [TaskSpec(name=TASK_ID)], 1, 0)


def limited(max_steps: int):
    return lambda t: SweDomain().environment(t, AgentLimits(max_steps=max_steps))


def bash(command: str) -> Reply:
    return text(f"Next step.\n```bash\n{command}\n```")


def agent_containers() -> list[str]:
    out = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={LABEL}=1"], capture_output=True, text=True)
    return out.stdout.split()


def test_one_command_per_reply() -> None:
    assert parse_action("look\n```bash\nls -la\n```") == "ls -la"
    assert parse_action("no block here") is None
    assert parse_action("```bash\nls\n```\nand\n```bash\npwd\n```") is None  # two commands: which one?


@pytest.mark.docker
@pytest.mark.slow
def test_scripted_policy_solves_the_task(task, tmp_path: Path) -> None:
    encoded = base64.b64encode(fixed_source(task, tmp_path).encode()).decode()
    write = (f"python3 -c \"import base64, pathlib; "
             f"pathlib.Path('{SOURCE}').write_bytes(base64.b64decode('{encoded}'))\"")
    before = set(agent_containers())
    with ScriptedLLMServer() as server:
        server.script(bash(f"head -5 {SOURCE}"), text("I will fix it now."), bash(write),
                      bash("python3 -m pytest -q -x tests/test_split.py"), bash("submit"))
        traj = run_episode(BashEnvironment(task, AgentLimits(max_steps=10)), PolicyClient(server.api_base, "scripted"))
    assert traj.exit_status == "submitted"
    assert traj.actions[0] == f"head -5 {SOURCE}" and traj.actions[-1] == "submit" and len(traj.actions) == 4
    from swe_env.tasks import buggy_sources

    assert traj.observations[0] == "".join(buggy_sources(task)[SOURCE].splitlines(keepends=True)[:5])
    # The agent's own test run, inside its container, is over the old release's tests (the graded ones are
    # hidden until grading): they all pass with the fix.
    assert re.search(r"^\d+ passed in ", traj.observations[2].strip().splitlines()[-1]), traj.observations[2][-300:]
    assert sum(m["content"].startswith("Format error") for m in traj.messages if m["role"] == "user") == 1
    info = traj.outcome["verifier_info"]
    assert (traj.outcome["verified"], info["status"]) == (1.0, "resolved")
    assert traj.outcome["patch"].startswith(f"--- a/{SOURCE}\n+++ b/{SOURCE}\n")
    assert info["execution"]["exit_status"] == "submitted" and info["execution"]["steps"] == 4
    assert set(agent_containers()) == before  # removed


@pytest.mark.docker
@pytest.mark.slow
def test_a_policy_that_never_submits_stops_at_the_step_limit(task, tmp_path: Path) -> None:
    rows_path = tmp_path / "rows.jsonl"
    with ScriptedLLMServer() as server:
        server.default = bash("ls")
        rows = collect(domain_tasks(), PolicyClient(server.api_base, "looping"), run_id="agent", round=0,
                       make_env=limited(3), rows_path=rows_path)
        assert len(server.requests) == 3
    [row] = rows
    info = json.loads(row["verifier_info"])
    assert (row["finish_reason"], row["verified"], info["status"]) == ("step_limit", 0.0, "empty_patch")
    assert row["truncated"] is True and row["response"] == "$ ls\n$ ls\n$ ls"
    assert json.loads(rows_path.read_text())["traj_id"] == row["traj_id"]


@pytest.mark.docker
@pytest.mark.slow
def test_flooding_and_background_processes_are_cut_off(task) -> None:
    env = BashEnvironment(task, AgentLimits(max_steps=10, output_chars=1000, command_timeout_s=5))
    try:
        env.start()
        flood = env.step("yes flood")  # prints without bound until /tmp (64 MiB) is full or the timeout kills it
        assert flood.truncated and flood.returncode != 0
        assert flood.output.startswith("flood\nflood\n") and "[output cut:" in flood.output
        assert len(flood.output) < 1200
        env.step("(sleep 300 &) ; nohup sh -c 'while true; do echo x >> /tmp/bg; done' >/dev/null 2>&1 &")
        survivors = env.step("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done")
        assert "sleep 300" not in survivors.output and "while true" not in survivors.output
        done = env.step("submit")
        assert done.done and env.exit_status == "submitted"
    finally:
        env.close()
    assert env.result()["verifier_info"]["status"] == "empty_patch"  # nothing in the repo changed


ORPHAN_SCRIPT = """
import os, signal, sys
from swe_env.agent_env import BashEnvironment
from swe_env.checked import load_task
env = BashEnvironment(load_task(sys.argv[1]))
env.start()
if sys.argv[2] == "die":
    os.kill(os.getpid(), signal.SIGKILL)   # a controller killed mid-episode never closes its container
env.close()
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_killed_controllers_agent_container_is_removed_by_the_next_one(task) -> None:
    def controller(how: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", ORPHAN_SCRIPT, TASK_ID, how], cwd=REPO, capture_output=True,
                              text=True, timeout=300)

    before = set(agent_containers())
    killed = controller("die")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    orphans = set(agent_containers()) - before
    assert len(orphans) == 1  # its `sleep infinity` container runs on
    clean = controller("close")
    assert clean.returncode == 0, clean.stderr
    assert not orphans & set(agent_containers())  # the next controller's first environment removed it


@pytest.mark.docker
@pytest.mark.slow
def test_garbage_from_the_endpoint_stops_collection_but_keeps_finished_trajectories(task, tmp_path: Path) -> None:
    rows_path = tmp_path / "rows.jsonl"
    with ScriptedLLMServer() as server:
        server.script(bash("submit"))
        server.default = Reply(200, {"not": "a chat completion"})
        with pytest.raises(PolicyEndpointError, match="no chat completion.*1 finished trajectories kept"):
            collect(domain_tasks(), PolicyClient(server.api_base, "m"), run_id="agent", round=0,
                    make_env=limited(3), rows_path=rows_path, group_size=2)
    kept = [json.loads(line) for line in rows_path.read_text().splitlines()]
    assert [r["finish_reason"] for r in kept] == ["submitted"]


def test_an_endpoint_that_is_down_is_named_in_a_clear_error() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = PolicyClient(f"http://127.0.0.1:{port}/v1", "m", timeout_s=5)
    with pytest.raises(PolicyEndpointError, match=f"127.0.0.1:{port}/v1/chat/completions unreachable"):
        client.complete([{"role": "user", "content": "hi"}])


def test_http_errors_and_slow_endpoints_are_clear_errors() -> None:
    from tests.llm_server import delayed, status

    with ScriptedLLMServer() as server:
        server.script(status(503, "overloaded"), delayed(bash("ls"), 3.0))
        client = PolicyClient(server.api_base, "m", timeout_s=1)
        with pytest.raises(PolicyEndpointError, match="HTTP 503.*overloaded"):
            client.complete([{"role": "user", "content": "hi"}])
        with pytest.raises(PolicyEndpointError, match="too slow"):
            client.complete([{"role": "user", "content": "hi"}])


@pytest.mark.docker
@pytest.mark.slow
def test_agent_mode_round_through_the_cli(task, tmp_path: Path) -> None:
    """`--backend endpoint`: one round of agent trajectories from a scripted endpoint, scored by the seed harness
    in its sandbox, archived, digested; nothing trained."""
    import subprocess
    import sys

    import yaml

    from harness_repo.repo import HarnessRepo
    from rl_backend.archive import Archive
    from swe_env.build import check_spec
    from swe_env.cross_check import shipped_specs

    for spec in shipped_specs():  # once per test session (swe_cache)
        check_spec(spec, log=lambda _: None)
    source = tmp_path / "tiny"
    repo = HarnessRepo.create(source / "harness", "swe")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"] = [{"name": TASK_ID, "weight": 1.0}]
    config["grpo"].update({"steps_per_round": 1})
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "One task")
    with ScriptedLLMServer() as server:
        server.default = bash("submit")
        proc = subprocess.run([sys.executable, "-m", "meta_agent", "--domain", "swe", "--backend", "endpoint",
                               "--policy-api-base", server.api_base, "--policy-model", "scripted",
                               "--from-run", str(source), "--from-branch", "main", "--run-dir", str(tmp_path / "run"),
                               "--rounds", "1", "--candidates", "0"], cwd=Path(__file__).parent.parent,
                              capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "no interventions asked for (--candidates 0)" in proc.stdout + proc.stderr
    assert "proposed 0 intervention" not in proc.stdout + proc.stderr
    rows = Archive(tmp_path / "run" / "archive").rows(run_id="run", round=0)
    train = [r for r in rows if r["split"] == "train"]
    heldout = [r for r in rows if r["split"] == "heldout"]
    assert [(r["task_id"], r["finish_reason"], r["reward"]) for r in train] == [(TASK_ID, "submitted", 0.0)] * 2
    from swe_env.checked import shipped_tasks

    assert len(heldout) == len(shipped_tasks("heldout")) and all(r["reward"] is None for r in heldout)
    assert all(r["policy_ref"] == "endpoint:scripted" for r in rows)
    digest = json.loads((tmp_path / "run" / "rounds" / "0" / "digest.json").read_text())
    assert digest["swe"]["by_exit_status"] == {"submitted": 2}
