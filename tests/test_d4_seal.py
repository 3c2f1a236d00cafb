"""One seal for both in-container runners (issue 46, helper d4): ``execution/inbox/grader_seal.py``.

The pytest runner (``swe_env/test_runner.py``) and the second, pytest-free one (``inbox/grader_plain.py``) each
carried the same steps: ``/proc/self`` made root's, the arguments hidden by landlock, the name binder taken out of
``sys.modules``, the copy tracker, the audit hook.  Both now call ``grader_seal.seal``; neither carries a step of its
own.  The run below proves each runner still seals: code under test that imports the binder or the seal module at
import time (in each runner's process: the deciding test's module imports it there) reads ``/grader``, which the
kernel hides and the audit hook flags, and each runner said landlock hid its arguments.
"""

from __future__ import annotations

import re

import pytest

from swe_env.grade import RUNNER, run_tests
from execution.container import INBOX
from tests.test_d3_scoped import NODES, repo_of
from tests.test_swe_attacks import PARSE, tasks  # noqa: F401 (a fixture)

STEPS = ("close_proc(", ".hide(", ".tracker(", 'del sys.modules["grader_sight"]', ".install(")


def test_both_runners_call_the_one_seal_and_carry_none_of_its_steps():
    seal = (INBOX / "grader_seal.py").read_text()
    assert [s for s in STEPS if s not in seal] == []
    for runner in (RUNNER, INBOX / "grader_plain.py"):
        text = runner.read_text()
        assert re.search(r"^\s+sealed = grader_seal\.seal\(send, repo\)$", text, re.M), runner
        assert [s for s in STEPS if s in text] == [], runner
        assert "import grader_sight" not in text, runner  # held by the seal alone, and only during the call


SNOOP = '''
try:
    import grader_sight  # noqa: F401 - the binder: out of sys.modules, so this reads /grader
except BaseException:
    pass
try:
    import grader_seal
    grader_seal.seal = None
except BaseException:
    pass


def answer(n):
    return n * 7
'''


@pytest.mark.docker
def test_each_runner_still_seals(tasks, tmp_path):
    deciding, other = NODES["function"]
    repo = repo_of(tmp_path / "repo", "function", SNOOP)
    run = run_tests(tasks[PARSE].image, repo, [deciding, other], deciding=(deciding,))
    opened = [f for f in run.findings if f.startswith("audit: open /grader/")]
    assert run.tampered and len(opened) == 2, run.findings  # one from each runner's process
    assert "identity: changed ['grader_seal.seal'] (seen at collection)" in run.findings  # pytest's watches the seal
    assert run.hidden is True  # both runners said landlock: neither skipped the seal
    assert run.second == {deciding: "passed"}  # the second runner ran, and its import of the module was audited too
