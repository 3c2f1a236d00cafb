"""Importers on files written in each tool's real format, graded by the trusted grader in Docker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rl_backend.archive import Archive
from swe_env.imports import ImportFormatError, import_rows, read_trajectories

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


@pytest.fixture(scope="module")
def gold(task) -> str:
    from swe_env.tasks import gold_patch

    return gold_patch(task)


def mini_swe_agent_file(path: Path, submission: str, exit_status: str = "Submitted") -> Path:
    """What mini-swe-agent 2.x's DefaultAgent.save writes (``trajectory_format`` mini-swe-agent-1.1)."""
    def assistant(command: str) -> dict:
        return {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function"}],
                "extra": {"actions": [{"command": command, "tool_call_id": "call_1"}], "cost": 0.001,
                          "timestamp": 1760000000.0, "response": {"id": "x"}}}

    data = {
        "info": {"model_stats": {"instance_cost": 0.002, "api_calls": 2},
                 "config": {"agent": {"step_limit": 250}, "agent_type": "minisweagent.agents.default.DefaultAgent"},
                 "mini_version": "2.4.6", "exit_status": exit_status, "submission": submission},
        "messages": [
            {"role": "system", "content": "You are a helpful assistant that can interact with a computer."},
            {"role": "user", "content": "<pr_description>split() and BEGIN TRANSACTION</pr_description>"},
            assistant(f"grep -n BEGIN {SOURCE}"),
            {"role": "tool", "content": "<returncode>0</returncode><output>56: if unified == 'BEGIN':</output>",
             "tool_call_id": "call_1"},
            assistant("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"),
            {"role": "exit", "content": submission, "extra": {"exit_status": exit_status, "submission": submission}},
        ],
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": TASK_ID,
    }
    path.write_text(json.dumps(data, indent=2))
    return path


def swe_agent_file(path: Path, submission: str | None, exit_status: str) -> Path:
    """What SWE-agent 1.x writes to ``<instance_id>.traj``."""
    step = {"action": "ls sqlparse/engine\n", "observation": "__init__.py\nstatement_splitter.py",
            "response": "Let me look.\n\n```\nls sqlparse/engine\n```", "thought": "Let me look.",
            "execution_time": 0.05, "state": {"open_file": "n/a", "working_dir": "/testbed"},
            "query": [{"role": "system", "content": "SETTING: ..."}], "extra_info": {}}
    data = {
        "environment": "main",
        "trajectory": [step, dict(step, action="python -m pytest tests/test_split.py\n")],
        "history": [{"role": "system", "content": "SETTING: ...", "agent": "main", "message_type": "system_prompt"},
                    {"role": "user", "content": "<issue>split() and BEGIN TRANSACTION</issue>", "agent": "main",
                     "message_type": "observation"},
                    {"role": "assistant", "content": step["response"], "thought": step["thought"],
                     "action": step["action"], "agent": "main", "message_type": "action"}],
        "info": {"swe_agent_hash": "abc", "swe_agent_version": "1.0.1", "swe_rex_version": "1.2.0",
                 "exit_status": exit_status, "submission": submission,
                 "model_stats": {"instance_cost": 0.1, "tokens_sent": 1000, "tokens_received": 50, "api_calls": 2}},
        "replay_config": "{}",
    }
    path.write_text(json.dumps(data, indent=2))
    return path


@pytest.mark.docker
@pytest.mark.slow
def test_mini_swe_agent_trajectory_is_graded_by_the_trusted_grader(task, gold: str, tmp_path: Path) -> None:
    # the file claims "Submitted" for the gold change: resolved because the tests pass, not because it says so
    path = mini_swe_agent_file(tmp_path / f"{TASK_ID}.traj.json", gold)
    [row] = import_rows([path], "mini-swe-agent", run_id="imp", round=0)
    info = json.loads(row["verifier_info"])
    assert (row["verified"], info["status"], row["finish_reason"]) == (1.0, "resolved", "submitted")
    assert info["execution"]["actions"] == [f"grep -n BEGIN {SOURCE}",
                                            "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff"]
    assert row["task_id"] == TASK_ID and row["domain"] == "swe" and row["data_source"] == "swe/sqlparse"
    assert json.loads(row["messages"])[1]["content"].startswith("<pr_description>")


@pytest.mark.docker
@pytest.mark.slow
def test_swe_agent_trajectory_that_ran_out_of_budget(task, tmp_path: Path) -> None:
    path = swe_agent_file(tmp_path / f"{TASK_ID}.traj", None, "exit_cost")
    [row] = import_rows([path], "swe-agent", run_id="imp", round=0)
    info = json.loads(row["verifier_info"])
    assert (row["verified"], info["status"], row["finish_reason"], row["truncated"]) == \
        (0.0, "empty_patch", "step_limit", True)
    assert info["execution"]["steps"] == 2


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_predictions_through_the_cli_into_an_archive(task, gold: str, tmp_path: Path) -> None:
    from meta_agent.cli import main

    # a conftest.py that would stop pytest collecting the tests: the grader removes it and reports it
    ignore_tests = "--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+collect_ignore_glob = ['tests/*']\n"
    preds = tmp_path / "preds.jsonl"
    preds.write_text("\n".join(json.dumps({"instance_id": TASK_ID, "model_name_or_path": "m", "model_patch": p})
                               for p in (f"diff --git a/{SOURCE} b/{SOURCE}\n" + gold, ignore_tests)) + "\n")
    assert main(["import-trajectories", str(preds), "--format", "swebench-predictions", "--archive",
                 str(tmp_path / "archive"), "--run-id", "imp", "--round", "3"]) == 0
    rows = sorted(Archive(tmp_path / "archive").rows(run_id="imp", round=3), key=lambda r: r["sample_idx"])
    assert [r["verified"] for r in rows] == [1.0, 0.0]
    assert [r["group_id"] for r in rows] == [f"import-{TASK_ID}"] * 2
    second = rows[1]["verifier_info"]
    second = json.loads(second) if isinstance(second, str) else second
    assert (second["status"], second["touched_tests"]) == ("unresolved", ["conftest.py"])


def test_mini_swe_agent_preds_json_keyed_by_instance(tmp_path: Path) -> None:
    path = tmp_path / "preds.json"
    path.write_text(json.dumps({"a": {"model_name_or_path": "m", "instance_id": "a", "model_patch": "p"},
                                "b": {"model_name_or_path": "m", "instance_id": "b", "model_patch": None}}, indent=2))
    items = read_trajectories(path, "swebench-predictions")
    assert [(i.task_id, i.patch) for i in items] == [("a", "p"), ("b", "")]


@pytest.mark.parametrize("name, content, fmt, where", [
    ("preds.jsonl", '{"instance_id": "a", "model_patch": ""}\n{"instance_id": "b", "model_patch": \n',
     "swebench-predictions", "preds.jsonl:2"),
    ("preds.jsonl", '{"instance_id": "a", "model_patch": ""}\n{"model_patch": "x"}\n', "swebench-predictions",
     "preds.jsonl:2"),
    ("t.traj.json", '{\n  "info": {},\n  "messages": [\n', "mini-swe-agent", "t.traj.json:4"),
    ("t.traj.json", '{\n  "info": {},\n  "messages": [],\n  "trajectory_format": "mini-swe-agent-1.0"\n}',
     "mini-swe-agent", "t.traj.json:4"),
    ("t.traj", '{\n  "info": {"submission": ""},\n  "trajectory": [\n    {"observation": "x"}\n  ]\n}', "swe-agent",
     "t.traj:3"),
])
def test_a_malformed_file_names_file_and_line(tmp_path: Path, name: str, content: str, fmt: str, where: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(ImportFormatError) as err:
        read_trajectories(path, fmt)
    assert str(err.value).startswith(str(tmp_path / where) + ":")


@pytest.mark.docker
def test_an_unknown_instance_is_refused_before_anything_is_graded(task, tmp_path: Path) -> None:
    path = tmp_path / "preds.jsonl"
    path.write_text(json.dumps({"instance_id": "django__django-11099", "model_patch": "x"}) + "\n")
    with pytest.raises(ImportFormatError, match=r"preds.jsonl:1: task 'django__django-11099' is not a shipped"):
        import_rows([path], "swebench-predictions", run_id="imp", round=0)
