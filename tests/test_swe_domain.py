"""The SWE domain: answer parsing, prompts that never show the fix, the seed harness in its real runtime,
and (with the shipped tasks) trusted grading and a few real TRL steps of patch mode."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from domains.swe import SweDomain, added_lines, render_question
from sandboxes.harness_client import HarnessSession, trajectory_view
from swe_env.patch_format import parse_response

SEED = Path(__file__).parent.parent / "harness_repo" / "seeds" / "swe"
SOURCE = "def total(items):\n    s = 0\n    for i in items:\n        s += i.price\n    return s\n"
SOURCES = {"shop/cart.py": SOURCE}
EDIT = ("shop/cart.py\n<<<<<<< SEARCH\n        s += i.price\n=======\n        s += i.price * i.qty\n"
        ">>>>>>> REPLACE\n")
EXPECTED_DIFF = ("--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1,5 +1,5 @@\n def total(items):\n     s = 0\n"
                 "     for i in items:\n-        s += i.price\n+        s += i.price * i.qty\n     return s\n")


# -- parsing answers (trusted, adversarial input) -------------------------------------------------


def test_search_replace_becomes_the_unified_diff_worked_out_by_hand() -> None:
    parsed = parse_response("Here is the fix:\n" + EDIT, SOURCES)
    assert (parsed.status, parsed.format, parsed.patch) == ("ok", "search_replace", EXPECTED_DIFF)


def test_fenced_diff_is_taken_as_written() -> None:
    parsed = parse_response(f"The bug is the quantity.\n```diff\n{EXPECTED_DIFF}```\nDone.", SOURCES)
    assert (parsed.status, parsed.format, parsed.patch) == ("ok", "diff", EXPECTED_DIFF)


@pytest.mark.parametrize("answer, status, why", [
    ("", "empty", "empty"),
    ("I think the bug is in total().", "malformed", "no unified diff"),
    # a SEARCH text found more than once (here a bare newline: 5 lines) would make the edit mean several things
    ("shop/cart.py\n<<<<<<< SEARCH\n\n=======\nx\n>>>>>>> REPLACE\n", "malformed", "occurs 5 times"),
    ("shop/cart.py\n<<<<<<< SEARCH\nnot in the file\n=======\nx\n>>>>>>> REPLACE\n", "malformed", "occurs 0 times"),
    # an edit of a file the prompt never showed (the tests, say) is refused, not created
    ("tests/conftest.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n", "malformed", "not a file shown"),
    # a diff that writes outside the repository
    ("--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "malformed", "unsafe or odd path"),
    ("--- /etc/passwd\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n", "malformed", "unsafe or odd path"),
    ("--- a/shop/cart.py\n+++ b/shop/cart.py\n-a\n+b\n", "malformed", "no hunk"),
    ("shop/cart.py\n<<<<<<< SEARCH\n        s += i.price\n=======\n        s += i.price\n>>>>>>> REPLACE\n",
     "empty", "change nothing"),
])
def test_bad_answers_get_their_own_status(answer: str, status: str, why: str) -> None:
    parsed = parse_response(answer, SOURCES)
    assert (parsed.status, parsed.patch) == (status, "")
    assert why in parsed.detail


def test_an_answer_longer_than_any_patch_is_malformed_without_being_scanned() -> None:
    parsed = parse_response("```diff\n" + "+x\n" * 100_000 + "```", SOURCES)
    assert parsed.status == "malformed" and "characters" in parsed.detail


# -- prompts never show the fix ------------------------------------------------------------------


def test_prompt_window_shows_the_buggy_lines_and_none_of_the_added_ones() -> None:
    source = "".join(f"line{i} = {i}\n" for i in range(1, 101))
    gold = ("--- a/m.py\n+++ b/m.py\n@@ -50,1 +50,1 @@\n-line50 = 50\n+line50 = 'fifty, the fixed value'\n")
    question = render_question("Line 50 is wrong.", {"m.py": source}, gold)
    # 8 lines of context either side of line 50: lines 42..58
    assert "m.py (lines 42-58)" in question
    assert "line41 = 41" not in question and "line42 = 42" in question and "line58 = 58" in question
    assert "line59 = 59" not in question
    domain = SweDomain()
    truth = {"task_id": "t", "gold_patch": gold}
    assert not domain.leaks_answer(question, truth)
    # a harness prompt that prints the fixed line leaks it, wherever it sits in the text
    assert domain.leaks_answer(question + "\n    line50 = 'fifty, the fixed value'  \n", truth)


def test_short_added_lines_are_too_common_to_count_as_a_leak() -> None:
    gold = "--- a/m.py\n+++ b/m.py\n@@ -1 +1,2 @@\n-x\n+return x\n+return compute(x, strict=True)\n"
    assert added_lines(gold) == ["return compute(x, strict=True)"]


def test_task_mix_refuses_unknown_names_and_knobs_before_any_generation() -> None:
    from harness_repo.contract import TaskSpec

    with pytest.raises(ValueError, match="no task specs|at least one"):
        SweDomain().check_task_specs([])
    with pytest.raises(ValueError, match="take no config"):
        SweDomain().check_task_specs([TaskSpec(name="all", config={"max_terms": 3})])


# -- the seed harness, run by the real runtime in Docker -----------------------------------------


def _view(traj_id: str, execution: dict, group: str = "g0") -> dict:
    row = {"traj_id": traj_id, "run_id": "r", "round": 0, "group_id": group, "sample_idx": 0, "task_id": "t",
           "data_source": "swe/pkg", "prompt": "fix it", "response": "...", "split": "train",
           "ground_truth": {"task_id": "t", "gold_patch": EXPECTED_DIFF},
           "verifier_info": json.dumps({"status": execution.get("status"), "execution": execution})}
    return trajectory_view(row)


def _execution(status: str, patch: str = "", **extra) -> dict:
    return {"status": status, "parse_status": "ok", "patch": patch, "touched_tests": [], "tests_passed": 0,
            "tests_total": 0, "failed_tests": []} | extra


TEST_EDIT = ("--- a/shop/cart.py\n+++ b/shop/cart.py\n@@ -1 +1 @@\n-a\n+b\n"
             "--- a/shop/tests/test_cart.py\n+++ b/shop/tests/test_cart.py\n@@ -1 +1 @@\n-assert total() == 3\n+pass\n")
CONFTEST = "--- /dev/null\n+++ b/shop/conftest.py\n@@ -0,0 +1 @@\n+collect_ignore = ['tests']\n"


@pytest.mark.docker
def test_seed_harness_rewards_diagnoses_and_filters_in_its_sandbox(docker_sandbox, tmp_path: Path) -> None:
    harness = shutil.copytree(SEED, tmp_path / "harness")
    views = [
        _view("resolved", _execution("resolved", EXPECTED_DIFF)),
        # edits a test file; the grader restored it, and the status says so
        _view("edits-test", _execution("unresolved", TEST_EDIT, touched_tests=["shop/tests/test_cart.py"])),
        # adds a conftest.py inside the package: the grader did not list it, the diagnostic still flags it
        _view("adds-conftest", _execution("unresolved", CONFTEST)),
        _view("malformed", _execution("malformed", parse_status="malformed")),
        _view("no-apply", _execution("patch_failed", "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n")),
        _view("step-limit", _execution("unresolved", exit_status="step_limit", actions=["ls"] * 3), group="g1"),
    ]
    with HarnessSession(docker_sandbox, harness) as session:
        scored = session.score(views, reward_range=SweDomain.reward_range)
        findings = {f["name"]: f for f in session.diagnose([v | {"reward": s.reward, "keep": s.keep}
                                                            for v, s in zip(views, scored)])}
    assert [s.reward for s in scored] == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert [s.keep for s in scored] == [True, True, True, True, True, False]  # the limit-stopped one is masked
    edits = findings["test_edits"]
    assert (edits["severity"], edits["rate"], sorted(edits["example_ids"])) == \
        ("error", pytest.approx(2 / 6), ["adds-conftest", "edits-test"])
    assert findings["format_errors"]["rate"] == pytest.approx(1 / 6)
    assert findings["patch_does_not_apply"]["example_ids"] == ["no-apply"]
    # one agent trajectory, which ran `ls` three times
    assert findings["repeated_commands"]["rate"] == 1.0


@pytest.mark.docker
def test_seed_reward_refuses_a_trajectory_without_execution_feedback(docker_sandbox, tmp_path: Path) -> None:
    harness = shutil.copytree(SEED, tmp_path / "harness")
    row = {"traj_id": "bare", "run_id": "r", "round": 0, "group_id": "g", "sample_idx": 0, "task_id": "t",
           "data_source": "swe/pkg", "prompt": "p", "response": "r", "split": "train", "ground_truth": {},
           "verifier_info": json.dumps({"status": "resolved"})}  # a verdict, but no execution entry
    with HarnessSession(docker_sandbox, harness) as session:
        [scored] = session.score([trajectory_view(row)], reward_range=SweDomain.reward_range)
    assert scored.reward is None and "no execution feedback" in scored.error and not scored.keep


# -- one round end to end through the real CLI: patch mode trained for real (TRL on CPU, the harness in its
# sandbox, grading in task containers), then the digest, the recipe agent and the gate.  The run is shared by the
# tests below (read-only): one real round asserted from the backend's side and from the loop's.


@pytest.fixture(scope="module")
def swe_round(docker_sandbox, swe_cache, module_dir: Path) -> Path:
    """A one-round SWE run through the CLI at tiny sizes: 2 TRL steps x 1 prompt x 2 completions, 24-token
    answers, 2 candidates backtested on 4 groups."""
    import subprocess
    import sys

    import yaml

    from harness_repo.repo import HarnessRepo
    from swe_env.build import check_spec
    from swe_env.cross_check import shipped_specs

    for spec in shipped_specs():  # once per test session (swe_cache)
        check_spec(spec, log=lambda _: None)
    source = module_dir / "tiny"
    repo = HarnessRepo.create(source / "harness", "swe")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update({"steps_per_round": 2, "max_completion_length": 24})
    assert (config["grpo"]["prompts_per_step"], config["grpo"]["group_size"]) == (1, 2)  # the seed's: 2 rows a step
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "Tiny knobs for tests")
    run = module_dir / "run"
    proc = subprocess.run([sys.executable, "-m", "meta_agent", "--domain", "swe", "--from-run", str(source),
                           "--from-branch", "main", "--run-dir", str(run), "--rounds", "1", "--candidates", "2",
                           "--sample-groups", "4"], cwd=Path(__file__).parent.parent, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first of the two runs the shared round (swe_round)
def test_patch_mode_trains_real_trl_steps_and_archives_graded_rows(swe_round: Path) -> None:
    from rl_backend.archive import Archive, validate_rows
    from swe_env.checked import shipped_tasks

    train_dir = swe_round / "rounds" / "0" / "train"
    metrics = [json.loads(line) for line in (train_dir / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    archive = Archive(swe_round / "archive")
    rows = archive.read(run_id="run", round=0).to_pylist()  # as stored: the JSON columns as text
    train = [r for r in rows if r["split"] == "train"]
    heldout = [r for r in rows if r["split"] == "heldout"]
    exam = json.loads((swe_round / "run.json").read_text())["evaluation"]["heldout_size"]
    assert len(train) == 4 and len(heldout) == min(exam, len(shipped_tasks("heldout"))) > 0
    validate_rows(rows, "swe patch mode test")
    for row in train:
        info = json.loads(row["verifier_info"])
        # 24 tokens of a 135M model is never a resolving patch; whatever it wrote was parsed and judged
        assert row["verified"] == 0.0 and info["status"] in ("malformed", "empty_patch", "patch_failed",
                                                             "unresolved"), \
            info
        assert info["execution"]["status"] == info["status"]
        assert row["reward"] == 0.0  # the seed pays only resolved patches
        assert row["task_id"] in {t.id for t in shipped_tasks("train")}
    assert {r["task_id"] for r in heldout} <= {t.id for t in shipped_tasks("heldout")}
    assert (train_dir / "policy" / "model.safetensors").exists()


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first of the two runs the shared round (swe_round)
def test_one_swe_round_end_to_end_through_the_cli(swe_round: Path) -> None:
    """Patch-mode rollouts of the local model, grading in task containers, archive, digest, the recipe agent's
    SWE proposals, their backtests in Docker and the gate's decision: one round at tiny sizes."""
    from harness_repo.repo import HarnessRepo
    from rl_backend.archive import Archive

    run = swe_round
    rows = Archive(run / "archive").rows(run_id="run", round=0)
    train = [r for r in rows if r["split"] == "train"]
    assert len(train) == 4 and {r["domain"] for r in rows} == {"swe"}  # 2 steps x 1 prompt x 2 completions
    assert all(r["verified"] == 0.0 for r in train)
    digest = json.loads((run / "rounds" / "0" / "digest.json").read_text())
    assert digest["swe"]["n_graded"] == 4 and digest["swe"]["resolve_rate"] == 0.0
    assert "## SWE grading" in (run / "rounds" / "0" / "digest.md").read_text()
    transcript = json.loads((run / "rounds" / "0" / "recipe_agent.json").read_text())
    assert {"swe-format-example", "swe-similarity-credit"} <= {entry["rule"] for entry in transcript["rules"]}
    decided = [(iv.branch, iv.status) for iv in HarnessRepo.open(run / "harness").interventions() if iv.round == 0]
    # both proposals are backtested and merged: the format example and the truncation recipe (24-token answers)
    assert decided == [("iv/r0-swe-format-example", "merged"), ("iv/r0-truncation", "merged")]


@pytest.mark.docker
@pytest.mark.slow
def test_gold_changes_answered_as_fenced_diffs_verify_and_test_tricks_do_not(docker_sandbox, swe_cache) \
        -> None:
    from swe_env.build import check_spec
    from swe_env.cross_check import shipped_specs

    for spec in shipped_specs():  # once per test session (swe_cache)
        check_spec(spec, log=lambda _: None)
    domain = SweDomain()
    tasks = domain.tasks("train", domain.eval_specs, len(domain.task_names), 0)
    tasks = list({t.task_id: t for t in tasks}.values())
    skip_all = "--- /dev/null\n+++ b/conftest.py\n@@ -0,0 +1 @@\n+collect_ignore_glob = ['*']\n"
    answers = [(t.data_source, f"Fix:\n```diff\n{t.ground_truth['gold_patch']}```\n", t.ground_truth) for t in tasks]
    answers += [(t.data_source, f"```diff\n{skip_all}```", t.ground_truth) for t in tasks]
    verdicts = domain.verify_batch(answers)
    assert [s for s, _ in verdicts] == [1.0] * len(tasks) + [0.0] * len(tasks), [i["detail"] for _, i in verdicts]
    assert {i["status"] for _, i in verdicts[len(tasks):]} == {"unresolved"}
    assert all(i["touched_tests"] == ["conftest.py"] for _, i in verdicts[len(tasks):])


@pytest.mark.docker
def test_a_harness_cannot_put_a_held_out_task_in_its_training_mix(docker_sandbox, swe_cache) -> None:
    from harness_repo.contract import TaskSpec
    from swe_env.build import check_spec
    from swe_env.checked import shipped_tasks
    from swe_env.cross_check import shipped_specs

    for spec in shipped_specs():  # once per test session (swe_cache)
        check_spec(spec, log=lambda _: None)
    heldout = shipped_tasks("heldout")[0]
    with pytest.raises(ValueError, match=f"unknown task '{heldout.id}'"):
        SweDomain().check_task_specs([TaskSpec(name=heldout.id)])
    assert {t.split for t in SweDomain().tasks("heldout", [TaskSpec(name="all")], 100, 0)} == {"heldout"}
    assert len(SweDomain().tasks("heldout", [TaskSpec(name="all")], 100, 0)) == len(shipped_tasks("heldout"))
