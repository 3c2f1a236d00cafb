"""Keep the twins' values out of the code under test's sight (in the container; stdlib only).

    how = grader_sight.hide("/grader")      # "landlock", or "none" on a kernel without it
    values, early = grader_sight.bind(vars(test_module), {"_q3kx9a": "ValueError"})

A runner reads its arguments (the nodes in a neutral order, the twins' bindings) from ``/grader`` before any repo
code runs; the code under test runs as the same user afterwards, and the audit hook's refusal of ``/grader`` paths
is a check of path strings (a relative name, a symlink in ``/tmp`` reach the same file).  Here the kernel refuses
it: a landlock domain that handles reading files and folders allows it beneath every top-level entry of ``/`` but
the private one, so nothing this process or its children open, by any path, reads under ``/grader``.  Writing and
executing are not handled (unchanged).  Called after the arguments are read and before the audit hook, which
refuses ctypes.

``bind`` is how a runner binds the drawn names every copy of a deciding test reads its differing value through
(``execution.twin_bindings``): into the test module's namespace, from its arguments, before the module's tests
run; the test file on disk names no value.
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
    """The value a binding's source names in a module: a literal as written, else a (dotted) name of the module or
    of builtins, read as the line laid at the module's end would have read it."""
    import ast
    import builtins

    try:
        return ast.literal_eval(source)
    except (ValueError, SyntaxError):
        pass
    head, *rest = source.split(".")
    value = namespace[head] if head in namespace else getattr(builtins, head)
    for part in rest:
        value = getattr(value, part)
    return value


def bind(namespace: dict, bound: dict) -> tuple[dict, list]:
    """Put each drawn name of ``bound`` (name -> value source) into a test module's ``namespace``: returns (the values
    bound, the names already there before the runner bound them: something else defined them).  A value that does
    not resolve is left unbound: the copies reading it fail with a ``NameError``, as the laid line would have."""
    values, early = {}, []
    for name in sorted(bound):
        if name in namespace:
            early.append(name)
        try:
            values[name] = resolve(bound[name], namespace)
        except Exception:  # noqa: BLE001 - the module lost what its test names: its copies fail
            namespace.pop(name, None)
            continue
        namespace[name] = values[name]
    return values, early
