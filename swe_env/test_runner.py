"""Runs pytest inside a task container and records each test's own outcome (trusted; not imported on the host).

The grader mounts this file and ``args.json`` read-only at ``/grader`` and starts
``python3 -I -B /grader/test_runner.py``: isolated mode, so the repo is not on ``sys.path`` and no
``PYTHON*`` variable, ``sitecustomize`` or user site from the repo is honoured at start-up.  pytest
and this recorder are imported before any repo code; the repo goes at the *end* of ``sys.path`` so
a module the patch adds cannot shadow the standard library.  Plugin autoload is off (no entry
points from an ``.egg-info`` the patch adds), the cache provider is off and ``addopts`` is
overridden.  The report is written only after pytest returns: a process that exits early leaves
no report, so every test counts as missing.  Code under test runs in this process and can still
forge what it likes (see the grader's docstring); the recorder flags the tampering it can see.
"""

import json
import os
import sys

ARGS = json.load(open("/grader/args.json"))
for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
    os.environ.pop(name, None)
os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
sys.path.insert(0, ARGS["site"])

import _pytest.reports  # noqa: E402
import _pytest.runner  # noqa: E402
import pluggy._callers  # noqa: E402
import pytest  # noqa: E402

_GUARDED = {
    "runner.runtestprotocol": (_pytest.runner, "runtestprotocol"),
    "runner.call_and_report": (_pytest.runner, "call_and_report"),
    "runner.CallInfo.from_call": (_pytest.runner.CallInfo, "from_call"),
    "reports.TestReport.from_item_and_call": (_pytest.reports.TestReport, "from_item_and_call"),
    "pluggy._multicall": (pluggy._callers, "_multicall"),
}


class Recorder:
    """Per-test outcome from the test's own reports: setup, call, teardown."""

    def __init__(self) -> None:
        self.outcomes: dict[str, str] = {}
        self.collect_errors: list[str] = []
        self.tampered: list[str] = []
        self.originals = {name: vars(owner)[attr] for name, (owner, attr) in _GUARDED.items()}
        self.plugins_at_start: set[int] | None = None

    def _check_untouched(self) -> None:
        for name, (owner, attr) in _GUARDED.items():
            if vars(owner).get(attr) is not self.originals[name] and name not in self.tampered:
                self.tampered.append(name)

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session) -> None:
        self.plugins_at_start = {id(p) for p in session.config.pluginmanager.get_plugins()}

    @pytest.hookimpl(tryfirst=True)
    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.collect_errors.append(report.nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report) -> None:
        self._check_untouched()
        node, previous = report.nodeid, self.outcomes.get(report.nodeid)
        if report.when == "setup":
            self.outcomes[node] = "error" if report.failed else "skipped" if report.skipped else "setup-ok"
        elif report.when == "call":
            if previous == "setup-ok":
                self.outcomes[node] = "passed" if report.passed else "failed" if report.failed else "skipped"
        elif report.failed:  # teardown: a failing teardown spoils a pass
            self.outcomes[node] = "error"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session) -> None:
        self._check_untouched()
        if self.plugins_at_start is None:
            return
        repo = ARGS["repo"].rstrip("/") + "/"
        for plugin in session.config.pluginmanager.get_plugins():
            path = str(getattr(plugin, "__file__", ""))
            is_conftest = path.startswith(repo) and path.endswith("/conftest.py")  # restored by the grader
            if id(plugin) not in self.plugins_at_start and not is_conftest:
                name = f"{type(plugin).__name__} {path or plugin!r:.80}"
                self.tampered.append(f"plugin {name} registered while tests ran")


def take_nonce() -> str:
    """The host's one-time token, read and deleted before any repo code runs.

    Code under test can find /out/report.json; a report it writes itself lacks the token unless
    that code digs it out of this process's memory (it lives only in ``main``'s frame).
    """
    with open(ARGS["nonce_file"]) as f:
        nonce = f.read().strip()
    os.unlink(ARGS["nonce_file"])
    return nonce


def main(nonce: str) -> None:
    recorder = Recorder()
    os.chdir(ARGS["repo"])
    sys.path.append(ARGS["repo"])
    if os.path.isdir(os.path.join(ARGS["repo"], "src")):  # a src layout: the package lives under src/
        sys.path.append(os.path.join(ARGS["repo"], "src"))
    exit_status = pytest.main(
        ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", ARGS["repo"], "--import-mode=append",
         "-q", "--tb=line",
         "--continue-on-collection-errors", *ARGS["node_ids"]],
        plugins=[recorder],
    )
    outcomes = {node: ("error" if value == "setup-ok" else value) for node, value in recorder.outcomes.items()}
    report = {"nonce": nonce, "outcomes": outcomes, "collect_errors": recorder.collect_errors,
              "tampered": recorder.tampered, "exit_status": int(exit_status)}
    partial = ARGS["report"] + ".part"
    with open(partial, "w") as f:
        json.dump(report, f)
    os.replace(partial, ARGS["report"])


main(take_nonce())
