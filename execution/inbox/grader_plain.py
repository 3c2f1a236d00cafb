"""The second verdict: the deciding tests run again by a small runner that is not pytest (in the container).

    python3 -I -B /grader/grader_plain.py ARGS.json KEY_FD RECORD_FD

``ARGS`` = ``{"repo": "/repo", "site": "/opt/swe-site", "tests": [{"node", "path", "cls", "name"}]}``, only
tests the host found runnable without pytest (``swe_env.test_runner.plain_tests``: no fixtures, no marks,
no autouse or hook in a conftest).  Each test's module is imported as pytest's rootdir-based import
would (the first folder up without ``__init__.py`` goes on ``sys.path``) and the test is called:
a plain function, a method of a plain class, or a ``unittest.TestCase`` method between ``setUp`` and
``tearDown`` (never through ``TestCase.run``).  One ``plain`` record per test, ``passed`` when the call
returned, ``failed`` when it raised, ``skipped`` when it asked to be skipped, ``error`` when its module
did not import; then ``done``.

No pytest object exists here for the code under test to reach: a forgery aimed at pytest's runner,
reports, plugins or config changes nothing in this process, and the host counts a test that passed
under pytest but not here as tampering.  The channel, the audit hook and the identity check of
``builtins`` guard this process as they guard the pytest run.
"""

import os
import sys

sys.path.insert(0, "/grader")
import grader_channel  # noqa: E402
import grader_identity  # noqa: E402
import grader_seal  # noqa: E402


def _main() -> None:
    send = grader_channel.open_channel(int(sys.argv[2]), int(sys.argv[3]))
    import builtins
    import importlib
    import json
    import unittest

    with open(sys.argv[1]) as f:
        args = json.load(f)
    sys.path.insert(0, args["site"])
    import pytest  # noqa: F401 - the test modules import it: done here, before the hook (no session is made)
    from _pytest.outcomes import Failed, Skipped, XFailed

    check = grader_identity.watch([builtins, unittest.case], strict_additions=("builtins",))
    repo = args["repo"].rstrip("/") + "/"
    # /proc/self becomes root's, the kernel hides the arguments, the name binder leaves sys.modules, the hook goes in
    sealed = grader_seal.seal(send, repo)
    bind_names, missing, mark_running, running = sealed.bind, sealed.missing, sealed.mark_running, sealed.running
    # Bound before any repo code runs: rebinding a builtin later cannot change what is caught or how.
    import types

    base_exception, skips, import_module, getattr_ = BaseException, (Skipped, XFailed, unittest.SkipTest), \
        importlib.import_module, getattr
    module_type = types.ModuleType
    os.chdir(repo)
    sys.path.append(repo)
    if os.path.isdir(os.path.join(repo, "src")):
        sys.path.append(os.path.join(repo, "src"))
    classes: dict = {}
    bindings: dict = args.get("bindings", {})
    bound: dict = {}  # a bound module's name -> (its namespace, {drawn name: what it must hold there})

    def bind_copies(target, test) -> bool:
        """Before ``target`` is first called: each function of the module that defines it that reads a drawn name
        rebuilt over a namespace of its own (``grader_sight.bind``); True when it was (fetch ``target`` again).
        After: the module still holds what the runner left under each drawn name (a definition or rebind shows)."""
        function = getattr_(target, "__func__", target)
        namespace = getattr_(function, "__globals__", None)
        module = getattr_(function, "__module__", None)
        if type(module) is str and module in bound:
            namespace, expected = bound[module]
            changed = [n for n, v in expected.items() if namespace.get(n, missing) is not v]
            if changed:
                send("flag", layer="bindings", why=f"{test['node']}: {changed[:4]} rebound after the runner bound them")
            return False
        if type(namespace) is not dict:
            return False
        where = str(namespace.get("__file__") or "")
        rel = where[len(repo):] if where.startswith(repo) else test["path"]
        if rel not in bindings:
            return False
        _, expected, early = bind_names(namespace, bindings[rel], running)
        bound[namespace.get("__name__")] = (namespace, expected)
        if early:
            send("flag", layer="bindings", why=f"{rel}: {early[:4]} defined before the runner bound them")
        return True

    def call(target) -> None:
        """Call a test with its namespace answering it alone (``grader_sight.scoped``) while it runs."""
        mark_running(getattr_(getattr_(target, "__func__", target), "__code__", None))
        try:
            target()
        finally:
            mark_running(None)

    def expect(target, test) -> None:
        """The test called is the one the trusted file defines, not a substitute put in its module's place."""
        code = getattr_(getattr_(target, "__func__", target), "__code__", None)
        if code is None or code.co_filename != repo + test["path"] or code.co_name != test["name"]:
            where = f"{code.co_filename}:{code.co_name}" if code is not None else type(target).__name__
            send("flag", layer="second verdict", why=f"{test['node']} resolves to {where[:120]}"[:300])
            raise LookupError(test["node"])
    for test in args["tests"]:
        node = test["node"]
        try:
            module = import_module(_module_name(repo, test["path"]))
        except base_exception:
            send("plain", node=node, outcome="error")
            continue
        if type(module) is not module_type or not module.__file__.startswith(repo):
            send("flag", layer="second verdict", why=f"{node}: its module is a {type(module).__name__} from "
                                                     f"{str(getattr_(module, '__file__', ''))[:80]}"[:300])
            send("plain", node=node, outcome="error")
            continue
        outcome, target = "passed", None
        try:
            if test["cls"]:
                cls = getattr_(module, test["cls"])
                if isinstance(cls, type) and issubclass(cls, unittest.TestCase):
                    if cls not in classes:
                        classes[cls] = True
                        cls.setUpClass()
                    case = cls(test["name"])
                    target = getattr_(case, test["name"])
                    if bind_copies(target, test):
                        target = getattr_(case, test["name"])
                    expect(target, test)
                    case.setUp()
                    try:
                        call(target)
                    finally:
                        case.tearDown()
                        case.doCleanups()
                else:
                    instance = cls()
                    target = getattr_(instance, test["name"])
                    if bind_copies(target, test):
                        target = getattr_(instance, test["name"])
                    expect(target, test)
                    call(target)
            else:
                target = getattr_(module, test["name"])
                if bind_copies(target, test):
                    target = getattr_(module, test["name"])
                expect(target, test)
                call(target)
        except skips:
            outcome = "skipped"
        except Failed:
            outcome = "failed"
        except base_exception:
            outcome = "failed"
        if target is not None:  # a rebind during the call, before the copy read its name, shows here
            bind_copies(target, test)
        changed = check()
        if changed:
            send("flag", layer="identity", why=f"changed {changed[:8]} (seen after {node})"[:300])
        send("plain", node=node, outcome=outcome)
    for cls in classes:
        try:
            cls.tearDownClass()
        except base_exception:
            pass
    send("done", exit=0)


def _module_name(repo: str, path: str) -> str:
    """The module name pytest's rootdir-based import gives ``path``; its root folder goes on ``sys.path``."""
    parts = path[:-3].split("/")
    top = len(parts) - 1
    while top > 0 and os.path.isfile(os.path.join(repo, *parts[:top], "__init__.py")):
        top -= 1
    root = os.path.join(repo, *parts[:top])
    if root.rstrip("/") + "/" != repo and root not in sys.path:
        sys.path.append(root)
    return ".".join(parts[top:])


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
