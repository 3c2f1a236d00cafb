"""Runs pytest inside a task container and streams each test's outcome as it happens (never imported on the host).

The trusted parent (``execution/inbox/grader_parent.py``) starts
``python3 -I -B /grader/test_runner.py ARGS.json KEY_FD RECORD_FD``: isolated mode, so the repo
is not on ``sys.path`` and no ``PYTHON*`` variable or ``sitecustomize`` from the repo is
honoured.  Before any repo code runs, in this order:

1. the record channel is opened (``grader_channel``: MAC'd, ratcheting, seq-numbered records
   over a pipe only the parent reads);
2. pytest, pluggy and every default pytest plugin are imported from the test-tool site;
3. the identity of every attribute of those modules, their classes and ``builtins`` is
   snapshotted (``grader_identity``);
4. the audit hook is installed (``grader_audit``): gc, frame introspection from repo code,
   ctypes, tracing, attribute changes on pytest/pluggy/runner classes and functions,
   ``__code__`` swaps, opens of the grader's files or ``/proc/<pid>/mem|fd`` are refused and
   reported.

Then pytest runs with this recorder as a plugin: it checks identities at collection end, before
every call outcome is sent (pytest's: covers everything since the previous check), and at every
test's start and end (builtins), and sends one record per phase (``test``) *when it happens*.  After
pytest returns it sends ``done`` and leaves with ``os._exit``: no atexit handler or finalizer
of the repo runs after the verdict, and bytes written to the pipe after ``done`` are flagged
by the parent.  The repo goes at the *end* of ``sys.path``; plugin autoload, the cache provider
and ``addopts`` are off.
"""

import os
import sys

sys.path.insert(0, "/grader")
import grader_audit  # noqa: E402
import grader_channel  # noqa: E402
import grader_identity  # noqa: E402


PYTEST_REBINDS = frozenset({
    "_pytest.assertion.util._reprcompare", "_pytest.assertion.util._config", "_pytest.assertion.util._assertion_pass",
    "_pytest.debugging.pytestPDB._pluginmanager", "_pytest.debugging.pytestPDB._config",
    "_pytest.debugging.pytestPDB._saved", "_pytest.debugging.pytestPDB._recursive_debug",
    "_pytest.config.Config._getini_unknown_type",
})
"""Attributes pytest itself rebinds during a run (assertion-message hooks, the debugger's config, a
deprecation shim): rebinding them changes messages, never an outcome."""


def _main() -> None:
    # The channel's ``send`` lives only in this frame and in closures: never a module global, where
    # code under test could reach it through ``sys.modules["__main__"]`` without any audited step.
    send = grader_channel.open_channel(int(sys.argv[2]), int(sys.argv[3]))
    import builtins
    import importlib
    import json

    with open(sys.argv[1]) as f:
        args = json.load(f)
    for name in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS"):
        os.environ.pop(name, None)
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sys.path.insert(0, args["site"])
    import _pytest.config
    import pluggy
    import pytest

    for plugin in (*_pytest.config.default_plugins, "fixtures", "nodes", "reports", "runner", "outcomes",
                   "python_api", "_code", "assertion.rewrite", "mark.structures"):
        try:
            importlib.import_module(f"_pytest.{plugin}")
        except ImportError:
            pass
    trusted = [m for name, m in sorted(sys.modules.items())
               if m is not None and name.split(".")[0] in ("pytest", "_pytest", "pluggy", "grader_audit",
                                                           "grader_channel", "grader_identity")]
    check_core = grader_identity.watch(trusted, mutable=PYTEST_REBINDS)
    check_builtins = grader_identity.watch([builtins], strict_additions=("builtins",))
    repo = args["repo"].rstrip("/") + "/"
    grader_audit.install(send, roots=(repo,), protected=("_pytest", "pytest", "pluggy", "grader_"))
    outcome_of = vars  # the report's own attribute, not a property an attack may redefine
    flagged: set = set()

    def verify(where: str, core: bool, with_builtins: bool) -> None:
        changed = (check_core() if core else []) + (check_builtins() if with_builtins else [])
        new = [name for name in changed if name not in flagged]
        if new:
            flagged.update(new)
            send("flag", layer="identity", why=f"changed {new[:8]} (seen at {where})"[:300])

    class Recorder:
        @pytest.hookimpl(tryfirst=True)
        def pytest_collectreport(self, report) -> None:
            if outcome_of(report).get("outcome") == "failed":
                send("collect_error", node=report.nodeid)

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_finish(self, session) -> None:
            verify("collection", True, True)

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logstart(self, nodeid, location) -> None:
            verify(f"start of {nodeid}", False, True)  # pytest's own objects: checked before each call outcome

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logreport(self, report) -> None:
            fields = outcome_of(report)
            # Before the call's outcome leaves: a runner function rebound since the test started shows here.
            verify(f"{fields.get('when')} of {report.nodeid}", fields.get("when") == "call", False)
            send("test", node=report.nodeid, when=fields.get("when"), outcome=fields.get("outcome"))

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logfinish(self, nodeid, location) -> None:
            verify(f"end of {nodeid}", False, True)

    recorder = Recorder()
    os.chdir(args["repo"])
    sys.path.append(args["repo"])
    if os.path.isdir(os.path.join(args["repo"], "src")):  # a src layout: the package lives under src/
        sys.path.append(os.path.join(args["repo"], "src"))
    plugins_before: list = []

    class Registry:
        @pytest.hookimpl(tryfirst=True)
        def pytest_collection(self, session) -> None:
            plugins_before.extend(id(p) for p in session.config.pluginmanager.get_plugins())

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session) -> None:
            verify("session end", True, True)
            for plugin in session.config.pluginmanager.get_plugins():
                path = str(getattr(plugin, "__file__", ""))
                if id(plugin) not in plugins_before and not (path.startswith(repo) and path.endswith("/conftest.py")):
                    send("flag", layer="plugins", why=f"plugin {type(plugin).__name__} {path[:80]} registered mid-run")

    status = pytest.main(
        ["-p", "no:cacheprovider", "-o", "addopts=", "--rootdir", args["repo"], "--import-mode=append",
         "-q", "--tb=line", "--continue-on-collection-errors", *args["node_ids"]],
        plugins=[recorder, Registry()],
    )
    send("done", exit=int(status))


try:
    _main()
except BaseException:  # noqa: BLE001 - said on stderr; the missing ``done`` makes the run incomplete
    import traceback

    traceback.print_exc()
finally:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)
