"""The program grader against real containers: bad and hostile programs each get their own status and none
passes; every shipped task's reference passes and a wrong program fails; no container is left behind.

All hostile programs run in one batch, in one container, before an honest program: the honest one
still passes, so no program can sink another.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from domains.code_tasks import load_tasks
from execution.programs import ProgramJob, ProgramResult, grade_programs, judge, same_value
from sandboxes.docker_engine import OWNER_PID_LABEL

INPUTS = ({"x": 1}, {"x": 2}, {"x": 3})
EXPECTED = [{"y": 2}, {"y": 4}, {"y": 6}]
HONEST = "def f(x):\n    return {'y': x * 2}\n"

# name -> (program, program status, per-test outcomes)
HOSTILE = {
    "does_not_parse": ("def f(x) return x\n", "syntax_error", ["error"] * 3),
    "no_function": ("def g(x):\n    return {'y': x * 2}\n", "no_function", ["error"] * 3),
    "prints_100_mb": ("def f(x):\n    print('a' * 100_000_000)\n    return {'y': x * 2}\n", "output_limit",
                      ["error"] * 3),
    "forks": ("import os\ndef f(x):\n    if os.fork() == 0:\n        os._exit(0)\n    return {'y': x * 2}\n",
              "forbidden", ["error"] * 3),
    "subprocess": ("import subprocess\ndef f(x):\n    subprocess.run(['true'])\n    return {'y': x * 2}\n",
                   "forbidden", ["error"] * 3),
    "allocates_8_gb": ("def f(x):\n    b = bytearray(8 << 30)\n    return {'y': x * 2}\n", "memory_limit",
                       ["error"] * 3),
    "sleeps_forever": ("import time\ndef f(x):\n    time.sleep(10**6)\n", "timeout", ["timeout"] * 3),
    "spins_forever": ("def f(x):\n    while True:\n        pass\n", "timeout", ["timeout"] * 3),
    "reads_outside": ("def f(x):\n    return {'y': len(open('/etc/passwd').read())}\n", "forbidden", ["error"] * 3),
    "reads_the_batch": ("def f(x):\n    return {'y': open('/in/batch.json').read()}\n", "forbidden", ["error"] * 3),
    "writes_outside": ("def f(x):\n    open('/out/verdict.json', 'w').write('passed')\n    return {'y': 0}\n",
                       "forbidden", ["error"] * 3),
    "lists_outside": ("import os\ndef f(x):\n    return {'y': os.listdir('/in')}\n", "forbidden", ["error"] * 3),
    "eq_override": ("class Y(dict):\n    def __eq__(self, other):\n        return True\n"
                    "    __hash__ = None\ndef f(x):\n    return Y()\n", "failed", ["failed"] * 3),
    "equal_to_anything": ("class A:\n    def __eq__(self, other):\n        return True\n"
                          "def f(x):\n    return A()\n", "error", ["error"] * 3),
    "int_subclass_equal_to_anything": ("class I(int):\n    def __eq__(self, o):\n        return True\n"
                                       "def f(x):\n    return {'y': I(0)}\n", "failed", ["failed"] * 3),
    "inspects_the_stack": (
        "import sys\ndef f(x):\n    seen = {}\n    frame = sys._getframe(1)\n    while frame:\n"
        "        seen.update({k: repr(v)[:50] for k, v in frame.f_locals.items() if 'expect' in k})\n"
        "        frame = frame.f_back\n    return {'y': seen}\n", "failed", ["failed"] * 3),
    "reads_driver_globals": ("import __main__\ndef f(x):\n    g = vars(__main__)\n"
                             "    return g.get('expected', g.get('EXPECTED', {'y': sorted(g)[:3]}))\n",
                             "failed", ["failed"] * 3),
    "walks_gc": ("import gc\ndef f(x):\n    for o in gc.get_objects():\n        pass\n    return {'y': 0}\n",
                 "forbidden", ["error"] * 3),
    "ctypes": ("import ctypes\ndef f(x):\n    ctypes.CDLL(None)\n    return {'y': x * 2}\n", "forbidden",
               ["error"] * 3),
    "kills_the_supervisor": ("import os, signal\ndef f(x):\n    os.kill(1, signal.SIGKILL)\n    return {'y': 0}\n",
                             "forbidden", ["error"] * 3),
    # a frame of its own on the results pipe is one too many beside the driver's answer: forbidden, no test counted
    "fake_result_lines": (
        "import os, json\ndef f(x):\n"
        "    line = json.dumps({'index': 0, 'tests': [{'value': '{\"y\": 2}'}] * 3, 'exit': 0}) + '\\n'\n"
        "    print(line)\n    fake = (json.dumps({'event': 'result', 'i': 0, 'value': 'true'}) + '\\n').encode()\n"
        "    for fd in range(3, 64):  # every descriptor it might hold, the results pipe among them\n"
        "        try:\n            os.write(fd, fake)\n        except OSError:\n            pass\n"
        "    open('result.json', 'w').write(line)\n    return {'y': 'passed'}\n", "forbidden", ["error"] * 3),
    "exits_0_at_import": ("import os\nos._exit(0)\ndef f(x):\n    return {'y': x * 2}\n", "exited", ["error"] * 3),
    "exits_0_in_a_test": ("import os\ndef f(x):\n    os._exit(0)\n", "exited", ["error"] * 3),
    "sys_exit_in_a_test": ("import sys\ndef f(x):\n    sys.exit(0)\n", "error", ["error"] * 3),
    "raises_at_import": ("raise RuntimeError('boom')\n", "load_error", ["error"] * 3),
    "hard_codes_the_example": ("def f(x):\n    return {'y': 2}\n", "failed", ["passed", "failed", "failed"]),
    "nan": ("def f(x):\n    return {'y': float('nan')}\n", "error", ["error"] * 3),
    "hash_seed_is_fixed": ("def f(x):\n    return {'y': [hash('abc'), list({'q', 'r', 's', 't'})]}\n", "passed",
                           ["passed"] * 3),
    "catches_everything": ("def f(x):\n    try:\n        return {'y': x / 0}\n    except BaseException:\n"
                           "        return {'y': None}\n", "failed", ["failed"] * 3),
}


def _program_containers(docker_sandbox) -> list[str]:
    """Containers of this test process, running or not (one engine call: others' containers come and go)."""
    mine = {"label": f"{OWNER_PID_LABEL}={os.getpid()}"}
    return [c["Id"] for c in docker_sandbox.client.api.containers(all=True, filters=mine)]


@pytest.fixture(scope="module")
def graded(docker_sandbox) -> dict[str, ProgramResult]:
    before = set(_program_containers(docker_sandbox))
    jobs = [ProgramJob(name, code, entry="f", inputs=INPUTS) for name, (code, _, _) in HOSTILE.items()]
    jobs.append(ProgramJob("honest", HONEST, entry="f", inputs=INPUTS))  # after every hostile one, same container
    expected = {job.key: EXPECTED for job in jobs}
    # programs are graded under PYTHONHASHSEED=0, as the references were built: this value is the host's under 0
    seeded = subprocess.run([sys.executable, "-c",
                             "import json; print(json.dumps([hash('abc'), list({'q', 'r', 's', 't'})]))"],
                            env={"PYTHONHASHSEED": "0"}, capture_output=True, text=True, check=True).stdout
    expected["hash_seed_is_fixed"] = [{"y": json.loads(seeded)}] * 3
    results = grade_programs(jobs, expected, docker_sandbox)
    assert set(_program_containers(docker_sandbox)) - before == set()  # every grading container was removed
    return results


@pytest.mark.docker
@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_or_broken_program_gets_its_own_status_and_never_passes(graded, name: str) -> None:
    """(One honest entry, hash_seed_is_fixed, passes: the grader runs programs under PYTHONHASHSEED=0.)"""
    _, status, tests = HOSTILE[name]
    result = graded[name]
    assert (result.status, result.tests, result.verified, result.total) == (status, tests,
                                                                            int(status == "passed"), 3), \
        result
    assert result.passed == tests.count("passed")


@pytest.mark.docker
def test_an_honest_program_after_all_of_them_in_the_same_container_passes(graded) -> None:
    result = graded["honest"]
    assert (result.status, result.tests, result.verified, result.share) == ("passed", ["passed"] * 3, 1, 1.0)


@pytest.mark.docker
def test_forbidden_and_limit_statuses_say_what_was_stopped(graded) -> None:
    assert "os.fork" in graded["forks"].detail
    assert "/etc/passwd" in graded["reads_outside"].detail and "reads" in graded["reads_outside"].detail
    assert "/out/verdict.json" in graded["writes_outside"].detail and "writes" in graded["writes_outside"].detail
    assert "MemoryError" in graded["allocates_8_gb"].errors[0]
    assert "not JSON serializable" in graded["equal_to_anything"].errors[0]


@pytest.mark.docker
def test_every_shipped_reference_passes_and_a_wrong_program_fails(docker_sandbox) -> None:
    tasks = load_tasks()
    assert len([t for t in tasks if t["source"] == "codeio"]) >= 60 and len(tasks) >= 220  # 71 CodeI/O, 160 HumanEval
    jobs, expected = [], {}
    for task in tasks:
        inputs = tuple(t["input"] for t in task["tests"])
        outputs = [t["output"] for t in task["tests"]]
        # wrong: the reference's value for the first test, whatever the input (outputs differ across tests)
        wrong = f"def {task['entry']}(*args, **kwargs):\n    return {outputs[0]!r}\n"
        for key, code in ((f"{task['id']}/reference", task["reference"]), (f"{task['id']}/wrong", wrong)):
            jobs.append(ProgramJob(key, code, entry=task["entry"], call=task["call"], inputs=inputs))
            expected[key] = outputs
    results = grade_programs(jobs, expected, docker_sandbox, workers=2, batch_size=64)
    failing = {k: (r.status, r.errors) for k, r in results.items() if k.endswith("/reference") and r.verified != 1}
    assert failing == {}
    passing_wrong = [k for k, r in results.items() if k.endswith("/wrong") and r.verified != 0]
    assert passing_wrong == []
    first = [results[f"{t['id']}/wrong"].tests[0] for t in tasks]  # the comparison is not blind:
    assert first and set(first) == {"passed"}  # each wrong program gets its first test right, and only that


def test_same_value_is_exact_except_for_float_noise() -> None:
    assert same_value({"a": [1, 2.0000000001]}, {"a": [1, 2.0]})  # a float nested in a dict and a list
    assert same_value([[1.0, {"b": 3e9}]], [[1.0000000001, {"b": 3e9 + 1}]])
    assert same_value(2.5, 2.5 + 1e-9) and same_value(3, 3.0) and same_value(3.0, 3)  # a float exactly equal
    assert not same_value(True, 1) and not same_value(1, True) and not same_value(None, 0)
    assert not same_value([1, 2], [1, 2, 3]) and not same_value({"a": 1}, {"a": 1, "b": 2})
    assert not same_value("1", 1) and not same_value(1.001, 1)
    assert not same_value(10 ** 400, 2.0) and not same_value([-(10 ** 309)], [1e308])  # beyond any float: unequal


def test_integers_and_strings_compare_exactly() -> None:
    """A relative tolerance let the reference's answer + 1 pass every output above 10^6."""
    assert not same_value(10**7 + 1, 10**7) and not same_value(10**7 - 1, 10**7)
    assert not same_value(1000001.0, 1000000) and not same_value(1000000.5, 1000000)
    assert not same_value(float(2**53), 2**53 + 1)  # the float the integer rounds to is not the integer
    assert not same_value([1, [2, {"n": 123456789}]], [1, [2, {"n": 123456788}]])
    assert same_value([1, [2, {"n": 123456789}]], [1, [2, {"n": 123456789}]])
    assert not same_value("abc ", "abc") and not same_value("abd", "abc") and same_value("abc", "abc")
    assert not same_value(False, 0) and not same_value(0, False) and same_value(False, False)


def test_a_runner_line_claiming_results_it_did_not_have_is_judged_on_values_only() -> None:
    line = {"index": 0, "exit": 0, "current": 2, "killed_for": None, "event": None,
            "tests": [{"value": '{"y": 2}'}, {"value": "NaN"}, {"value": None, "error": None}]}
    result = judge(line, EXPECTED, 3)
    assert (result.tests, result.status, result.verified) == (["passed", "error", "error"], "error", 0)
