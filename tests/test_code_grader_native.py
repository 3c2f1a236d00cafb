"""Attacks on a program's reach to native code (issue 46 III): ctypes, or any module that writes memory, would let a
program switch its own audit hook off from inside (``ctypes.memmove`` raises no audit event), and a second
interpreter in the same process would run without the hook at all.

Each probe returns the right answer only if its route reached a memory-writing capability (it writes into one of its
own bytes objects and checks it changed) or ran code outside the hook; all run in one batch, each followed by an
honest program, which must still pass.  Written before the fix, against a zygote that imported ctypes: all five won
there; now the zygote confines its programs through ``_program_confine`` and the hook refuses ``NATIVE_REFUSED``.
"""

from __future__ import annotations

import pytest

from tests.code_batches import between_honest

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "import decimal, hashlib\ndef f(x):\n    return {'y': int(decimal.Decimal(x) * 2)}\n"

# what every memory probe ends with: a bytes object's buffer rewritten in place (no audit event on the write)
WRITE_AND_CHECK = '''
def wrote(memmove):
    s = bytes([97, 97, 97, 97])
    memmove(id(s) + 32, b"bbbb", 4)
    return s == b"bbbb"
'''

PROBES = {
    # ctypes as the program finds it in sys.modules (the zygote imported it): no import event
    "memmove_from_sys_modules": WRITE_AND_CHECK + '''
import ctypes
def f(x):
    return {"y": x * 2} if wrote(ctypes.memmove) else None
''',
    # no import at all: a ctypes class the zygote left alive, found through object.__subclasses__, and its module's
    # globals (what survives dropping ctypes from sys.modules)
    "memmove_through_subclasses": WRITE_AND_CHECK + '''
def f(x):
    for cls in object.__subclasses__():
        init = getattr(cls, "__init__", None)
        glob = getattr(init, "__globals__", None) or {}
        if "memmove" in glob:
            return {"y": x * 2} if wrote(glob["memmove"]) else None
    return None
''',
    # the extension loaded afresh under a package name, by the loader, from Python's own library
    "loads_the_ctypes_extension_by_path": WRITE_AND_CHECK + '''
import importlib.machinery, importlib.util, os, sys
def f(x):
    where = next(p for p in sys.path if p.endswith("lib-dynload"))
    path = os.path.join(where, next(n for n in os.listdir(where) if n.startswith("_ctypes.")))
    loader = importlib.machinery.ExtensionFileLoader("pkg._ctypes", path)
    m = loader.create_module(importlib.util.spec_from_file_location("pkg._ctypes", path, loader=loader))
    class P(m._SimpleCData):
        _type_ = "P"
    class N(m._SimpleCData):
        _type_ = "L"
    class Fn(m.CFuncPtr):
        _flags_ = 1
        _restype_ = P
        _argtypes_ = (P, P, N)
    return {"y": x * 2} if wrote(Fn(m._memmove_addr)) else None
''',
    # CPython's test module, in Python's library: a program that imports it has C entry points made to break rules
    "imports_testcapi": '''
def f(x):
    import _testcapi
    return {"y": x * 2} if _testcapi else None
''',
    # a second interpreter in the same process: the audit hook belongs to the first one only
    "runs_code_in_a_subinterpreter": '''
import os
def f(x):
    import _xxsubinterpreters as sub
    interp = sub.create()
    sub.run_string(interp, "import gc, os\\nos.mkdir('walked') if gc.get_objects() else None")
    return {"y": x * 2} if os.path.isdir("walked") else None
''',
    # bytes of the program's own that the kernel would map executable: /tmp (its folder) is mounted noexec, but an
    # anonymous memory file is not, and a native library that loads plugins by path (OpenSSL's providers, named in
    # an OPENSSL_CONF the program writes) would take it through /proc/self/fd
    "makes_an_executable_memory_file": '''
import os
def f(x):
    fd = os.memfd_create("plugin", 0)
    os.write(fd, b"\\x7fELF")
    return {"y": x * 2} if os.fstat(fd).st_mode & 0o111 else None
''',
}


@pytest.fixture(scope="module")
def graded(docker_sandbox):
    return between_honest(docker_sandbox, PROBES, HONEST, INPUTS, EXPECTED)


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(set(PROBES) - {"makes_an_executable_memory_file"}))
def test_a_program_reaches_no_native_memory_writer_and_no_second_interpreter(graded, name: str) -> None:
    result = graded[name]
    assert result.verified == 0 and result.passed == 0, (result.status, result.detail, result.errors)
    after = graded[f"honest_after_{name}"]
    assert (after.status, after.passed) == ("passed", 3), (after.status, after.detail, after.errors)


@pytest.mark.docker
def test_the_honest_program_passes(graded) -> None:
    assert (graded["honest_first"].status, graded["honest_first"].passed) == ("passed", 3), graded["honest_first"]


@pytest.mark.docker
def test_a_program_cannot_make_an_executable_memory_file(graded) -> None:
    result = graded["makes_an_executable_memory_file"]
    assert (result.status, result.passed) == ("forbidden", 0), (result.status, result.detail, result.errors)
    after = graded["honest_after_makes_an_executable_memory_file"]
    assert (after.status, after.passed) == ("passed", 3), (after.status, after.detail, after.errors)
