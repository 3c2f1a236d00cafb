"""A PEP 578 audit hook for untrusted code (runs inside the container; stdlib only).

    install(send, roots=("/repo",), protected=("_pytest", "pytest", "pluggy", "grader_"))

Installed before any untrusted code runs; it cannot be removed.  It reports the events below
through ``send("flag", ...)`` *before* the event takes effect, and refuses (raises) most of them:

- ``gc.get_objects`` / ``get_referrers`` / ``get_referents``, ``sys._current_frames``,
  ``sys.settrace`` / ``setprofile`` and any ``ctypes`` event: refused always (no reader of the
  runner's memory);
- frame access (``sys._getframe``, ``tb_frame``, ``gi_frame``, ...) requested by untrusted code
  (a file under ``roots``), directly or through ``inspect`` / ``traceback.walk_*``: refused;
- replacing the ``__code__`` (``__defaults__``, ...) of any function, or the special attributes
  (``__bases__``, ``__name__``, ...) of a protected class, while untrusted code is anywhere on
  the stack (so a detour through ``unittest.mock`` or ``functools`` does not hide who asked):
  refused;
- ``open`` of the grader's files, of anything under ``/proc`` (however the path is spelt), of a
  relative name like ``mem`` or ``fd`` (a ``dir_fd`` on ``/proc/self``) or of a raw descriptor
  number from untrusted code: refused;
- new code objects (``code.__new__``, ``CodeType.replace``) and a second audit hook, while untrusted
  code is on the stack: refused.

``close_proc()`` (called before ``install``) makes the process non-dumpable, so the kernel itself
refuses ``/proc/self/mem`` to the unprivileged user whatever path reaches it.

Python raises no audit event for rebinding a module attribute (``builtins.__build_class__``,
``_pytest.runner.call_and_report``) or a plain class attribute (``Function.runtest``,
``BaseReport.passed``): the identity checks (``grader_identity``) cover those.
"""

import sys

ALWAYS = ("gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
          "sys.setprofile")
UNTRUSTED_NEVER = ("code.__new__", "function.__new__", "sys.addaudithook")
"""Refused while untrusted code is on the stack: new code objects (a forged ``co_filename``), functions made
from them, a second hook."""
PROC_PARTS = frozenset({"mem", "fd", "fdinfo", "environ", "maps", "smaps", "pagemap", "task", "map_files", "syscall",
                        "auxv", "cwd", "root", "exe"})


def close_proc() -> None:
    """Make this process non-dumpable, before any untrusted code runs (and before ``install``: it uses ctypes).

    The kernel then gives ``/proc/<this pid>/*`` to root: ``mem``, ``fd``, ``environ`` and ``maps`` cannot be
    opened by the unprivileged user the code runs as, whatever path, relative name or ``dir_fd`` it uses.
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE = 4
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")
FRAME_ATTRS = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
LEAKY = (("inspect.py", None), ("logging/__init__.py", "<lambda>"), ("logging/__init__.py", "currentframe"),
         ("traceback.py", "walk_stack"), ("traceback.py", "walk_tb"), ("asyncio/base_tasks.py", None))
"""Standard-library helpers that hand a frame to their caller: the caller is who asked."""


class Refused(RuntimeError):
    """An action the grader forbids to code under test."""


def install(send, roots=("/repo",), protected=("_pytest", "pytest", "pluggy", "grader_"),
            private_paths=("/grader",)) -> None:
    """Install the hook; ``send`` reports each flag before the action happens."""
    import posixpath

    getframe, startswith, normpath = sys._getframe, str.startswith, posixpath.normpath
    roots, protected, private_paths = tuple(roots), tuple(protected), tuple(private_paths)
    busy = [False]

    def untrusted(filename: str) -> bool:
        return startswith(filename, roots)

    def requester():
        """The first frame outside this hook and outside the leaky helpers, or None."""
        frame = getframe(2)
        while frame is not None:
            name = frame.f_code.co_filename
            if not any(name.endswith(f) and (fn is None or frame.f_code.co_name == fn) for f, fn in LEAKY):
                return frame
            frame = frame.f_back
        return None

    def on_stack():
        """The innermost untrusted frame anywhere on the stack, or None."""
        frame = getframe(2)
        while frame is not None:
            if untrusted(frame.f_code.co_filename):
                return frame
            frame = frame.f_back
        return None

    def protected_target(obj) -> bool:
        module = getattr(obj, "__module__", None)
        if not isinstance(module, str):
            return False
        return module == "builtins" or startswith(module, protected)

    def refuse(why: str) -> None:
        send("flag", layer="audit", why=why[:300])
        raise Refused(f"refused by the grader: {why[:200]}")

    def hook(event: str, args: tuple) -> None:
        if busy[0]:
            return
        busy[0] = True
        try:
            if event in UNTRUSTED_NEVER:
                frame = on_stack()
                if frame is not None:
                    refuse(f"{event} from {frame.f_code.co_filename}:{frame.f_lineno}")
            elif event in ALWAYS or startswith(event, "ctypes."):
                frame = requester()
                where = frame.f_code.co_filename if frame is not None else "?"
                refuse(f"{event} from {where}")
            elif event == "sys._getframe" or (event == "object.__getattr__" and args[1] in FRAME_ATTRS):
                frame = requester()
                if frame is not None and untrusted(frame.f_code.co_filename):
                    what = event if event == "sys._getframe" else args[1]
                    refuse(f"frame access ({what}) from {frame.f_code.co_filename}:{frame.f_lineno}")
            elif event in ("object.__setattr__", "object.__delattr__"):
                target, name = args[0], args[1]
                code = name in ("__code__", "__globals__", "__defaults__", "__kwdefaults__")
                if code or protected_target(target):
                    frame = on_stack()
                    if frame is not None:
                        label = getattr(target, "__qualname__", type(target).__name__)
                        refuse(f"{event} {label}.{name} from {frame.f_code.co_filename}:{frame.f_lineno}")
            elif event == "open":
                path = args[0]
                if isinstance(path, int):
                    frame = requester()
                    if frame is not None and untrusted(frame.f_code.co_filename):
                        refuse(f"open of descriptor {path} from {frame.f_code.co_filename}")
                elif isinstance(path, (str, bytes)):
                    text = path.decode("utf-8", "replace") if isinstance(path, bytes) else path
                    relative = not startswith(text, "/")
                    norm = "" if relative else normpath("/" + text.lstrip("/"))
                    proc = norm == "/proc" or startswith(norm, ("/proc/", "/dev/fd"))
                    sensitive = any(part in PROC_PARTS for part in text.split("/"))
                    if startswith(text, private_paths) or (proc and sensitive) or (
                            (proc or (relative and sensitive)) and on_stack() is not None):
                        refuse(f"open {text[:120]}")
        finally:
            busy[0] = False

    sys.addaudithook(hook)
