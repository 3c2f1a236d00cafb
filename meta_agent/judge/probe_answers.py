"""Constructed answers of the probe session, per domain: right, formatted but wrong, unformatted, truncated.

Each answer is worded like a policy's, and carries the trusted verifier's record the way a
training row does (``verifier_info``, whose ``execution`` entry harness code reads):

- math: the record comes from the domain's verifier (cheap, on the host);
- code, every answer graded by the domain's grader in one batch: right is the task's reference
  in a code block; formatted-wrong a well-formed program, the reference with one small mutation
  (an operator or a constant, made in its text: the reference's formatting is kept, then a few
  lines re-spelled or a comment added, so no wrong program is canonical) that passes some hidden
  tests but not all where one exists -- a near miss shaped like the right answer, so a reward
  cannot spare the probe's wrong programs by shape -- else, task by task in turn, a mutant that
  fails or a program that hard-codes the example the prompt shows (bare, through a name, or only
  for the example's input: it passes that test and fails the others); unformatted the reference as an indented
  block after a line of prose (no fence, so it does not parse); truncated the reference cut half
  way in an unclosed fence;
- SWE: tests are never run.  Right is the gold change, formatted-wrong a well-formed diff that
  changes code where the gold change goes without changing its meaning (lines of the buggy code
  re-spelled, syntax tree kept: ``probe_answers_swe``; the bug stays, so every FAIL_TO_PASS still
  fails; a comment line where nothing there can be re-spelled), unformatted the fix told in prose,
  truncated the gold diff cut before its first added line.  Answers that do not parse get the
  domain's real record (no container); a parsed patch gets a synthetic grade that is true by
  construction of the task (FAIL_TO_PASS fails on the buggy code and passes with the gold change).
  Agent mode (``AGENT_ANSWER_MAKERS``): the same
  changes as whole episodes, the way ``swe_env.agent_loop`` archives them.

    answers = ANSWER_MAKERS[domain.name](tasks, rng, max_tokens, domain)     # one dict per task
    answers[0]["formatted_wrong"].response, answers[0]["formatted_wrong"].verdict   # None: the verifier grades
"""

from __future__ import annotations

import ast
import json
import random
import re
from dataclasses import dataclass
from typing import Callable

from meta_agent.judge.probe_answers_forms import reformatted, token_mutant

_EXPRESSION = re.compile(r"-?\d[\d\s+\-*/().]*\d")
_WRONG_FIX_NOTES = ("# handle this case", "# check the input here", "# edge case", "# fix: see issue")


@dataclass
class Constructed:
    """One constructed answer: what the policy would have said, and the trusted record when known by construction."""

    response: str
    truncated: bool = False
    verdict: tuple[float, dict] | None = None
    """``(verified, verifier_info)`` fixed by construction; None: the domain's verifier grades the answer."""
    finish_reason: str | None = None
    """Agent mode: how the episode ended (``submitted``, ``format_error``, ``step_limit``); else from ``truncated``."""
    prompt: str | None = None
    """Agent mode: the episode's first user turn (the environment's task statement, no template)."""


_WORDINGS = ("{w} = {v}", "{w} = {v}.", "We need {w}. That gives {v}.", "Let me compute. {w} comes to {v}.",
             "{w}\n= {v}", "Step by step: {w} = {v}", "Adding it up, {w} is {v}.", "So {w} equals {v}")
"""Workings of a constructed math answer, drawn per answer (issue 45: no one template marks the probe)."""
_FILLERS = (" + 1", " and then", " carry the", " 1 2 3", " so")


def _math_answers(task, rng: random.Random, max_tokens: int) -> dict[str, Constructed]:
    """Worded like a small policy's answers to arithmetic (a working, then the final line), each in a wording,
    a wrong value and a truncation drawn at random: the probe's extra check, beside its archived groups."""
    gold = str(task.ground_truth.get("answer", ""))
    found = _EXPRESSION.findall(task.question)
    working = " ".join(found[-1].split()) if found else "Working it out"
    try:
        wrong = str(int(gold) + rng.choice((-1, 1)) * rng.randint(1, 12))
    except ValueError:
        wrong = gold + "1"
    said = lambda value: rng.choice(_WORDINGS).format(w=working, v=value)  # noqa: E731
    cut = said("").rstrip(". \n") + rng.choice(_FILLERS) * max(1, max_tokens // 2)
    return {
        "right": Constructed(f"{said(gold)}\nAnswer: {gold}"),
        "formatted_wrong": Constructed(f"{said(wrong)}\nAnswer: {wrong}"),
        "unformatted": Constructed(said(gold)),
        "truncated": Constructed(cut, True),
    }


MUTANTS_PER_TASK = 6
"""Near misses tried per task to find one that passes some tests."""


def _code_candidates(spec: dict, rng: random.Random) -> tuple[dict[str, Constructed], list[str]]:
    """The fixed kinds of one task and its wrong programs to choose from (the hard-coded example first)."""
    lines = spec["reference"].rstrip().splitlines()
    intro = rng.choice(("Here is the function.", "This solves it.", "The solution:"))
    fenced = lambda code: f"{intro}\n\n```python\n{code}\n```"  # noqa: E731
    indented = "\n".join("    " + line for line in lines)
    fixed = {
        "right": Constructed(fenced(spec["reference"].rstrip())),
        "unformatted": Constructed(f"{intro} It works like this:\n{indented}"),
        "truncated": Constructed(f"{intro}\n\n```python\n" + "\n".join(lines[:max(1, len(lines) // 2)]), True),
    }
    mutants = [m for m in dict.fromkeys(token_mutant(spec["reference"], rng) for _ in range(MUTANTS_PER_TASK)) if m]
    return fixed, [fenced(hard_coded(spec, rng))] + [fenced(reformatted(m, rng)) for m in mutants]


def hard_coded(spec: dict, rng: random.Random) -> str:
    """A program that returns the output of the example the prompt shows, in a shape drawn from ``rng``: a bare
    ``return``, through a name, or only when the input is the example's (else nothing)."""
    out = repr(spec["tests"][0]["output"])
    params = signature_params(spec["signature"])
    name = rng.choice(("result", "answer", "out", "res"))
    shapes = [f"    return {out}", f"    {name} = {out}\n    return {name}"]
    example = spec["tests"][0].get("input")
    if params and isinstance(example, dict) and params[0] in example:
        shapes.append(f"    if {params[0]} == {example[params[0]]!r}:\n        return {out}\n    return None")
    return f"{spec['signature']}\n{rng.choice(shapes)}"


def signature_params(signature: str) -> list[str]:
    """The parameter names of a ``def ...:`` line, in order ([] when it does not parse)."""
    try:
        func = ast.parse(signature.rstrip() + "\n    pass").body[0]
    except SyntaxError:
        return []
    return [a.arg for a in func.args.posonlyargs + func.args.args] if isinstance(func, ast.FunctionDef) else []


def code_answers(tasks: list, rng: random.Random, max_tokens: int, domain) -> list[dict[str, Constructed]]:
    """Answers to function-writing tasks, every one graded by the domain's grader in one batch (module docstring)."""
    from domains.code_tasks import tasks_by_id

    built = [_code_candidates(tasks_by_id()[str(t.ground_truth["task_id"])], rng) for t in tasks]
    items = [(t.data_source, answer.response, t.ground_truth) for t, (fixed, _) in zip(tasks, built)
             for answer in fixed.values()]
    items += [(t.data_source, wrong, t.ground_truth) for t, (_, wrongs) in zip(tasks, built) for wrong in wrongs]
    grades = iter(domain.verify_batch(items))
    for fixed, _ in built:
        for answer in fixed.values():
            answer.verdict = next(grades)
    out, start = [], rng.randrange(2)
    for index, (fixed, wrongs) in enumerate(built):
        graded = [(w, next(grades)) for w in wrongs]
        failing = [(w, g) for w, g in graded[1:] if g[0] < 0.5]
        near = [(w, g) for w, g in failing if 0 < g[1]["execution"]["share"] < 1]
        # tasks alternate between a failing mutant and the hard-coded example from a secret start, so a session of
        # two tasks or more holds both shapes of wrong program; a mutant passing some tests beats both
        wrong, verdict = near[0] if near else failing[0] if failing and (index + start) % 2 else graded[0]
        out.append(fixed | {"formatted_wrong": Constructed(wrong, False, verdict)})
    return out


def comment_only_diff(gold: str, rng: random.Random) -> str:
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


def swe_wrong_patch(gold: str, sources: dict[str, str], rng: random.Random, style: str | None = None) -> str:
    """A wrong patch that changes code a policy could change, the bug kept (``probe_answers_swe``; ``style``: the
    diff's, drawn when None); a comment-only change where nothing there can be rewritten."""
    from meta_agent.judge.probe_answers_swe import wrong_patch

    return wrong_patch(gold, sources, rng, style) or comment_only_diff(gold, rng)


def swe_grade(task, patch: str, resolved: bool) -> dict:
    """The record ``swe_env.grade`` writes for a patch that applies, true by construction of the task."""
    from swe_env.checked import load_task

    swe = load_task(str(task.ground_truth["task_id"]))
    tests = {t: "passed" if resolved else "failed" for t in swe.fail_to_pass} | {t: "passed" for t in swe.pass_to_pass}
    return {"status": "resolved" if resolved else "unresolved", "resolved": resolved, "tests": tests,
            "touched_tests": [], "duration_s": 0.0, "detail": "", "findings": []}


def _swe_answers(task, rng: random.Random) -> dict[str, Constructed]:
    """Answers to a bug-fix task with their records, never running a test (module docstring)."""
    from swe_env.checked import load_task
    from swe_env.feedback import execution_feedback
    from swe_env.patch_format import parse_response
    from swe_env.tasks import buggy_sources

    gold = str(task.ground_truth["gold_patch"])
    first_add = next(i for i, ln in enumerate(gold.splitlines()) if ln.startswith("+") and not ln.startswith("+++"))
    sources = buggy_sources(load_task(str(task.ground_truth["task_id"])))
    added = [ln[1:].strip() for ln in gold.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
    answers = {
        "right": (f"```diff\n{gold.rstrip()}\n```", False, True),
        "formatted_wrong": (f"```diff\n{swe_wrong_patch(gold, sources, rng).rstrip()}\n```", False, False),
        "unformatted": ("The bug is fixed by changing the code so that it reads: " + " ".join(added[:3]), False, False),
        "truncated": ("```diff\n" + "\n".join(gold.splitlines()[:first_add]), True, False),
    }
    out = {}
    for kind, (response, truncated, resolved) in answers.items():
        parsed = parse_response(response, sources)
        if parsed.status != "ok":  # the domain's record needs no container for what does not parse
            out[kind] = Constructed(response, truncated, None)
            continue
        info = swe_grade(task, parsed.patch, resolved) | parsed.to_info()
        info["execution"] = execution_feedback(info)
        out[kind] = Constructed(response, truncated, (1.0 if resolved else 0.0, info))
    return out


def math_answers(tasks: list, rng: random.Random, max_tokens: int, domain=None) -> list[dict[str, Constructed]]:
    """Worded like a small policy's answers to arithmetic; the verifier grades them."""
    return [_math_answers(t, rng, max_tokens) for t in tasks]


def swe_answers(tasks: list, rng: random.Random, max_tokens: int, domain=None) -> list[dict[str, Constructed]]:
    """Answers to bug-fix tasks with their records, never running a test (module docstring)."""
    return [_swe_answers(t, rng) for t in tasks]


def _swe_agent_answers(task, rng: random.Random) -> dict[str, Constructed]:
    """Agent-mode episodes of a bug-fix task as ``swe_env.agent_loop`` archives them (``response``: the actions),
    with the record ``BashEnvironment.result`` writes, true by construction (no container, no test run):
    right applies the gold change and submits; formatted-wrong applies a change that keeps the bug and submits;
    unformatted never gave a bash block (``format_error``, no change); truncated explores until the step
    limit (no change)."""
    from swe_env.agent_env import SUBMIT, task_statement
    from swe_env.checked import load_task
    from swe_env.feedback import execution_feedback
    from swe_env.grade import grade
    from swe_env.tasks import buggy_sources

    swe = load_task(str(task.ground_truth["task_id"]))
    gold = str(task.ground_truth["gold_patch"])
    path = next((ln[6:] for ln in gold.splitlines() if ln.startswith("+++ b/")), ".")
    removed = next((ln[1:].strip() for ln in gold.splitlines() if ln.startswith("-") and not ln.startswith("---")
                    and ln[1:].strip()), "def ")
    look = [f"grep -n {json.dumps(removed[:40])} {path}", f"sed -n 1,60p {path}"]
    wrong = swe_wrong_patch(gold, buggy_sources(swe), rng)
    episodes = {  # kind: (actions, patch, exit status, resolved)
        "right": ([*look, f"patch -p1 <<'EOF'\n{gold.rstrip()}\nEOF", SUBMIT], gold, "submitted", True),
        "formatted_wrong": ([*look, f"patch -p1 <<'EOF'\n{wrong.rstrip()}\nEOF", SUBMIT], wrong, "submitted", False),
        "unformatted": ([], "", "format_error", False),
        "truncated": ([*look, "ls", f"sed -n 60,120p {path}", "git status"] * 5, "", "step_limit", False),
    }
    out = {}
    for kind, (actions, patch, exit_status, resolved) in episodes.items():
        record = swe_grade(task, patch, resolved) if patch else grade(swe, patch).to_info()
        info = record | {"patch": patch, "parse_status": "ok"}
        info["execution"] = execution_feedback(info, exit_status=exit_status, actions=actions, steps=len(actions))
        out[kind] = Constructed("\n".join(f"$ {a}" for a in actions), exit_status == "step_limit",
                                (1.0 if resolved else 0.0, info), exit_status, task_statement(swe))
    return out


def swe_agent_answers(tasks: list, rng: random.Random, max_tokens: int, domain=None) -> list[dict[str, Constructed]]:
    """Agent-mode episodes of bug-fix tasks with their records, never running a container (``_swe_agent_answers``)."""
    return [_swe_agent_answers(t, rng) for t in tasks]


AGENT_ANSWER_MAKERS: dict[str, Callable[..., list[dict[str, Constructed]]]] = {"swe": swe_agent_answers}
"""Domain name -> answer maker for agent-mode rounds (``--backend endpoint``), as ``ANSWER_MAKERS``."""

ANSWER_MAKERS: dict[str, Callable[..., list[dict[str, Constructed]]]] = {
    "math": math_answers, "code": code_answers, "swe": swe_answers,
}
"""Domain name -> ``(tasks, rng, max_tokens, domain) -> [{kind: Constructed}, ...]`` (one dict per task)."""
