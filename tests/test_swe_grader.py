"""The trusted SWE grader on a real task (sqlparse 0.5.4 -> 0.5.5), in real task containers.

Each hostile patch is what an adversary who read ``swe_env/grade.py`` would try: weaken the test,
add a conftest that forces passes, rewrite pytest's reports from the source code, exit early,
loop forever.  None may be resolved.
"""

from __future__ import annotations

import os
from pathlib import Path

import docker
import pytest

from swe_env.build import check_spec
from swe_env.grade import ContainerCap, grade, restore_tests
from swe_env.spec import SPECS_DIR, load_spec
from swe_env.tasks import SweTask, gold_patch, task_from

TASK_ID = "sqlparse-0.5.5-begin-transaction"
F2P = "tests/test_split.py::test_split_begin_transaction"
SPLITTER = "sqlparse/engine/statement_splitter.py"


@pytest.fixture(scope="module")
def task(swe_cache, docker_sandbox) -> SweTask:
    record = check_spec(load_spec(SPECS_DIR / f"{TASK_ID}.yaml"), log=lambda _: None)
    assert record.checked, record.reason
    return task_from(load_spec(SPECS_DIR / f"{TASK_ID}.yaml"), tuple(record.pass_to_pass))


def new_file(path: str, lines: list[str]) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1,{len(lines)} @@\n{body}")


def prepend_to_source(task: SweTask, path: str, lines: list[str]) -> str:
    """A diff that inserts ``lines`` before the first line of ``path`` in the buggy repo."""
    from swe_env.tasks import buggy_sources

    first = buggy_sources(task)[path].splitlines()[0] if path in task.source_files else None
    assert first is not None
    body = "".join(f"+{line}\n" for line in lines)
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -1,1 +1,{len(lines) + 1} @@\n{body} {first}\n")


@pytest.mark.docker
def test_gold_patch_resolves(task):
    result = grade(task, gold_patch(task))
    assert (result.status, result.resolved, result.touched_tests) == ("resolved", True, [])
    assert result.tests[F2P] == "passed" and len(result.tests) == 43


@pytest.mark.docker
def test_empty_patch_has_its_own_status(task):
    result = grade(task, "  \n")
    assert (result.status, result.resolved) == ("empty_patch", False)


@pytest.mark.docker
def test_patch_that_does_not_apply_is_patch_failed(task):
    # The gold change with one context line altered: git apply must refuse it.
    broken = gold_patch(task).replace("         # BEGIN and CASE/WHEN both end with END",
                                      "         # BEGIN and CASE/WHEN both end with ENDING", 1)
    assert broken != gold_patch(task)
    result = grade(task, broken)
    assert (result.status, result.resolved) == ("patch_failed", False)
    assert "git apply" in result.detail


@pytest.mark.docker
@pytest.mark.parametrize("path", ["../outside.py", "/etc/passwd", ".git/config"])
def test_patch_outside_the_repo_is_refused(task, path):
    result = grade(task, new_file(path, ["x = 1"]))
    assert result.status == "patch_failed" and "outside the repo" in result.detail


@pytest.mark.docker
def test_symlink_patch_is_refused(task):
    patch = ("diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n"
             "@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n")
    result = grade(task, patch)
    assert result.status == "patch_failed" and "symlink" in result.detail


@pytest.mark.docker
def test_weakened_test_is_restored_and_named(task):
    # The patch is written against the repo the policy sees (the old release's tests): it weakens the
    # first test there, and leaves the bug in place.  That file is put back, then the graded one laid in.
    test_file = "tests/test_split.py"
    from swe_env.tasks import agent_repo

    text = (agent_repo(task) / test_file).read_text().splitlines()
    index = next(i for i, line in enumerate(text) if line.startswith("def test_"))
    patch = (f"diff --git a/{test_file} b/{test_file}\n--- a/{test_file}\n+++ b/{test_file}\n"
             f"@@ -{index + 1},2 +{index + 1},3 @@\n {text[index]}\n+    return\n {text[index + 1]}\n")
    result = grade(task, patch)
    assert (result.status, result.resolved) == ("unresolved", False)
    assert result.touched_tests == [test_file]
    assert result.tests[F2P] == "failed"


@pytest.mark.docker
def test_new_conftest_forcing_passes_is_removed(task):
    conftest = new_file("conftest.py", [
        "import pytest",
        "@pytest.hookimpl(hookwrapper=True)",
        "def pytest_runtest_makereport(item, call):",
        "    outcome = yield",
        "    report = outcome.get_result()",
        "    report.outcome = 'passed'",
    ])
    result = grade(task, conftest)
    assert (result.status, result.resolved) == ("unresolved", False)
    assert result.touched_tests == ["conftest.py"]
    assert result.tests[F2P] == "failed"


@pytest.mark.docker
def test_source_that_rewrites_pytest_reports_is_not_resolved(task):
    # At import of the module under test, make every report a pass (an in-process "plugin").
    patch = prepend_to_source(task, SPLITTER, [
        "import _pytest.reports as _reports",
        "_original = _reports.TestReport.from_item_and_call",
        "def _forced(cls, item, call):",
        "    report = _original.__func__(cls, item, call)",
        "    report.outcome, report.longrepr = 'passed', None",
        "    return report",
        "_reports.TestReport.from_item_and_call = classmethod(_forced)",
    ])
    result = grade(task, patch, reach_check=False)  # the layers behind the static check
    assert (result.status, result.resolved) == ("tampered", False)
    assert any("_pytest.reports.TestReport.from_item_and_call" in f for f in result.findings), result.findings


@pytest.mark.docker
def test_source_that_registers_a_plugin_at_import_is_not_resolved(task):
    patch = prepend_to_source(task, SPLITTER, [
        "import gc, pytest, _pytest.config",
        "class _Force:",
        "    @pytest.hookimpl(hookwrapper=True)",
        "    def pytest_runtest_makereport(self, item, call):",
        "        outcome = yield",
        "        outcome.get_result().outcome = 'passed'",
        "for _c in [o for o in gc.get_objects() if isinstance(o, _pytest.config.Config)]:",
        "    _c.pluginmanager.register(_Force())",
    ])
    result = grade(task, patch, reach_check=False)  # the layers behind the static check
    assert (result.status, result.resolved) == ("tampered", False)
    assert any(f.startswith("audit: gc.get_objects") for f in result.findings), result.findings


@pytest.mark.docker
def test_os_exit_zero_at_import_is_not_resolved(task):
    patch = prepend_to_source(task, SPLITTER, ["import os", "os._exit(0)"])
    result = grade(task, patch)
    assert (result.status, result.resolved) == ("error", False)
    assert set(result.tests.values()) == {"missing"}


@pytest.mark.docker
def test_skiptest_at_import_is_not_resolved(task):
    patch = prepend_to_source(task, SPLITTER, ["import unittest", "raise unittest.SkipTest('nothing to see')"])
    result = grade(task, patch, reach_check=False)  # the layers behind the static check
    assert not result.resolved and result.tests[F2P] in ("skipped", "missing", "error")


@pytest.mark.docker
def test_infinite_loop_times_out_and_leaves_no_container(task):
    patch = prepend_to_source(task, SPLITTER, ["while True:", "    pass"])
    result = grade(task, patch, timeout_s=10)
    assert (result.status, result.resolved) == ("timeout", False)
    mine = docker.from_env().containers.list(all=True, filters={"label": f"meta_agent.owner_pid={os.getpid()}",
                                                                 "ancestor": task.image})
    assert mine == []


def test_container_cap_admits_no_more_than_its_limit():
    import threading

    inside, release = threading.Semaphore(0), threading.Event()

    def worker() -> None:
        with ContainerCap.slot():
            inside.release()
            release.wait()

    ContainerCap.set_limit(2)
    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert inside.acquire(timeout=60) and inside.acquire(timeout=60)   # two get in
        third_got_in = inside.acquire(timeout=1)                            # the third must wait
        assert ContainerCap.active() == 2
    finally:
        release.set()
        for thread in threads:
            thread.join()
    assert not third_got_in and inside.acquire(timeout=60)  # and gets its slot once one is free


@pytest.mark.docker
def test_source_that_writes_its_own_report_and_exits_is_not_resolved(task):
    # The old design's report file and format, written by the code under test before it exits: nothing reads
    # /out any more, and the run that exited early never sent its done record.
    forged = {"outcomes": {node: "passed" for node in [*task.fail_to_pass, *task.pass_to_pass]},
              "collect_errors": [], "tampered": [], "exit_status": 0, "nonce": "0" * 32}
    patch = prepend_to_source(task, SPLITTER, [
        "import json, os",
        f"json.dump({forged!r}, open('/out/report.json', 'w'))",
        "os._exit(0)",
    ])
    result = grade(task, patch)
    assert (result.status, result.resolved) == ("error", False)
    assert "ended without their done record" in result.detail


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_restore_protects_test_folders_whole_and_keeps_source_changes(tmp_path):
    original = _tree(tmp_path / "a", {"pkg/__init__.py": "x = 1\n", "tests/test_x.py": "def test(): assert 0\n",
                                      "tests/files/data.sql": "select 1;\n", "setup.cfg": "[tool:pytest]\n"})
    repo = _tree(tmp_path / "b", {"pkg/__init__.py": "x = 2\n", "tests/test_x.py": "def test(): pass\n",
                                  "tests/files/data.sql": "select 2;\n", "tests/helper.py": "",
                                  "pkg/conftest.py": "", "json.py": "", "setup.cfg": "[tool:pytest]\naddopts=-x\n"})
    touched = restore_tests(original, repo, ("tests/test_x.py",))
    assert touched == ["json.py", "pkg/conftest.py", "setup.cfg", "tests/files/data.sql", "tests/helper.py",
                       "tests/test_x.py"]
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()) == [
        "pkg/__init__.py", "setup.cfg", "tests/files/data.sql", "tests/test_x.py"]
    assert (repo / "pkg/__init__.py").read_text() == "x = 2\n"
    assert (repo / "tests/test_x.py").read_text() == "def test(): assert 0\n"


def test_restore_leaves_a_package_alone_when_a_test_module_sits_beside_its_source(tmp_path):
    original = _tree(tmp_path / "a", {"pkg/__init__.py": "x = 1\n", "pkg/test_pkg.py": "def test(): assert 0\n"})
    repo = _tree(tmp_path / "b", {"pkg/__init__.py": "x = 2\n", "pkg/test_pkg.py": "def test(): pass\n"})
    assert restore_tests(original, repo, ("pkg/test_pkg.py",)) == ["pkg/test_pkg.py"]
    assert (repo / "pkg/__init__.py").read_text() == "x = 2\n"
