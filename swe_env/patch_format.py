"""A policy's answer -> one unified diff (trusted parsing, on the host).

Patch mode accepts two answer formats and turns both into a unified diff with
``a/`` and ``b/`` prefixes, the form the grader applies:

- a unified diff, fenced (```` ```diff ````) or bare, starting at ``diff --git`` or ``--- a/``;
- search/replace edits (SWE-RL / Aider style), one or more blocks::

      path/to/file.py
      <<<<<<< SEARCH
      old lines
      =======
      new lines
      >>>>>>> REPLACE

  each SEARCH text must occur exactly once in the buggy file (``sources``), so an
  edit means one thing.

Anything else is ``malformed`` with the reason; an answer with no edit at all is
``empty``.  Nothing here runs or applies the patch: the grader does.

    parsed = parse_response(response, sources={"pkg/mod.py": buggy_text})
    parsed.status, parsed.patch   # "ok", "--- a/pkg/mod.py\\n+++ b/pkg/mod.py\\n@@ ..."
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

MAX_RESPONSE_CHARS = 200_000
"""Longer answers are malformed: no honest patch of a task's few source files is this long."""
FENCE = re.compile(r"```[ \t]*(?:diff|patch)?[ \t]*\n(.*?)(?:\n```|\Z)", re.DOTALL)
EDIT = re.compile(r"^[ \t]*([\w./-]+\.\w+)[ \t]*\n<{7} ?SEARCH[ \t]*\n(.*?)^={7}[ \t]*\n(.*?)^>{7} ?REPLACE[ \t]*$",
                  re.DOTALL | re.MULTILINE)
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@")
SAFE_PATH = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))[\w./-]+$")


@dataclass(frozen=True)
class ParsedPatch:
    """What an answer held: ``status`` ``ok`` / ``empty`` / ``malformed``, the diff, and why."""

    status: str
    patch: str
    format: str
    """``diff``, ``search_replace`` or ``none``."""
    detail: str = ""

    def to_info(self) -> dict:
        return {"parse_status": self.status, "patch_format": self.format, "parse_detail": self.detail,
                "patch": self.patch}


def parse_response(response: str, sources: dict[str, str]) -> ParsedPatch:
    """The answer's edits as one unified diff over ``sources`` (path -> buggy text); never raises."""
    if not isinstance(response, str) or not response.strip():
        return ParsedPatch("empty", "", "none", "the answer is empty")
    if len(response) > MAX_RESPONSE_CHARS:
        return ParsedPatch("malformed", "", "none", f"the answer has {len(response)} characters "
                                                    f"(at most {MAX_RESPONSE_CHARS})")
    if "<<<<<<< SEARCH" in response or "<<<<<<<SEARCH" in response:
        return _from_edits(response, sources)
    diff = _diff_text(response)
    if diff is None:
        return ParsedPatch("malformed", "", "none", "no unified diff (--- a/... +++ b/... @@) and no "
                                                    "SEARCH/REPLACE block found")
    problem = diff_problem(diff)
    if problem:
        return ParsedPatch("malformed", "", "diff", problem)
    return ParsedPatch("ok", diff, "diff")


def _diff_text(response: str) -> str | None:
    candidates = [m.group(1) for m in FENCE.finditer(response)] + [response]
    for text in candidates:
        lines = text.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith(("diff --git ", "--- "))), None)
        if start is not None:
            body = lines[start:]
            while body and body[-1] == "":  # a blank context line is " ", and stays
                body.pop()
            return "\n".join(body) + "\n"
    return None


def diff_problem(diff: str) -> str | None:
    """Why ``diff`` is not a well-formed unified diff over safe relative paths, or None."""
    files, hunks = 0, 0
    lines = diff.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("+++ ") and i > 0 and lines[i - 1].startswith("--- "):
            files += 1
            for side in (lines[i - 1][4:], line[4:]):
                path = side.split("\t")[0].strip()
                if path == "/dev/null":
                    continue
                path = path[2:] if path.startswith(("a/", "b/")) else path
                if not SAFE_PATH.match(path):
                    return f"line {i + 1}: unsafe or odd path {path!r} (use a repository-relative path)"
        elif line.startswith("@@"):
            if not HUNK.match(line):
                return f"line {i + 1}: malformed hunk header {line[:60]!r}"
            hunks += 1
    if not files:
        return "no file header (a '--- a/PATH' line followed by '+++ b/PATH')"
    if not hunks:
        return "no hunk (an '@@ -l,n +l,n @@' line)"
    return None


def _from_edits(response: str, sources: dict[str, str]) -> ParsedPatch:
    edits = EDIT.findall(response)
    if not edits:
        return ParsedPatch("malformed", "", "search_replace", "a SEARCH block without a file path line before it, "
                                                              "'=======' or '>>>>>>> REPLACE'")
    new = dict(sources)
    for path, search, replace in edits:
        path = path.strip()
        if path not in sources:
            known = ", ".join(sorted(sources)) or "none"
            return ParsedPatch("malformed", "", "search_replace", f"edit of {path!r}, which is not a file shown "
                                                                  f"(files: {known})")
        count = new[path].count(search) if search else 0
        if count != 1:
            why = "is empty" if not search else f"occurs {count} times (it must occur exactly once)"
            return ParsedPatch("malformed", "", "search_replace", f"the SEARCH text for {path} {why}")
        new[path] = new[path].replace(search, replace, 1)
    patch = unified_diff(sources, new)
    if not patch:
        return ParsedPatch("empty", "", "search_replace", "the edits change nothing")
    return ParsedPatch("ok", patch, "search_replace")


def unified_diff(old: dict[str, str], new: dict[str, str]) -> str:
    """A ``git apply``-able diff from ``old`` to ``new`` (path -> text; a path missing on one side is added/deleted)."""
    parts = []
    for path in sorted(set(old) | set(new)):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        a = [] if before is None else _lines(before)
        b = [] if after is None else _lines(after)
        from_name = "/dev/null" if before is None else f"a/{path}"
        to_name = "/dev/null" if after is None else f"b/{path}"
        parts.append("".join(difflib.unified_diff(a, b, from_name, to_name, n=3)))
    return "".join(parts)


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines
