"""Constructed answers of the probe session, per domain: right, formatted but wrong, unformatted, truncated.

Each answer is worded like a policy's, and carries the trusted verifier's record the way a
training row does (``verifier_info``, whose ``execution`` entry harness code reads):

- math: the record comes from the domain's verifier (cheap, on the host);
- code: right is the task's reference solution in a code block, formatted-wrong a well-formed
  program that hard-codes the example the prompt shows (it passes that test and fails the
  others), unformatted the reference as an indented block after a line of prose (no fence, so
  it does not parse), truncated the reference cut half way in an unclosed fence.  The domain's
  own grader runs them (many per container), as training's verifier does;
- SWE: tests are never run.  Right is the gold change, formatted-wrong a well-formed diff that
  only adds a comment line where the gold change goes (the bug stays: every FAIL_TO_PASS still
  fails), unformatted the fix told in prose, truncated the gold diff cut before its first added
  line.  Answers that do not parse get the domain's real record (no container); a parsed patch
  gets a synthetic grade that is true by construction of the task (FAIL_TO_PASS fails on the
  buggy code and passes with the gold change).

    answers = ANSWER_MAKERS[domain.name](task, rng, max_tokens, domain)
    answers["formatted_wrong"].response, answers["formatted_wrong"].verdict   # verdict None: the verifier grades
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

_EXPRESSION = re.compile(r"-?\d[\d\s+\-*/().]*\d")
_WRONG_FIX_NOTES = ("# handle this case", "# check the input here", "# edge case", "# fix: see issue")


@dataclass
class Constructed:
    """One constructed answer: what the policy would have said, and the trusted record when known by construction."""

    response: str
    truncated: bool = False
    verdict: tuple[float, dict] | None = None
    """``(verified, verifier_info)`` fixed by construction; None: the domain's verifier grades the answer."""


def math_answers(task, rng: random.Random, max_tokens: int, domain=None) -> dict[str, Constructed]:
    """Worded like a small policy's answers to arithmetic ("a + b = c" then the final line)."""
    gold = str(task.ground_truth.get("answer", ""))
    found = _EXPRESSION.findall(task.question)
    working = " ".join(found[-1].split()) if found else "Working it out"
    try:
        wrong = str(int(gold) + rng.choice((-10, -2, -1, 1, 2, 10)))
    except ValueError:
        wrong = gold + "1"
    cut = f"{working} = " + " + ".join(["1"] * max(1, max_tokens // 2))
    return {
        "right": Constructed(f"{working} = {gold}\nAnswer: {gold}"),
        "formatted_wrong": Constructed(f"{working} = {wrong}\nAnswer: {wrong}"),
        "unformatted": Constructed(f"{working} = {gold}"),
        "truncated": Constructed(cut, True),
    }


def code_answers(task, rng: random.Random, max_tokens: int, domain=None) -> dict[str, Constructed]:
    """Answers to a function-writing task; the domain's grader gives every record (module docstring)."""
    from meta_agent.domains.code_tasks import tasks_by_id

    spec = tasks_by_id()[str(task.ground_truth["task_id"])]
    reference = spec["reference"].rstrip()
    lines = reference.splitlines()
    intro = rng.choice(("Here is the function.", "This solves it.", "The solution:"))
    example = spec["tests"][0]["output"]
    hard_coded = f"{spec['signature']}\n    return {example!r}"
    indented = "\n".join("    " + line for line in lines)
    return {
        "right": Constructed(f"{intro}\n\n```python\n{reference}\n```"),
        "formatted_wrong": Constructed(f"{intro}\n\n```python\n{hard_coded}\n```"),
        "unformatted": Constructed(f"{intro} It works like this:\n{indented}"),
        "truncated": Constructed(f"{intro}\n\n```python\n" + "\n".join(lines[:max(1, len(lines) // 2)]), True),
    }


def _comment_only_diff(gold: str, rng: random.Random) -> str:
    """A well-formed diff of the gold change's first file that adds one comment line inside its first hunk."""
    out, old_lines, header, started = [], [], None, False
    for line in gold.splitlines():
        if line.startswith("--- ") and not started:
            out.append(line)
        elif line.startswith("+++ ") and not started:
            out.append(line)
        elif (m := re.match(r"^@@ -(\d+)(?:,\d+)? ", line)) and header is None:
            header, started = int(m.group(1)), True
        elif started and (line.startswith("@@") or line.startswith("diff ")):
            break
        elif started and line[:1] in (" ", "-", ""):
            old_lines.append(line[1:] if line else "")
    if header is None or not old_lines:
        raise ValueError("the gold change has no hunk to place a comment in")
    at = min(len(old_lines) - 1, 2)
    indent = re.match(r"\s*", old_lines[at]).group(0)
    body = [" " + ln for ln in old_lines[:at + 1]] + [f"+{indent}{rng.choice(_WRONG_FIX_NOTES)}"]
    body += [" " + ln for ln in old_lines[at + 1:]]
    return "\n".join(out + [f"@@ -{header},{len(old_lines)} +{header},{len(old_lines) + 1} @@"] + body) + "\n"


def _swe_grade(task, patch: str, resolved: bool) -> dict:
    """The record ``swe_env.grade`` writes for a patch that applies, true by construction of the task."""
    from swe_env.tasks import load_task

    swe = load_task(str(task.ground_truth["task_id"]))
    tests = {t: "passed" if resolved else "failed" for t in swe.fail_to_pass} | {t: "passed" for t in swe.pass_to_pass}
    return {"status": "resolved" if resolved else "unresolved", "resolved": resolved, "tests": tests,
            "touched_tests": [], "duration_s": 0.0, "detail": "", "findings": []}


def swe_answers(task, rng: random.Random, max_tokens: int, domain=None) -> dict[str, Constructed]:
    """Answers to a bug-fix task with their records, never running a test (module docstring)."""
    from swe_env.feedback import execution_feedback
    from swe_env.patch_format import parse_response
    from swe_env.tasks import buggy_sources, load_task

    gold = str(task.ground_truth["gold_patch"])
    first_add = next(i for i, ln in enumerate(gold.splitlines()) if ln.startswith("+") and not ln.startswith("+++"))
    sources = buggy_sources(load_task(str(task.ground_truth["task_id"])))
    added = [ln[1:].strip() for ln in gold.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    answers = {
        "right": (f"```diff\n{gold.rstrip()}\n```", False, True),
        "formatted_wrong": (f"```diff\n{_comment_only_diff(gold, rng).rstrip()}\n```", False, False),
        "unformatted": ("The bug is fixed by changing the code so that it reads: " + " ".join(added[:3]), False, False),
        "truncated": ("```diff\n" + "\n".join(gold.splitlines()[:first_add]), True, False),
    }
    out = {}
    for kind, (response, truncated, resolved) in answers.items():
        parsed = parse_response(response, sources)
        if parsed.status != "ok":  # the domain's record needs no container for what does not parse
            out[kind] = Constructed(response, truncated, None)
            continue
        info = _swe_grade(task, parsed.patch, resolved) | parsed.to_info()
        info["execution"] = execution_feedback(info)
        out[kind] = Constructed(response, truncated, (1.0 if resolved else 0.0, info))
    return out


ANSWER_MAKERS: dict[str, Callable[..., dict[str, Constructed]]] = {
    "math": math_answers, "code": code_answers, "swe": swe_answers,
}
"""Domain name -> ``(task, rng, max_tokens, domain) -> {kind: Constructed}``."""
