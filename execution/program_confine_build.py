"""Build the code grader's confinement module (``program_confine.c``) on the host, once per source, for the container.

    path = confine_module()      # ~/.cache/meta_agent/program_confine/<hash>/_program_confine.abi3.so

A program's process confines itself (no_new_privs, a seccomp filter, a landlock domain) with this module instead of
ctypes, so that no program can reach a general way to write memory or call any C function.  It is built with the
host's C compiler against the host Python's headers, on Python's limited API (one build loads in the container's
Python 3.11 whatever the host's version), and uses from libc only ``prctl`` and ``syscall``, which every glibc
has.  The build is cached by a hash of the source, the compiler flags and the machine; it is written under a
temporary name and renamed into place, so two graders building at once both get a whole file.
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import sysconfig
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("program_confine.c")
MODULE_FILE = "_program_confine.abi3.so"
"""Its name in the container (``/grader``): the loader takes ``_program_confine`` from it."""
FLAGS = ("-shared", "-fPIC", "-O2", "-fno-stack-protector", "-U_FORTIFY_SOURCE", "-Wall", "-Werror")
"""No stack protector or fortified calls: the module needs nothing of libc a bookworm glibc might lack."""


class ConfineBuildError(RuntimeError):
    """The host could not build the confinement module: the code grader cannot run any program safely."""


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "meta_agent" / "program_confine"


def confine_module() -> Path:
    """The built module's path, building it first if this source has not been built on this machine."""
    compiler = os.environ.get("CC", "cc")
    include = Path(sysconfig.get_paths()["include"])
    digest = hashlib.sha256(SOURCE.read_bytes() + repr((compiler, FLAGS, platform.machine())).encode()).hexdigest()
    target = _cache_root() / digest[:16] / MODULE_FILE
    if target.is_file():
        return target
    if not (include / "Python.h").is_file():
        raise ConfineBuildError(f"the code grader builds a small C module and needs Python's headers: no Python.h "
                                f"in {include} (install python3-dev, or a Python that ships its headers)")
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=target.parent, suffix=".so.partial")
    os.close(fd)
    try:
        try:
            done = subprocess.run([compiler, *FLAGS, f"-I{include}", str(SOURCE), "-o", partial],
                                  capture_output=True, text=True, timeout=120, check=False)
        except FileNotFoundError as exc:
            raise ConfineBuildError(f"the code grader builds a small C module and needs a C compiler: {compiler!r} "
                                    "not found (install gcc, or name one in CC)") from exc
        if done.returncode != 0:
            raise ConfineBuildError(f"building {SOURCE.name} failed ({compiler}, exit {done.returncode}): "
                                    f"{(done.stderr or done.stdout).strip()[-600:]}")
        os.chmod(partial, 0o644)
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)
    return target
