"""Keep the twins' values out of the code under test's sight (in the container; stdlib only).

    how = grader_sight.hide("/grader")      # "landlock", or "none" on a kernel without it
    rebuilt, expected, early = grader_sight.bind(vars(test_module), {"_q3kx9a": "ValueError"}, running)

A runner reads its arguments (the nodes in a neutral order, the twins' bindings) from ``/grader`` before any repo
code runs; the code under test runs as the same user afterwards, and the audit hook's refusal of ``/grader`` paths
is a check of path strings (a relative name, a symlink in ``/tmp`` reach the same file).  Here the kernel refuses
it: a landlock domain that handles reading files and folders allows it beneath every top-level entry of ``/`` but
the private one, so nothing this process or its children open, by any path, reads under ``/grader``.  Writing and
executing are not handled (unchanged).  Called after the arguments are read and before the audit hook, which
refuses ctypes.

``bind`` is how a runner binds the drawn names every copy of a deciding test reads its differing value through
(``execution.twin_bindings``), from its arguments, before the module's tests run: each function that reads one is
rebuilt over a namespace of its own (``scoped``), which answers the name only to that function's own code.  Neither
the test file on disk nor the module's namespace (``vars``, ``__dict__``, ``dir``) holds a value; reaching one takes
a function's ``__globals__`` and the closure of its lookup, frames or ``gc``, which the static check refuses, and
even ``__globals__`` read in the process answers nothing to code that is not the copy's own.
"""

import os

READ_FILE, READ_DIR = 1 << 2, 1 << 3
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446  # one table on x86_64 and aarch64 (Linux 5.13+)


def hide(private: str) -> str:
    """Refuse every read under ``private`` (a top-level folder) to this process and what it starts."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    if syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1)) < 1:  # the ABI version: 0 or -1 without
        return "none"

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    handled = ctypes.c_uint64(READ_FILE | READ_DIR)
    ruleset = syscall(CREATE_RULESET, ctypes.byref(handled), ctypes.c_size_t(8), ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        name = private.strip("/")
        for entry in sorted(os.listdir("/")):
            if entry == name:
                continue
            try:
                fd = os.open("/" + entry, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a dangling top-level link: nothing to allow
            try:
                rule = PathBeneath(READ_FILE | (READ_DIR if os.path.isdir("/" + entry) else 0), fd)
                if syscall(ADD_RULE, ruleset, 1, ctypes.byref(rule), 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule for /{entry} failed")
            finally:
                os.close(fd)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS (Docker's no-new-privileges set it already)
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if syscall(RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return "landlock"


def resolve(source: str, namespace: dict):
    """The value a binding's source names in a module: a literal as written, a function of ``operator``, else a
    (dotted) name of the module or of builtins, read as the line laid at the module's end would have read it."""
    import ast
    import builtins

    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        pass
    head, *rest = source.split(".")
    if head == "operator":  # a claim's operator (``execution.twin_bindings.shaped``): the module itself, always
        import operator as value
    else:
        value = namespace[head] if head in namespace else getattr(builtins, head)
    for part in rest:
        value = getattr(value, part)
    return value


MISSING = object()
"""What a module's namespace must hold under a drawn name that a copy of its own reads: nothing."""


def _codes(code) -> list:
    """``code`` and every code object nested in it (a lambda, a comprehension, an inner function of the test)."""
    found, todo = [], [code]
    while todo:
        item = todo.pop()
        found.append(item)
        todo += [c for c in item.co_consts if type(c) is type(code)]
    return found


def tracker(setters: tuple):
    """Which copy the runner runs now, held in a suspended generator's frame: ``send(("is", code))`` answers whether
    ``code`` runs, to anyone; ``send(("set", code))`` is taken only from a frame running one of ``setters`` (the
    runner's own code objects), so code under test that reaches the generator cannot say a copy of its choice runs."""
    import sys

    getframe = sys._getframe

    def run():
        current, message = None, (yield)
        while True:
            kind, code = message
            sender = getframe(1).f_code  # here, not inside a generator expression: the frame that sent
            if kind == "set" and any(sender is setter for setter in setters):
                current = code
            message = yield current is code and code is not None
    state = run()
    next(state)
    return state


def scoped(function, namespace: dict, values: dict, running):
    """``function`` rebuilt over a namespace of its own that holds no value, or None where its code reads none of
    ``values`` (drawn name -> value).  A miss is read from ``namespace`` (the module's); a drawn name it reads is
    answered only to a frame running its own code (its body, or a comprehension or function nested in it), and only
    while the runner runs it (``running``, a ``tracker``, says its code runs: set around each call), so the
    namespace's items, ``vars``/``__dict__`` of the module, a lookup from any other code, and the code under test
    calling a copy itself (a probe that records what each copy compares it with) show none of the values."""
    import sys
    import types

    codes = _codes(function.__code__)
    names = frozenset(name for c in codes for name in c.co_names if name in values)
    if not names:
        return None
    own, getframe, top, nothing = frozenset(map(id, codes)), sys._getframe, function.__code__, object()

    def keeper(held: dict):
        """Holds the values in a suspended generator's frame (reaching its locals takes ``gi_frame``, which the
        audit hook refuses to the code under test, or ``gc``): it answers ``send(name)`` only when its sender is
        ``__missing__`` below, called from the running copy's own code."""
        key = yield
        while True:
            sender, asker = getframe(1), getframe(2)
            answer = held[key] if key in held and sender.f_code is ask and id(asker.f_code) in own \
                and running.send(("is", top)) else nothing
            key = yield answer

    class Scope(dict):
        __slots__ = ()

        def __missing__(self, key):
            if key in names:
                value = store.send(key)
                if value is not nothing:
                    return value
            return namespace[key]

    ask = Scope.__missing__.__code__
    store = keeper({name: values[name] for name in names})
    next(store)
    space = Scope({key: namespace[key] for key in ("__builtins__", "__name__") if key in namespace})
    new = types.FunctionType(function.__code__, space, function.__name__, function.__defaults__,
                             function.__closure__)
    for name in ("__kwdefaults__", "__qualname__", "__doc__", "__module__", "__annotations__"):
        value = getattr(function, name, None)
        if value is not None:
            setattr(new, name, value)
    vars(new).update(vars(function))  # marks and other attributes the test carries
    return new


def bind(namespace: dict, bound: dict, running) -> tuple[dict, dict, list]:
    """Give each function of a test module's ``namespace`` (its classes' methods too) that reads a drawn name of
    ``bound`` (name -> value source) a namespace of its own (``scoped``: answered while ``running`` says it runs),
    in place.  Returns (old function id -> its
    rebuilt function, what the module namespace must hold under each drawn name: ``MISSING`` where only rebuilt
    functions read it, else the value bound there, the names already in the namespace before the runner bound them:
    something else defined them).  A name no function of the module reads directly (a decorated test's) is bound
    in the module namespace as before.  A value that does not resolve is left unbound: the copies reading it fail
    with a ``NameError``, as the laid line would have."""
    import types

    values, early = {}, []
    for name in sorted(bound):
        if name in namespace:
            early.append(name)
        try:
            values[name] = resolve(bound[name], namespace)
        except Exception:  # noqa: BLE001 - the module lost what its test names: its copies fail
            namespace.pop(name, None)
    rebuilt: dict = {}
    read: set = set()

    def rebind(owner: dict, store) -> None:
        for key, value in list(owner.items()):
            if type(value) is types.FunctionType and value.__globals__ is namespace:
                new = scoped(value, namespace, values, running)
                if new is not None:
                    rebuilt[id(value)] = new
                    read.update(n for c in _codes(value.__code__) for n in c.co_names if n in values)
                    store(key, new)
    rebind(namespace, namespace.__setitem__)
    module = namespace.get("__name__")
    classes = [v for v in list(namespace.values()) if isinstance(v, type) and v.__module__ == module]
    while classes:  # classes the module defines, and classes nested in them
        cls = classes.pop()
        rebind(dict(vars(cls)), lambda key, new, cls=cls: setattr(cls, key, new))
        classes += [v for v in vars(cls).values() if isinstance(v, type) and v.__module__ == module
                    and v.__qualname__.startswith(cls.__qualname__ + ".")]
    expected = {}
    for name in sorted(bound):
        if name in values and name not in read:
            namespace[name] = expected[name] = values[name]
        else:
            namespace.pop(name, None)
            expected[name] = MISSING
    return rebuilt, expected, early
