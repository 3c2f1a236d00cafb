"""Tests laid into the graded copy at grading time, under names the code under test cannot know in advance.

    canary = make_canaries()
    (repo / canary.filename).write_text(canary.text)     # laid in at grading time only
    canary.must_pass, canary.must_fail                    # node ids
    canary.tampering(outcomes)                             # [] unless a must-fail canary passed
    canary.not_passing(outcomes)                           # must-pass canaries that did not pass


A must-fail canary asserts an arithmetic falsehood; one that reports "passed" means something
in the process turns failures into passes (a no-op ``runtest``, a patched report), whatever
the test's name: that is tampering.  A must-pass canary that did not pass means the run itself
broke (a conftest that no longer imports): the tests' outcomes say nothing, but nothing was
forged.  Names and values are fresh random hex per grade.  The canaries' file-name pattern is
public, so a flip can spare them; the twins (``execution.twins``) cannot be told apart from the tests
they copy.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass


@dataclass(frozen=True)
class Canaries:
    filename: str
    text: str
    must_pass: tuple[str, ...]
    must_fail: tuple[str, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return (*self.must_pass, *self.must_fail)

    def tampering(self, outcomes: dict[str, str]) -> list[str]:
        """Must-fail canaries reported as passed: the process turns failures into passes."""
        return [f"must-fail canary {n.split('::')[-1]} reported 'passed'" for n in self.must_fail
                if outcomes.get(n) == "passed"]

    def not_passing(self, outcomes: dict[str, str]) -> list[str]:
        """Must-pass canaries that did not pass (the run broke before or around them)."""
        return [n for n in self.must_pass if outcomes.get(n) != "passed"]


def make_canaries(folder: str = "", count: int = 2) -> Canaries:
    """``count`` must-pass and ``count`` must-fail pytest functions in one module of a random name."""
    filename = f"{folder.rstrip('/') + '/' if folder else ''}test_{secrets.token_hex(8)}.py"
    lines, must_pass, must_fail = [], [], []
    for _ in range(count):
        for kind in ("pass", "fail"):
            name = f"test_{secrets.token_hex(8)}"
            a, b = secrets.randbelow(10**9), secrets.randbelow(10**9)
            result = a + b if kind == "pass" else a + b + 1 + secrets.randbelow(1000)
            lines += [f"def {name}():", f"    assert {a} + {b} == {result}", ""]
            (must_pass if kind == "pass" else must_fail).append(f"{filename}::{name}")
    return Canaries(filename, "\n".join(lines), tuple(must_pass), tuple(must_fail))
