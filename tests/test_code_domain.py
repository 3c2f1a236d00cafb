"""The code domain: frozen tasks, answer parsing, the verifier in real containers, the seed harness in its
real runtime, the digest's code section, the code recipes, and one tiny round through the real CLI."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from domains.code import WORKED_EXAMPLE, CodeDomain, render_question
from domains.code_answers import extract_program
from domains.code_tasks import TASK_FILE, load_tasks, tasks_by_id
from harness_repo.contract import TaskSpec

ROOT = Path(__file__).parent.parent
SEED = ROOT / "harness_repo" / "seeds" / "code"


# -- the frozen tasks -------------------------------------------------------------------------------


def test_frozen_tasks_have_disjoint_splits_and_ground_truth_without_expected_outputs() -> None:
    tasks = load_tasks()
    by_split = {s: {t["id"] for t in tasks if t["split"] == s} for s in ("train", "heldout")}
    assert by_split["train"] and by_split["heldout"] and not by_split["train"] & by_split["heldout"]
    assert {t["split"] for t in tasks if t["source"] == "humaneval"} == {"heldout"}
    assert len([t for t in tasks if t["source"] == "humaneval"]) >= 150  # of the package's 164
    domain = CodeDomain()
    train = domain.tasks("train", [TaskSpec(name="codeio", config={"max_lines": 4})], n=12, seed=0)
    assert len(train) == 12 and {t.split for t in train} == {"train"}
    assert max(tasks_by_id()[t.task_id]["lines"] for t in train) <= 4
    for task in train:
        assert task.ground_truth == {"task_id": task.task_id}  # what harness code receives: no tests, no outputs
        assert "returns" in task.question and "main_solution" in task.question
    heldout = domain.tasks("heldout", [TaskSpec(name="codeio"), TaskSpec(name="humaneval")], n=10_000, seed=0)
    assert len(heldout) == len(by_split["heldout"]) == len({t.task_id for t in heldout})  # no repeats


def test_a_harness_cannot_train_on_humaneval_or_set_unknown_knobs() -> None:
    domain = CodeDomain()
    with pytest.raises(ValueError, match="unknown task 'humaneval'"):
        domain.check_task_specs([TaskSpec(name="humaneval")])
    with pytest.raises(ValueError, match="max_lines must be an integer in 1..6"):
        domain.check_task_specs([TaskSpec(name="codeio", config={"max_lines": 10**9})])
    with pytest.raises(ValueError, match="unknown knob"):
        domain.check_task_specs([TaskSpec(name="codeio", config={"seed": 3})])


def test_the_frozen_file_is_rebuilt_byte_for_byte_under_any_pythonhashseed(tmp_path: Path) -> None:
    """CodeI/O's own sampling depends on PYTHONHASHSEED; the build must not (a prefix of the records, twice)."""
    outs, builds = [], []
    for hash_seed in ("1", "4242"):  # both builds at once
        out = tmp_path / f"tasks-{hash_seed}.jsonl.gz"
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        builds.append((out, subprocess.Popen([sys.executable, "-m", "domains.code_tasks", "build",
                                              "--limit", "50", "--humaneval-limit", "8", "--out", str(out)],
                                             cwd=ROOT, env=env,
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    for out, build in builds:
        _, stderr = build.communicate(timeout=600)
        assert build.returncode == 0, stderr[-2000:]
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    rebuilt = [json.loads(line) for line in gzip.decompress(outs[0]).decode().splitlines()]
    assert {t["source"] for t in rebuilt} == {"codeio", "humaneval"}
    shipped = tasks_by_id()
    assert rebuilt and [shipped[t["id"]] for t in rebuilt] == rebuilt  # the shipped file holds these tasks, unchanged


def test_tasks_list_shows_the_counts_and_splits() -> None:
    done = subprocess.run([sys.executable, "-m", "meta_agent", "tasks", "list", "--domain", "code", "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {(r["source"], r["split"]): r for r in map(json.loads, done.stdout.splitlines())}
    tasks = load_tasks()
    assert set(rows) == {("codeio", "heldout"), ("codeio", "train"), ("humaneval", "heldout")}
    for (source, split), row in rows.items():
        mine = [t for t in tasks if t["source"] == source and t["split"] == split]
        assert (row["tasks"], row["tests"]) == (len(mine), sum(len(t["tests"]) for t in mine))
    table = subprocess.run([sys.executable, "-m", "meta_agent", "tasks", "list", "--domain", "code"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert "humaneval" in table.stdout and str(TASK_FILE) in table.stdout


# -- parsing answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("response, status, code", [
    ("Sure:\n```python\ndef f(x):\n    return x\n```\nDone.", "ok", "def f(x):\n    return x\n"),
    ("```\ndef g():\n    pass\n```\n```py\ndef f(x):\n    return 1\n```", "ok", "def f(x):\n    return 1\n"),
    ("```python\ndef f(x):\n    return [x,", "truncated", "def f(x):\n    return [x,"),
    ("def f(x):\n    return x\n", "ok", "def f(x):\n    return x\n"),
    ("I would loop over the list.", "no_code", ""),
    ("", "no_code", ""),
])
def test_the_program_is_taken_from_the_last_block_defining_the_entry(response: str, status: str, code: str) -> None:
    assert tuple(extract_program(response, "f")) == (status, code)


def test_the_question_shows_one_example_and_no_hidden_output() -> None:
    task = next(t for t in load_tasks() if t["source"] == "codeio" and t["split"] == "train")
    question = render_question(task)
    assert repr(task["tests"][0]["output"]) in question
    hidden = [repr(t["output"]) for t in task["tests"][1:] if len(repr(t["output"])) >= 8]
    assert not any(h in question for h in hidden)
    # the skeleton's return line has the example's keys and no value, hidden or shown
    keys = ", ".join(f"{json.dumps(k)}: ..." for k in task["tests"][0]["output"])
    assert f"{task['signature']}\n    ...\n    return {{{keys}}}\n```" in question
    # a worked example on a made-up task opens it (the 135M policy solves none of the shortest tasks without);
    # it is no shipped task's solution, and HumanEval keeps its own prompt
    assert question.startswith(WORKED_EXAMPLE) and 'return {"total": a + b}' in WORKED_EXAMPLE
    shipped = load_tasks()
    assert len(shipped) == 231  # 71 CodeI/O + 160 HumanEval: the checks below read every shipped task
    assert [t["id"] for t in shipped if "a + b}" in t["reference"]] == []
    assert [t["id"] for t in shipped if "'total': 5" in repr(t["tests"])] == []
    assert WORKED_EXAMPLE not in render_question(tasks_by_id()["humaneval/0"])
    assert CodeDomain().leaks_answer("the answer is " + repr(task["tests"][2]["output"]), {"task_id": task["id"]}) \
        == (len(repr(task["tests"][2]["output"])) >= 4)


# -- the verifier, the seed harness and its diagnostics (real containers) -----------------------------


@pytest.fixture(scope="module")
def graded_answers(docker_sandbox):
    domain = CodeDomain(sandbox=docker_sandbox)
    task = next(t for t in load_tasks() if t["source"] == "codeio" and t["split"] == "train")
    humaneval = tasks_by_id()["humaneval/0"]
    body = humaneval["reference"][len(humaneval["prompt_code"]):]
    truth = {"task_id": task["id"]}
    example = task["tests"][0]["output"]
    answers = {
        "right": f"```python\n{task['reference']}\n```",
        "hard_coded": f"```python\ndef main_solution(**kwargs):\n    return {example!r}\n```",
        "prints": f"```python\ndef main_solution(**kwargs):\n    print({example!r})\n```",
        "catch_all": "```python\ndef main_solution(**kwargs):\n    try:\n        return undefined\n"
                     "    except Exception:\n        return None\n```",
        "early_exit": "```python\nimport sys\ndef main_solution(**kwargs):\n    sys.exit(0)\n```",
        "syntax": "```python\ndef main_solution(:\n```",
        "truncated": "```python\ndef main_solution(x):\n    return [",
        "no_code": "I do not know.",
    }
    items = [("code/codeio", text, truth) for text in answers.values()]
    items.append(("code/humaneval", f"```python\n{body}\n```", {"task_id": "humaneval/0"}))  # a body only
    verdicts = dict(zip([*answers, "humaneval_body"], domain.verify_batch(items)))
    return task, verdicts


@pytest.mark.docker
def test_the_verifier_pays_only_a_program_that_passes_every_hidden_test(graded_answers) -> None:
    _, verdicts = graded_answers
    scores = {name: score for name, (score, _) in verdicts.items()}
    assert scores == {"right": 1.0, "hard_coded": 0.0, "prints": 0.0, "catch_all": 0.0, "early_exit": 0.0,
                      "syntax": 0.0, "truncated": 0.0, "no_code": 0.0, "humaneval_body": 1.0}
    statuses = {name: (info["status"], info["parse_status"]) for name, (_, info) in verdicts.items()}
    assert statuses["hard_coded"] == ("failed", "ok") and statuses["syntax"] == ("syntax_error", "ok")
    assert statuses["truncated"][1] == "truncated" and statuses["no_code"] == ("no_code", "no_code")
    assert verdicts["hard_coded"][1]["tests"][0] == "passed"  # the shown example, and only it
    assert verdicts["hard_coded"][1]["tests"][1:] == ["failed"] * (len(verdicts["hard_coded"][1]["tests"]) - 1)


@pytest.mark.docker
def test_harness_code_sees_outcomes_but_never_the_expected_outputs(graded_answers) -> None:
    task, verdicts = graded_answers
    for _, info in verdicts.values():
        seen = json.dumps(info["execution"])
        assert "tests" in info["execution"] and "expected" not in seen
        for test in task["tests"][1:]:
            value = json.dumps(test["output"])
            if len(value) >= 8:
                assert value not in seen.replace(json.dumps(task["reference"])[1:-1], "")


def _rows(verdicts: dict) -> list[dict]:
    rows = []
    for i, (name, (score, info)) in enumerate(verdicts.items()):
        rows.append({"traj_id": name, "run_id": "r", "round": 0, "group_id": f"g{i // 4}", "sample_idx": i % 4,
                     "task_id": info.get("task_id", "x"), "data_source": "code/codeio", "domain": "code",
                     "prompt": "p", "response": name, "ground_truth": json.dumps({"task_id": info.get("task_id")}),
                     "split": "train", "verified": score, "verifier_info": json.dumps(info), "reward": score,
                     "response_tokens": 10, "truncated": name == "truncated", "finish_reason": "stop"})
    return rows


@pytest.mark.docker
def test_the_seed_harness_pays_passing_programs_and_its_diagnostics_name_the_hacks(docker_sandbox,
                                                                                  graded_answers) -> None:
    from sandboxes.harness_client import HarnessSession, trajectory_view

    _, verdicts = graded_answers
    views = [trajectory_view(row) for row in _rows(verdicts)]
    with HarnessSession(docker_sandbox, SEED) as session:
        scored = session.score(views, reward_range=CodeDomain.reward_range)
        findings = session.diagnose([v | {"reward": s.reward, "keep": s.keep} for v, s in zip(views, scored)])
    rewards = {s.traj_id: s.reward for s in scored}
    assert rewards == {name: score for name, (score, _) in verdicts.items()}
    hits = {f["name"]: set(f["example_ids"]) for f in findings if f["rate"] > 0}
    # the catch-all answer never reads its arguments either
    assert hits["hard_coded_outputs"] == {"hard_coded", "catch_all"}
    assert hits["print_instead_of_return"] == {"prints"}
    assert hits["catch_all_exceptions"] == {"catch_all"}
    assert hits["early_exit"] == {"early_exit"}
    assert hits["syntax_errors"] == {"syntax", "truncated"} and hits["no_code"] == {"no_code"}
    assert "truncated" in hits["truncated_code"]
    assert "right" not in set().union(*hits.values())


@pytest.mark.docker
def test_the_seed_reward_refuses_a_trajectory_without_execution_feedback(docker_sandbox) -> None:
    from sandboxes.harness_client import HarnessSession, trajectory_view

    row = _rows({"x": (1.0, {"status": "passed", "task_id": "t"})})[0]
    with HarnessSession(docker_sandbox, SEED) as session:
        [scored] = session.score([trajectory_view(row)], reward_range=CodeDomain.reward_range)
    assert scored.reward is None and "no execution feedback" in scored.error


# -- digest and recipes on constructed rows ----------------------------------------------------------


def _code_rows() -> list[dict]:
    outcomes = [("passed", "ok", 1), ("failed", "ok", 0), ("syntax_error", "ok", 0), ("no_code", "no_code", 0),
                ("timeout", "ok", 0), ("forbidden", "ok", 0), ("failed", "truncated", 0), ("failed", "ok", 0)]
    rows = []
    for i, (status, parse, verified) in enumerate(outcomes):
        tests = ["passed"] * 4 if verified else ["passed", "failed", "failed", "failed"]
        execution = {"status": status, "parse_status": parse, "tests": tests, "share": tests.count("passed") / 4}
        info = {"status": status, "parse_status": parse, "verified": verified, "execution": execution}
        rows.append({"traj_id": f"t{i}", "group_id": f"g{i // 4}", "sample_idx": i % 4, "domain": "code",
                     "task_id": f"codeio/{i}", "data_source": "code/codeio", "prompt": "p", "response": "r",
                     "reward": float(verified), "verified": float(verified), "verifier_info": json.dumps(info),
                     "truncated": parse == "truncated", "response_tokens": 50})
    return rows


def test_the_digest_has_a_code_section_with_trusted_failure_modes() -> None:
    from meta_agent.digest import build_digest, render_digest_markdown

    digest = build_digest(0, _code_rows(), metrics=[], findings=[], eval={"heldout_accuracy": 0.1}, previous=[])
    code = digest["code"]
    assert (code["n_graded"], code["pass_rate"], code["mean_test_share"]) == (8, 1 / 8, (4 + 7 * 1) / 4 / 8)
    assert code["by_status"] == {"failed": 3, "forbidden": 1, "no_code": 1, "passed": 1, "syntax_error": 1,
                                 "timeout": 1}
    assert (code["syntax_error_rate"], code["no_code_rate"], code["truncated_rate"], code["forbidden_rate"]) == \
        (1 / 8, 1 / 8, 1 / 8, 1 / 8)
    modes = {m["name"]: m for m in digest["failure_modes"]}
    assert modes["code_forbidden"]["severity"] == "error" and modes["code_forbidden"]["examples"][0]["traj_id"] == "t5"
    assert "swe" not in digest  # code rows carry execution feedback too; they are not SWE grades
    markdown = render_digest_markdown(digest | {"domain": "code"})
    assert "## Code grading" in markdown and "| pass rate (every hidden test) | 0.125 of 8 graded |" in markdown


def test_code_recipes_fire_on_their_failure_modes_and_not_on_other_domains() -> None:
    from meta_agent.agents.code_recipes import code_format_example as format_example
    from meta_agent.agents.code_recipes import code_return_prompt as return_prompt
    from meta_agent.agents.code_recipes import code_share_credit as share_credit
    from meta_agent.agents.recipes import Change, HarnessFiles

    files = HarnessFiles(config_text=(SEED / "harness.yaml").read_text(), reward=(SEED / "reward.py").read_text(),
                         user_prompt=(SEED / "prompts" / "user.j2").read_text())
    digest = {"domain": "code", "zero_variance_share": 1.0, "verified_mean": 0.0,
              "code": {"no_code_rate": 0.3, "truncated_rate": 0.2, "syntax_error_rate": 0.1, "mean_test_share": 0.2},
              "failure_modes": [{"name": "print_instead_of_return", "source": "diagnostics", "rate": 0.25}]}
    changes = [rule(digest, files) for rule in (format_example, return_prompt, share_credit)]
    assert [type(c) for c in changes] == [Change] * 3, changes
    assert "recipe: code-format-example" in changes[0].files["prompts/user.j2"]
    assert "do not print it" in changes[1].files["prompts/user.j2"]
    assert "SHARE_WEIGHT = 0.2" in changes[2].files["reward.py"]
    assert [type(rule({"domain": "math"}, files))
            for rule in (format_example, return_prompt, share_credit)] == [str] * 3
    quiet = digest | {"code": digest["code"] | {"no_code_rate": 0.0, "truncated_rate": 0.0}, "failure_modes": []}
    assert "not above" in format_example(quiet, files) and "no hack finding" in return_prompt(quiet, files)


# -- end to end through the real CLI -----------------------------------------------------------------


@pytest.mark.docker
@pytest.mark.slow
def test_one_code_round_end_to_end_through_the_cli(docker_sandbox, tmp_path: Path) -> None:
    """Rollouts of the local model on code tasks, grading in containers, archive, digest with its code
    section, the recipe agent, backtests of its branches in Docker and the gate: one round at tiny sizes."""
    import yaml

    from harness_repo.repo import HarnessRepo
    from meta_agent.config import BacktestSettings, EvaluationSettings
    from meta_agent.run_dir import RunDir, write_json_atomic
    from rl_backend.archive import Archive

    run = tmp_path / "run"
    rd = RunDir(run)
    run.mkdir()
    repo = HarnessRepo.create(rd.harness, "code")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update({"steps_per_round": 1, "prompts_per_step": 1, "group_size": 2,
                           "max_completion_length": 32})
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Tiny knobs for tests")
    # a run folder prepared the way tests/test_loop.py does, for a 2-task exam of 32 tokens
    write_json_atomic(rd.run_json, {"run_id": "run", "domain": "code", "backend": "local", "agent": "recipe",
                                    "rounds": 1, "candidates": 1, "model_path": None,
                                    "backtest": BacktestSettings(sample_groups=4).model_dump(),
                                    "evaluation": EvaluationSettings(heldout_size=2,
                                                                     heldout_max_tokens=32).model_dump()})
    proc = subprocess.run([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(run)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = Archive(run / "archive").rows(run_id="run", round=0)
    train = [r for r in rows if r["split"] == "train"]
    assert len(train) == 2 and {r["domain"] for r in rows} == {"code"}
    for row in train:  # every answer was judged against its task's hidden tests, whatever it held
        info = row["verifier_info"]
        execution = (json.loads(info) if isinstance(info, str) else info)["execution"]
        assert execution["tests_total"] == len(tasks_by_id()[row["task_id"]]["tests"]), execution
    digest = json.loads((run / "rounds" / "0" / "digest.json").read_text())
    assert digest["code"]["n_graded"] == 2 and "swe" not in digest
    assert "## Code grading" in (run / "rounds" / "0" / "digest.md").read_text()
    transcript = json.loads((run / "rounds" / "0" / "recipe_agent.json").read_text())
    assert ({"code-format-example", "code-return-prompt", "code-share-credit"}
            <= {e["rule"] for e in transcript["rules"]})
    decided = [(iv.branch, iv.status) for iv in HarnessRepo.open(run / "harness").interventions() if iv.round == 0]
    # 32-token answers are all cut off, so the truncation recipe leads; its backtest merges it
    assert decided == [("iv/r0-truncation", "merged")]


def test_the_seed_folder_is_complete() -> None:
    names = {p.relative_to(SEED).as_posix() for p in SEED.rglob("*") if p.is_file()}
    assert {"harness.yaml", "reward.py", "filters.py", "JOURNAL.md", "prompts/system.j2", "prompts/user.j2",
            "diagnostics/failures.py", "diagnostics/hacks.py", "skills/README.md"} <= names


def test_references_run_under_the_hash_seed_they_are_given() -> None:
    """-I would make the interpreter ignore PYTHONHASHSEED; the build's outputs are those of seed 0."""
    from domains.code_tasks import run_reference

    spec = {"mode": "humaneval", "code": "def f():\n    return hash('abc')\n", "entry": "f", "inputs": [[]]}
    seeded = [int(subprocess.run([sys.executable, "-c", "print(hash('abc'))"], env={"PYTHONHASHSEED": seed},
                                 capture_output=True, text=True, check=True).stdout) for seed in ("0", "1")]
    assert [run_reference(spec, 0)[0]["output"], run_reference(spec, 1)[0]["output"]] == seeded
    assert seeded[0] != seeded[1]
