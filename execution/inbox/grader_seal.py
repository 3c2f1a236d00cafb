"""The seal both in-container runners apply before any code of the repo runs (``test_runner.py``, ``grader_plain.py``).

    sealed = grader_seal.seal(send, repo)    # after the arguments are read, before the first test module imports
    sealed.bind(...), sealed.missing, sealed.mark_running(code)

In this order: ``/proc/self`` becomes root's (``grader_audit.close_proc``, before the hook, which refuses ctypes);
the kernel hides ``/grader`` and the arguments from the code under test (``grader_sight.hide``; how is sent to the
host, which records it); the functions that bind the drawn names are taken and ``grader_sight`` leaves
``sys.modules``, so code under test that imports it reads ``/grader`` (refused, flagged) instead of getting the
module whose functions it could replace; the copy tracker accepts "which copy runs now" only from
``mark_running``'s own code; then the audit hook is installed.  This module holds no reference to ``grader_sight``
after the call: its globals would hand the module out again.
"""

import sys
from typing import Callable, NamedTuple

import grader_audit

PROTECTED = ("_pytest", "pytest", "pluggy", "grader_", "unittest")
"""Modules whose globals code under test may not write (``grader_audit.install``)."""


class Sealed(NamedTuple):
    """What a runner keeps from the seal: held in its own locals, out of any module's reach."""

    bind: Callable
    """``grader_sight.bind``: rebuild a module's copies over namespaces of their own."""
    missing: object
    """``grader_sight.MISSING``: what a namespace answers for a name it does not hold."""
    mark_running: Callable
    """Tell the copies' namespaces which copy runs now (its ``__code__``; None: none)."""
    running: object
    """The tracker ``bind`` hands each namespace (``grader_sight.tracker``)."""
    sight: str
    """What ``grader_sight.hide`` said ("landlock" or "none"), as sent to the host."""


def seal(send: Callable, repo: str) -> Sealed:
    """Seal the runner's process (module docstring); ``repo`` ends with "/" and is the audit hook's only root."""
    import grader_sight as sight  # a local: the module is held nowhere once this returns

    grader_audit.close_proc()
    how = sight.hide("/grader")
    send("sight", how=how)

    def mark_running(code) -> None:
        """Tell the copies' namespaces which copy runs now (None: none): only this function's code may."""
        running.send(("set", code))
    running = sight.tracker((mark_running.__code__,))
    sealed = Sealed(sight.bind, sight.MISSING, mark_running, running, how)
    del sys.modules["grader_sight"], sight
    grader_audit.install(send, roots=(repo,), protected=PROTECTED)
    return sealed
