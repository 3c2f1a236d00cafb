"""Turning a code-domain answer into the program the grader runs, and what harness code may see of its grade.

    parsed = extract_program(response, entry="main_solution")
    parsed.status, parsed.code          # "ok" | "truncated" | "no_code", the code to run

A response holds its program in a fenced block (```python ... ```); the last block that defines the
entry point wins, else the last block.  A fence opened and never closed is ``truncated`` (the
generation budget ran out); its code is still graded, it usually fails to parse.  Without a fence,
a response that is itself Python defining the entry point is taken as is.
"""

from __future__ import annotations

import ast
import re
from typing import NamedTuple

FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
MAX_ERRORS_SHOWN = 3


class ParsedProgram(NamedTuple):
    status: str
    """``ok``, ``truncated`` (an unclosed fence) or ``no_code``."""
    code: str


def _defines(code: str, entry: str) -> bool:
    return re.search(rf"^\s*def\s+{re.escape(entry)}\s*\(", code, re.MULTILINE) is not None


def extract_program(response: str, entry: str) -> ParsedProgram:
    """The program in ``response`` (module docstring)."""
    text = response if isinstance(response, str) else ""
    blocks = [(m.group(1), m.group(0).rstrip().endswith("```") and len(m.group(0)) > 6) for m in FENCE.finditer(text)]
    if blocks:
        defining = [b for b in blocks if _defines(b[0], entry)]
        code, closed = (defining or blocks)[-1]
        return ParsedProgram("ok" if closed else "truncated", code)
    if _defines(text, entry):
        try:
            ast.parse(text)
            return ParsedProgram("ok", text)
        except SyntaxError:
            return ParsedProgram("truncated" if text.count("\n") and not text.endswith("\n") else "ok", text)
    return ParsedProgram("no_code", "")


def with_prompt(code: str, prompt_code: str, entry: str) -> str:
    """A HumanEval answer as a program: the prompt's imports first; the whole prompt when only a body came back."""
    if not prompt_code:
        return code
    if not _defines(code, entry):
        return prompt_code + code
    imports = [line for line in prompt_code.splitlines() if line.startswith(("import ", "from "))]
    return "\n".join(imports + [code]) if imports else code


def execution_feedback(status: str, parse_status: str, tests: list[str], errors: list[str], detail: str,
                       code: str) -> dict:
    """What harness code sees of a graded answer: outcomes per test and the program, never an expected value."""
    passed = sum(1 for t in tests if t == "passed")
    return {
        "status": status, "parse_status": parse_status, "tests": list(tests), "tests_passed": passed,
        "tests_total": len(tests), "share": passed / len(tests) if tests else 0.0,
        "errors": sorted({e for e in errors if e and e != "not run"})[:MAX_ERRORS_SHOWN],
        "detail": detail[:300], "code": code[:4000],
    }
