"""Render the meta agent's Jinja2 templates from the repo-level ``prompts/`` folder.

Templates use ``StrictUndefined``: a field the template names but the data lacks
is an error, never a silently empty string in a prompt.

    text = render("digest.md.j2", d=digest)
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import jinja2


def prompts_dir() -> Path:
    """The ``prompts/`` folder at the repository root (a plain folder, not a package)."""
    return Path(__file__).resolve().parents[1] / "prompts"


def fmt_num(value: object, digits: int = 3) -> str:
    """A number for humans: ``n/a`` for None/NaN, ints as ints, floats with ``digits`` decimals."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def fmt_delta(value: object, digits: int = 3) -> str:
    """A signed change, ``n/a`` when unknown."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{float(value):+.{digits}f}"  # type: ignore[arg-type]


def one_line(text: object) -> str:
    """Collapse newlines so an excerpt fits in a Markdown line or table cell."""
    return str(text).replace("\r", "").replace("\n", " ⏎ ").replace("|", "\\|")


HARNESS_TEXT_CHARS = 160
"""Harness-written text (a diagnostic's message) shown to people and agents is cut to this many characters."""
_NAME = re.compile(r"[^A-Za-z0-9_.:/-]")


def harness_quote(text: object, limit: int = HARNESS_TEXT_CHARS) -> str:
    """Text a harness wrote, as quoted, length-capped data marked as the harness's (never as instructions).

    One line, at most ``limit`` characters, inner quotes escaped, so it cannot end the quotation
    or pass itself off as the digest's or the controller's own words.
    """
    body = one_line(text).replace("\\", "\\\\").replace('"', '\\"')
    if len(body) > limit:
        body = body[:limit] + " …"
    return f'[harness diagnostic text, quoted data] "{body}"'


def harness_name(text: object, limit: int = 80) -> str:
    """A name a harness chose (a finding's), restricted to ``[A-Za-z0-9_.:/-]`` and ``limit`` characters."""
    return _NAME.sub("_", str(text))[:limit] or "unnamed"


def environment() -> jinja2.Environment:
    """The Jinja2 environment over :func:`prompts_dir` with the number filters registered."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(prompts_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=fmt_num, delta=fmt_delta, one_line=one_line, harness=harness_quote)
    return env


def render(name: str, **variables: object) -> str:
    """Render template ``name`` (a path under ``prompts/``) with ``variables``.

    Raises ``jinja2.TemplateNotFound`` naming the template when it is missing and
    ``jinja2.UndefinedError`` naming the field when the data lacks one.
    """
    return environment().get_template(name).render(**variables)
