"""The code grader's confinement module (``execution/program_confine.c``): built on the host, cached, and each of its
calls takes something away from the process that makes it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from execution.program_confine_build import MODULE_FILE, ConfineBuildError, confine_module

LOAD = '''
import sys, importlib.machinery, importlib.util
path = sys.argv[1]
loader = importlib.machinery.ExtensionFileLoader("_program_confine", path)
m = importlib.util.module_from_spec(importlib.util.spec_from_loader("_program_confine", loader, origin=path))
'''


def _run(module: Path, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LOAD + code, str(module)], capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_module_is_built_once_and_confines_the_process_that_calls_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    module = confine_module()
    assert module.name == MODULE_FILE and module.is_relative_to(tmp_path), module
    built_at = module.stat().st_mtime_ns
    assert confine_module() == module and module.stat().st_mtime_ns == built_at  # the cache, not a second build
    assert [p.name for p in module.parent.iterdir()] == [MODULE_FILE]  # no partial file left beside it
    # no_new_privs and non-dumpable, as the kernel reports them afterwards (PR_GET_DUMPABLE through ctypes, here on
    # the host, in a process of the test's own)
    done = _run(module, '''
import ctypes
dumpable = ctypes.CDLL(None).prctl
before = dumpable(3, 0, 0, 0, 0)
m.no_new_privs()
m.not_dumpable()
status = open("/proc/self/status").read()
nnp = [line.split()[1] for line in status.splitlines() if line.startswith("NoNewPrivs:")][0]
print(nnp, before, dumpable(3, 0, 0, 0, 0))
''')
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "0"], done.stdout


def test_a_seccomp_filter_it_installs_holds_and_a_malformed_one_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    # a filter that answers EPERM to getppid (110 on x86_64, 173 on aarch64) and allows everything else
    done = _run(confine_module(), '''
import os, struct
nr = {"x86_64": 110, "aarch64": 173}[os.uname().machine]
op = lambda code, k, jt=0, jf=0: struct.pack("HBBI", code, jt, jf, k)
try:
    m.seccomp_filter(b"1234567")
except ValueError as exc:
    print("refused:", exc)
m.no_new_privs()
m.seccomp_filter(op(0x20, 0) + op(0x15, nr, 0, 1) + op(0x06, 0x00050000 | 1) + op(0x06, 0x7FFF0000))
print(os.getppid())
''')
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused: a seccomp filter is 1 to 4096 instructions"), lines
    assert lines[1] == "-1", lines  # getppid answered by the filter (EPERM as -1), not by the kernel's table


def test_without_a_compiler_the_build_says_what_is_missing(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(ConfineBuildError, match=r"needs a C compiler: .*no-such-cc.* not found"):
        confine_module()
    assert not list(tmp_path.rglob("*.so*"))  # nothing half-built left for the next call to take
