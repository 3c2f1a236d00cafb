"""Source-level edits of Python code that keep its author's formatting, for the probe's wrong answers.

The probe's wrong programs and patches must not carry a look of their own (issue 45, held-out attacks 1 and 2):
an ``ast.unparse`` mutant is canonical to the character, a patch that only adds a comment changes no code, and a
program moved onto another signature reads names that signature lacks.  Everything here edits the text's
tokens in place, so what is not edited stays as written:

- ``same_meaning(line, rng)``: one line re-spelled (quotes, spacing, commas, parentheses) with the same syntax tree, so
  a patch made of such lines changes code and provably leaves the bug where it was;
- ``token_mutant(code, rng)``: one comparison or arithmetic operator swapped, or one integer moved by one;
- ``renamed(code, mapping)``: names read in the code replaced (not attributes, not keyword arguments);
- ``reformatted(code, rng)``: a few lines re-spelled as ``same_meaning`` does, drawn per call.

    line = same_meaning("    u = int(float('.' + u) * 1000000)", rng)   # or None
"""

from __future__ import annotations

import ast
import io
import random
import re
import tokenize

_SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-", "-": "+", "*": "+",
          "//": "%", "%": "//"}
_COMPARE = {"<", "<=", ">", ">=", "==", "!="}
_SPACED = {"+", "-", "*", "/", "//", "%", "==", "!=", "<", ">", "<=", ">=", "="}


def _tokens(text: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None


def _offsets(text: str) -> list[int]:
    """Character offset of each line's start (1-based line numbers index it directly)."""
    starts, at = [0, 0], 0
    for line in text.splitlines(keepends=True):
        at += len(line)
        starts.append(at)
    return starts


def _splice(text: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    """``text`` with each ``(start, end, replacement)`` (token positions) replaced, last first."""
    starts = _offsets(text)
    for (sl, sc), (el, ec), new in sorted(edits, reverse=True):
        text = text[:starts[sl] + sc] + new + text[starts[el] + ec:]
    return text


def _tree(line: str) -> str | None:
    """The dump of one line's syntax tree, a block's first line completed with a body; None when it does not
    parse on its own."""
    code = re.sub(r"^elif\b", "if", line.strip())
    if code.startswith("except"):
        code = "try:\n    pass\n" + code
    for attempt in (code, code + "\n    pass"):
        try:
            return ast.dump(ast.parse(attempt))
        except SyntaxError:
            continue
    return None


def _requoted(tokens) -> list:
    out = []
    for tok in tokens:
        text = tok.string
        if tok.type == tokenize.STRING and "\\" not in text and len(text) >= 2 and text[0] == text[-1] \
                and text[:3] not in ('"""', "'''"):
            other = "'" if text[0] == '"' else '"'
            if other not in text[1:-1]:
                out.append((tok.start, tok.end, other + text[1:-1] + other))
    return out


def _respaced(tokens, line: str) -> list:
    out = []
    for prev, tok, nxt in zip(tokens, tokens[1:], tokens[2:]):
        if tok.string == "," and tok.end[0] == nxt.start[0] and nxt.string not in ")]}" \
                and nxt.type not in (tokenize.NEWLINE, tokenize.COMMENT):
            out.append((tok.end, nxt.start, "" if line[tok.end[1]:nxt.start[1]] == " " else " "))
            continue
        if tok.type != tokenize.OP or tok.string not in _SPACED or prev.type in (tokenize.OP, tokenize.INDENT):
            continue
        if tok.string == "=" and prev.type == tokenize.NAME and nxt.type != tokenize.OP:
            spaced = line[prev.end[1]:tok.start[1]] == " "
            out.append((prev.end, nxt.start, "=" if spaced else " = "))
        elif tok.string != "=" and prev.end[0] == tok.start[0] == nxt.start[0]:
            spaced = line[prev.end[1]:tok.start[1]] == " "
            out.append((prev.end, nxt.start, tok.string if spaced else f" {tok.string} "))
    return out


def _parenthesised(line: str) -> list:
    found = re.match(r"^(\s*(?:return|[A-Za-z_]\w*\s*=)\s+)(.+?)\s*$", line)
    if found is None or "#" in found.group(2) or found.group(2).endswith((",", "\\", ":")):
        return []
    return [((1, len(found.group(1))), (1, len(line.rstrip())), f"({found.group(2)})")]


def same_meaning(line: str, rng: random.Random, quotes_only: bool = False) -> str | None:
    """``line`` re-spelled with the same syntax tree (quotes swapped, spacing around an operator, parentheses
    around a value), one to two edits drawn from ``rng``; None when no edit keeps its tree (or it does not parse
    on its own, e.g. a line of a bracket that spans lines)."""
    tree = _tree(line)
    tokens = _tokens(line.strip("\n") + "\n")
    if tree is None or tokens is None:
        return None
    body = line.rstrip("\n")
    # quotes_only: the one re-spelling a tidy author makes (spacing and extra parentheses read as odd in a patch)
    choices = _requoted(tokens) + ([] if quotes_only else _respaced(tokens, body) + _parenthesised(body))
    rng.shuffle(choices)
    for count in (2, 1):
        for edit in choices:
            picked = [edit] + [e for e in choices if e is not edit and not _overlap(e, edit)][:count - 1]
            new = _splice(body, [(s, e, t) for s, e, t in picked])
            if new != body and _tree(new) == tree:
                return new
    return None


def _overlap(a, b) -> bool:
    return not (a[1] <= b[0] or b[1] <= a[0])


def token_mutant(code: str, rng: random.Random) -> str | None:
    """``code`` with one operator swapped or one integer moved by one, in place (formatting kept); a comparison
    first (it changes the answer only near its boundary, a near miss); None when no edit parses."""
    tokens = _tokens(code)
    if tokens is None:
        return None
    ops = [t for t in tokens if t.type == tokenize.OP and t.string in _SWAPS]
    ints = [t for t in tokens if t.type == tokenize.NUMBER and t.string.isdigit()]
    compares = [t for t in ops if t.string in _COMPARE]
    for pool in (compares, ops + ints):
        pool = list(pool)
        rng.shuffle(pool)
        for tok in pool:
            new = _SWAPS.get(tok.string) or str(max(0, int(tok.string) + rng.choice((-1, 1))))
            if new == tok.string:
                continue
            mutant = _splice(code, [(tok.start, tok.end, new)])
            try:
                ast.parse(mutant)
            except SyntaxError:
                continue
            return mutant
    return None


def renamed(code: str, mapping: dict[str, str]) -> str:
    """``code`` with every name in ``mapping`` that it reads or binds replaced, attributes (``x.name``) and
    keyword arguments (``f(name=1)``) left as they are; ``code`` itself when it does not tokenize."""
    tokens = _tokens(code)
    if tokens is None or not mapping:
        return code
    edits, depth = [], 0
    for prev, tok, nxt in zip([None] + tokens, tokens, tokens[1:] + [None]):
        if tok.type == tokenize.OP:
            depth += tok.string in "([{"
            depth -= tok.string in ")]}"
        if tok.type != tokenize.NAME or tok.string not in mapping:
            continue
        if prev is not None and prev.string == ".":
            continue
        if depth > 0 and nxt is not None and nxt.string == "=":
            continue
        edits.append((tok.start, tok.end, mapping[tok.string]))
    return _splice(code, edits)


_NOTES = ("# compute the result", "# main logic", "# go through the input", "# build the answer", "# result")


def reformatted(code: str, rng: random.Random) -> str:
    """``code`` with some lines re-spelled (``same_meaning``) and, drawn, a comment or a blank line inside its
    first function: never its own ``ast.unparse`` (a canonical program is a mark of construction)."""
    lines = code.splitlines()
    for i, line in enumerate(lines):
        if line.strip() and not line.lstrip().startswith(("def ", "#", "@")) and rng.random() < 0.5:
            lines[i] = same_meaning(line, rng) or line
    body = next((i + 1 for i, ln in enumerate(lines) if ln.lstrip().startswith("def ") and ln.rstrip().endswith(":")),
                None)
    if body is not None and body < len(lines) and rng.random() < 0.6:
        indent = re.match(r"\s*", lines[body]).group(0)
        lines.insert(body, indent + rng.choice(_NOTES) if rng.random() < 0.7 else "")
    out = "\n".join(lines)
    if _canonical(out):
        out = out.replace("\n", "\n\n", 1) if "\n" in out else out + "\n"
    return out


def _canonical(code: str) -> bool:
    try:
        return ast.unparse(ast.parse(code)).strip() == code.strip()
    except SyntaxError:
        return False
