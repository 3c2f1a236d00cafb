"""User errors through the real command line: one line naming what is wrong and what to do, no traceback.

Each case runs ``python -m meta_agent`` in a subprocess, as a user would, and reads its stderr.  The
errors come from three layers: the backends' option checks (``rl_backend.base.BackendOptionError``,
listed in ``meta_agent.errors``), the demo's run folder, and the recipe agent reading main's harness.yaml.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from meta_agent.run_dir import write_json_atomic
from test_loop import _tiny_run

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=os.environ | {"COLUMNS": "1000"})


def _refused(proc: subprocess.CompletedProcess, *named: str) -> None:
    """Failed, said every one of ``named``, and printed no traceback."""
    assert proc.returncode != 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    for text in named:
        assert text in proc.stderr, f"{text!r} not in:\n{proc.stderr[-3000:]}"


def test_verl_without_a_model_path_names_the_option_and_writes_no_run(tmp_path):
    proc = _cli("--backend", "verl", "--run-dir", str(tmp_path / "run"), "--rounds", "1")
    _refused(proc, "--backend verl needs --model-path", "Hugging Face model folder")
    assert not (tmp_path / "run").exists()  # refused before any file was written


def test_verl_with_two_cluster_addresses_says_which_one_to_give(tmp_path):
    (tmp_path / "model").mkdir()
    proc = _cli("--backend", "verl", "--model-path", str(tmp_path / "model"), "--ray-address", "127.0.0.1:6379",
                "--ray-job-address", "http://127.0.0.1:8265", "--run-dir", str(tmp_path / "run"), "--rounds", "1")
    _refused(proc, "--ray-address and --ray-job-address", "give only --ray-job-address")
    assert not (tmp_path / "run").exists()


def test_verl_on_several_nodes_without_a_cluster_says_how_to_name_one(tmp_path):
    (tmp_path / "model").mkdir()
    proc = _cli("--backend", "verl", "--model-path", str(tmp_path / "model"), "--nodes", "2",
                "--run-dir", str(tmp_path / "run"), "--rounds", "1")
    _refused(proc, "--nodes 2 needs a Ray cluster", "--ray-address", "--ray-job-address")
    assert not (tmp_path / "run").exists()


def test_endpoint_without_its_policy_options_names_both(tmp_path):
    proc = _cli("--backend", "endpoint", "--domain", "swe", "--run-dir", str(tmp_path / "run"), "--rounds", "1")
    _refused(proc, "--policy-api-base", "--policy-model")
    assert not (tmp_path / "run").exists()


def test_demo_into_an_existing_folder_is_refused_and_leaves_it_alone(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me\n")  # not a run folder: the demo must not write into it either
    proc = _cli("demo", "--run-dir", str(folder))
    _refused(proc, f"{folder} already exists", "pick another --run-dir")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


@pytest.mark.docker
@pytest.mark.parametrize("text, said", [("- a list\n- not settings\n", "harness.yaml is a list, not a mapping"),
                                        ("grpo: {steps_per_round: [\n", "harness.yaml is not valid YAML")])
def test_recipe_agent_on_a_harness_yaml_that_is_not_settings_says_to_fix_main(tmp_path, text, said):
    """A run resumed at propose whose main holds a harness.yaml that is not a mapping of settings."""
    rd, repo = _tiny_run(tmp_path / "run")
    repo.commit_files({"harness.yaml": text}, "harness.yaml broken by hand")
    head = repo.head("main")
    write_json_atomic(rd.round_dir(0) / "train" / "result.json",
                      {"policy_ref": None, "metrics": [], "eval": {}, "harness_commit": head, "train_seconds": 1.0})
    write_json_atomic(rd.round_dir(0) / "digest.json", {"round": 0})
    (rd.round_dir(0) / "digest.md").write_text("# round 0\n")
    rd.save_state({"round": 0, "phase": "propose", "last_good_commit": head, "policy_ref": None, "rounds": {}})
    proc = _cli("--resume", "--run-dir", str(rd.path))
    _refused(proc, said, "fix it on main")
    assert not (rd.round_dir(0) / "proposals.json").exists()
    assert rd.state()["phase"] == "propose"
