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
import grader_channel  # noqa: E402
import grader_identity  # noqa: E402
import grader_seal  # noqa: E402


PYTEST_REBINDS = frozenset({
    "_pytest.assertion.util._reprcompare", "_pytest.assertion.util._config", "_pytest.assertion.util._assertion_pass",
    "_pytest.debugging.pytestPDB._pluginmanager", "_pytest.debugging.pytestPDB._config",
    "_pytest.debugging.pytestPDB._saved", "_pytest.debugging.pytestPDB._recursive_debug",
    "_pytest.config.Config._getini_unknown_type", "*._pytest_diamond_inheritance_warning_shown",
})
"""Attributes pytest itself rebinds during a run (assertion-message hooks, the debugger's config, a
deprecation shim, a flag ``_pytest.nodes`` sets on item classes it has warned about, ``*.`` for any class):
rebinding them changes messages, never an outcome."""


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
    import types
    import unittest

    import _pytest.config
    import pytest
    from _pytest.outcomes import Skipped, XFailed

    for plugin in (*_pytest.config.default_plugins, "fixtures", "nodes", "reports", "runner", "outcomes",
                   "python_api", "_code", "assertion.rewrite", "mark.structures"):
        try:
            importlib.import_module(f"_pytest.{plugin}")
        except ImportError:
            pass
    trusted = [m for name, m in sorted(sys.modules.items())
               if m is not None and name.split(".")[0] in ("pytest", "_pytest", "pluggy", "unittest", "grader_audit",
                                                           "grader_channel", "grader_identity", "grader_seal")]
    # Classes are strict too: an attribute *added* to ``Function`` (over an inherited ``obj``) is a change.
    check_core = grader_identity.watch(trusted, mutable=PYTEST_REBINDS, strict_classes=True)
    check_builtins = grader_identity.watch([builtins], strict_additions=("builtins",))
    repo = args["repo"].rstrip("/") + "/"
    # /proc/self becomes root's, the kernel hides the arguments, the name binder leaves sys.modules, the hook goes in
    sealed = grader_seal.seal(send, repo)
    bind_names, missing, mark_running, running = sealed.bind, sealed.missing, sealed.mark_running, sealed.running
    outcome_of = vars  # the report's own attribute, not a property an attack may redefine
    flagged: set = set()
    module_type, function_type, skips, isinstance_, getattr_ = types.ModuleType, types.FunctionType, \
        (Skipped, XFailed, unittest.SkipTest), isinstance, getattr
    import _pytest.assertion.util as assertion_util
    import _pytest.debugging as debugging

    def unlink_config() -> None:
        """Drop the module attributes through which pytest's live Config is reachable without frames or gc."""
        debugging.pytestPDB._config = debugging.pytestPDB._pluginmanager = None  # only --pdb reads them
        assertion_util._config = assertion_util._reprcompare = assertion_util._assertion_pass = None  # messages
    raised: dict = {}
    bindings: dict = args.get("bindings", {})
    bound: dict = {}  # id of a test module's namespace -> (the namespace, {drawn name: what it must hold there})
    modules: dict = {}  # a bound module's name -> the same pair (a rebuilt copy's globals are its own)
    method_type = types.MethodType

    def bind_copies(items) -> None:
        """Rebuild each function that reads a drawn name over a namespace of its own (``grader_sight.bind``), in
        each module that defines a collected test (a mixin's too), and point the collected items at the rebuilt
        functions, before any test runs."""
        rebuilt: dict = {}
        for item in items:
            function = getattr_(getattr_(item, "obj", None), "__func__", getattr_(item, "obj", None))
            namespace = getattr_(function, "__globals__", None)
            if type(namespace) is not dict or id(namespace) in bound:
                continue
            where = str(namespace.get("__file__") or "")
            rel = where[len(repo):] if where.startswith(repo) else ""
            if rel in bindings:
                new, expected, early = bind_names(namespace, bindings[rel], running)
                rebuilt.update(new)
                bound[id(namespace)] = modules[namespace.get("__name__")] = (namespace, expected)
                if early:
                    send("flag", layer="bindings", why=f"{rel}: {early[:4]} defined before the runner bound them")
        for item in items:  # a plain class's item holds a method bound at collection; a unittest item fetches later
            obj = getattr_(item, "obj", None)
            new = rebuilt.get(id(getattr_(obj, "__func__", obj)))
            if new is not None:
                item.obj = method_type(new, obj.__self__) if type(obj) is method_type else new

    def check_bound(item) -> None:
        """The module of a test's copies still holds what the runner left under each drawn name (nothing, where
        only the copies' own namespaces answer it): a definition or a rebind between tests shows here."""
        function = getattr_(getattr_(item, "obj", None), "__func__", getattr_(item, "obj", None))
        module = getattr_(function, "__module__", None)
        namespace, expected = modules.get(module, (None, {})) if type(module) is str else (None, {})
        changed = [name for name, value in expected.items() if namespace.get(name, missing) is not value]
        if changed:
            send("flag", layer="bindings", why=f"{item.nodeid}: {changed[:4]} rebound after the runner bound them")
    plugins_seen: list = []
    managers: list = []  # pytest's plugin manager, kept here (not reachable from the code under test's side)

    def verify(where: str, core: bool, with_builtins: bool) -> None:
        changed = (check_core() if core else []) + (check_builtins() if with_builtins else [])
        new = [name for name in changed if name not in flagged]
        if new:
            flagged.update(new)
            send("flag", layer="identity", why=f"changed {new[:8]} (seen at {where})"[:300])

    site = args["site"].rstrip("/") + "/"

    def from_pytest(value) -> bool:
        """A value whose code lives in the test-tool site (pytest's plugins), not in the repo."""
        inner = getattr_(value, "fget", None) or getattr_(value, "__func__", None) or value
        code = getattr_(inner, "__code__", None)
        return code is not None and code.co_filename.startswith(site)

    class Recorder:
        @pytest.hookimpl(trylast=True)
        def pytest_configure(self, config) -> None:
            others = check_core.settle(from_pytest)  # what pytest's plugins added to its classes as they configured
            if others:
                flagged.update(others)
                send("flag", layer="identity", why=f"added {others[:8]} (seen at configure)"[:300])

        @pytest.hookimpl(tryfirst=True)
        def pytest_collectreport(self, report) -> None:
            if outcome_of(report).get("outcome") == "failed":
                send("collect_error", node=report.nodeid)

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_finish(self, session) -> None:
            bind_copies(session.items)
            verify("collection", True, True)
            check_plugins(session.config.pluginmanager, "collection", collecting=True)
            plugins_seen.extend(id(p) for p in session.config.pluginmanager.get_plugins())
            for item in session.items:
                check_item(item)

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logstart(self, nodeid, location) -> None:
            unlink_config()
            verify(f"start of {nodeid}", True, True)

        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_call(self, item):
            # Checked again right before the test runs, and what the call itself did is kept: a report that
            # says "passed" for a call that raised was rewritten on its way, whatever rewrote it.
            verify(f"call of {item.nodeid}", True, True)
            check_bound(item)
            function = getattr_(getattr_(item, "obj", None), "__func__", getattr_(item, "obj", None))
            mark_running(getattr_(function, "__code__", None))  # the one copy whose namespace answers now
            try:
                outcome = yield
            finally:
                mark_running(None)
            check_bound(item)  # a rebind during the call, before the copy read its name
            excinfo = outcome.excinfo
            failed = excinfo is not None and not issubclass(excinfo[0], skips)
            failed = failed or any(not issubclass(e.type, skips) for e in getattr_(item, "_excinfo", None) or ())
            raised[item.nodeid] = failed

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logreport(self, report) -> None:
            fields = outcome_of(report)
            when = fields.get("when")
            # Before the call's outcome leaves: a runner function rebound since the test started shows here.
            verify(f"{when} of {report.nodeid}", when == "call", False)
            if when == "call":
                check_plugins(managers[0], f"the call of {report.nodeid}")
                if raised.pop(report.nodeid, False) and fields.get("outcome") == "passed":
                    send("flag", layer="outcome", why=f"{report.nodeid} raised but its report says passed")
            send("test", node=report.nodeid, when=when, outcome=fields.get("outcome"))

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_logfinish(self, nodeid, location) -> None:
            verify(f"end of {nodeid}", False, True)

    def check_plugins(manager, where: str, collecting: bool = False) -> None:
        """No plugin added after collection; each one added during it a real conftest module of the repo."""
        for plugin in manager.get_plugins():
            if id(plugin) in plugins_seen or id(plugin) in plugins_before:
                continue
            if not collecting:
                send("flag", layer="plugins", why=f"plugin {type(plugin).__name__} registered by {where}"[:300])
                continue
            path = str(getattr_(plugin, "__file__", ""))
            hooks = [v for k, v in vars(plugin).items() if k.startswith("pytest_") and isinstance_(v, function_type)] \
                if type(plugin) is module_type else []
            if type(plugin) is not module_type or not (path.startswith(repo) and path.endswith("/conftest.py")) \
                    or not os.path.isfile(path) or any(h.__code__.co_filename != path for h in hooks):
                send("flag", layer="plugins", why=f"plugin {type(plugin).__name__} {path[:80]} is no conftest of "
                                                  f"the repo (seen at {where})"[:300])

    def check_item(item) -> None:
        """A collected test comes from a real module, and its function from a test file, not from the package."""
        module = getattr_(item, "module", None)
        if module is not None and type(module) is not module_type:
            send("flag", layer="collection", why=f"{item.nodeid}: its module is a {type(module).__name__}"[:300])
            return
        function = getattr_(item, "obj", None)
        function = getattr_(function, "__func__", function)
        for _ in range(8):  # a test decorated by a helper: the function it wraps
            inner = getattr_(function, "__wrapped__", None)
            if inner is None:
                break
            function = inner
        if isinstance_(function, function_type):
            where = function.__code__.co_filename
            rel = where[len(repo):] if where.startswith(repo) else ""
            name = rel.rsplit("/", 1)[-1]
            if not rel or not (name.startswith(("test", "conftest")) or name.endswith("_test.py")
                               or any(part.startswith("test") for part in rel.split("/")[:-1])):
                send("flag", layer="collection", why=f"{item.nodeid}: its function comes from {where[:120]}"[:300])

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
            managers.append(session.config.pluginmanager)
            unlink_config()

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session) -> None:
            verify("session end", True, True)
            check_plugins(session.config.pluginmanager, "session end", collecting=not plugins_seen)

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
