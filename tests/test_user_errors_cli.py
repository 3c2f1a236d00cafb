"""User errors through the real command line: one line naming what is wrong and what to do, no traceback.

Each case runs ``python -m meta_agent`` in a subprocess, as a user would, and reads its stderr.  The
errors come from three layers: the backends' option checks (``rl_backend.base.BackendOptionError``,
listed in ``meta_agent.errors``), the demo's run folder, and the recipe agent reading main's harness.yaml.
"""

from __future__ import annotations

import os
import re
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


# -- one CLI voice: the same message and exit code for a folder that holds no run, from every command ------

REVIEW_COMMANDS = [["history"], ["report"], ["show", "0"], ["backtest", "iv/r0-x"], ["--resume"]]


@pytest.mark.parametrize("command", REVIEW_COMMANDS)
@pytest.mark.parametrize("folder", ["missing", "foreign"])
def test_a_folder_without_a_run_gets_one_message_and_exit_2_everywhere(tmp_path, command, folder):
    path = tmp_path / "nothing-here"
    if folder == "foreign":
        path.mkdir()
        (path / "notes.txt").write_text("mine\n")
    proc = _cli(*command, "--run-dir", str(path))
    said = " ".join(proc.stderr.split())
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "HarnessRepo" not in said
    what = "does not exist" if folder == "missing" else "holds no run (no run.json)"
    assert (f"error: {path} {what}; a run folder is made by "
            f"`python -m meta_agent --domain math --run-dir {path}`") in said
    assert not (path / "run.json").exists() and not (path / "harness").exists()  # nothing created by a review


def test_a_run_json_without_its_harness_repo_says_which_folder_is_missing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_json_atomic(run / "run.json", {"run_id": "run", "domain": "math"})
    for command in (["history"], ["show", "0"], ["report"]):
        proc = _cli(*command, "--run-dir", str(run))
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert f"its harness repo {run / 'harness'} is missing" in " ".join(proc.stderr.split())


@pytest.mark.parametrize("argv, said", [
    (["report"], "report needs --run-dir R (one run) or --compare R1 R2"),
    (["history"], "the following arguments are required: --run-dir"),
    (["show", "--run-dir", "x"], "the following arguments are required: name"),
    (["--rounds", "many"], "invalid int value: 'many'"),
    (["--agent", "nobody", "--run-dir", "RUN"], "nobody"),
])
def test_bad_input_exits_2_for_the_run_and_every_subcommand(tmp_path, argv, said):
    proc = _cli(*[a.replace("RUN", str(tmp_path / "run")) for a in argv])
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert said in proc.stderr and "Traceback" not in proc.stderr


def test_help_lists_every_subcommand_and_explains_every_option():
    top = _cli("--help")
    assert top.returncode == 0
    first = " ".join(top.stdout.split("\n\n")[0].split())  # the usage lines
    for name in ("backtest", "history", "show", "demo", "report", "import-trajectories", "tasks"):
        assert name in first, name
    assert "``" not in top.stdout
    for command in ("backtest", "history", "show", "demo", "report", "import-trajectories"):
        proc = _cli(command, "--help")
        assert proc.returncode == 0
        options = proc.stdout.split("options:")[1]
        # every option (a line starting with -) has help text on its line or the next one
        lines = options.splitlines()
        for k, line in enumerate(lines):
            if line.strip().startswith("-"):
                flag_only = re.fullmatch(r"\s*-[-\w, .\[\]{}A-Z_]*", line) is not None
                has_text = len(re.split(r"\s{2,}", line.strip())) > 1 or (
                    k + 1 < len(lines) and lines[k + 1].startswith(" " * 10)
                    and not lines[k + 1].strip().startswith("-"))
                assert has_text, f"{command}: {line!r} has no help" + (" (flag only)" if flag_only else "")
    assert "explain" not in _cli("history", "--help").stdout  # and the description says what it lists
    assert "One row per intervention" in " ".join(_cli("history", "--help").stdout.split())


@pytest.mark.parametrize("argv, said", [
    (["histroy", "--run-dir", "runs/x"], "unknown command 'histroy'; did you mean history?"),
    (["reprot"], "unknown command 'reprot'; did you mean report?"),
    (["frobnicate"], "unknown command 'frobnicate'; the commands are: backtest, history, show, demo, report, "
                     "import-trajectories, rescore, tasks (or run options: --help)"),
])
def test_a_misspelled_command_is_named_with_the_nearest(tmp_path, argv, said):
    proc = subprocess.run([sys.executable, "-m", "meta_agent", *argv], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env=os.environ | {"COLUMNS": "1000", "PYTHONPATH": str(ROOT)})
    _refused(proc, said)
    assert proc.returncode == 2 and not list(tmp_path.iterdir())  # nothing written


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_a_resume_refused_over_a_damaged_part_changes_no_file(tmp_path):
    from rl_backend.archive import Archive
    from rl_backend.synthetic import synthetic_math_rows

    rd, repo = _tiny_run(tmp_path / "run")
    archive = Archive(rd.archive)
    part = archive.append_round(rd.path.name, 0, synthetic_math_rows(rd.path.name, 0, 8, 4, seed=0,
                                                                       verify=lambda *a: (0.0, {})))
    rd.save_state({"round": 1, "phase": "train", "last_good_commit": repo.head("main"), "policy_ref": None,
                   "rounds": {}})
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])  # truncated, as a full disk leaves it
    before = _files(rd.path)
    proc = _cli("--resume", "--run-dir", str(rd.path), "--rounds", "4")
    _refused(proc, "damaged", "restore")
    assert proc.returncode == 1
    assert _files(rd.path) == before  # run.json still says rounds 1; nothing else written either


@pytest.mark.parametrize("argv, said", [
    (["--no-rollback"], "--no-rollback (run.json has rollback: on)"),
    (["--model", "openai/x"], "--model (run.json has model: none)"),
])
def test_a_refused_resume_names_the_recorded_setting_in_the_users_words(tmp_path, argv, said):
    rd, _ = _tiny_run(tmp_path / "run")
    before = _files(rd.path)
    proc = _cli("--resume", "--run-dir", str(rd.path), *argv)
    _refused(proc, said)
    assert proc.returncode == 2 and "None" not in proc.stderr and "True" not in proc.stderr
    assert _files(rd.path) == before
