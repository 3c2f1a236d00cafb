"""Reading and writing ``harness.yaml`` for a recipe: knob changes edited in place so the file's comments stay."""

from __future__ import annotations

import re

import yaml

from harness_repo.contract import HarnessConfig
from meta_agent.errors import UserError


def load_config(text: str) -> dict:
    """``harness.yaml`` text as a plain dict (not validated: the edit validates what it writes); a
    ``UserError`` when main's file is not a YAML mapping."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"main's harness.yaml is not valid YAML ({exc}); fix it on main (the run's harness "
                        "repo) before running the recipe agent") from None
    if not isinstance(data, dict):
        raise UserError(f"main's harness.yaml is a {type(data).__name__}, not a mapping of settings; fix it on main "
                        "(the run's harness repo) before running the recipe agent")
    return data


def dump_config(data: dict, original: str) -> str:
    """``data`` as harness.yaml text, validated by HarnessConfig.

    A change of knob values (top-level or under ``grpo:``, the recipes' usual edit) is written into
    ``original`` line by line, so its comments stay and the branch's diff shows only what changed; any other
    change is written whole, keeping ``original``'s leading comment.  Either way the text must load back as
    ``data``, else the whole form is used.
    """
    HarnessConfig.model_validate(data)  # a recipe must never write an invalid harness.yaml
    edited = _edit_values(original, data)
    if edited is not None and yaml.safe_load(edited) == data:
        return edited
    header = []
    for line in original.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return "\n".join(header + [body]) if header else body


_SCALAR = (str, int, float, bool)


def _edit_values(original: str, data: dict) -> str | None:
    """``original`` with the changed scalar values of ``data`` (top level and ``grpo:``) replaced in place and
    new ``grpo`` knobs added at the end of its block; None when the change is of another kind."""
    try:
        before = yaml.safe_load(original)
    except yaml.YAMLError:
        return None
    if not isinstance(before, dict) or set(before) != set(data):
        return None
    lines = original.splitlines()
    for key in data:
        old, new = before[key], data[key]
        if old == new:
            continue
        if key == "grpo" and isinstance(old, dict) and isinstance(new, dict) and set(old) <= set(new):
            block = _block(lines, "grpo")
            if block is None:
                return None
            for knob in new:
                if knob in old and old[knob] != new[knob]:
                    if not (isinstance(new[knob], _SCALAR) and _set_value(lines, block, knob, new[knob])):
                        return None
            added = [f"  {knob}: {_scalar(new[knob])}" for knob in new if knob not in old]
            lines[block[1]:block[1]] = added
        elif isinstance(old, _SCALAR) and isinstance(new, _SCALAR):
            if not _set_value(lines, (0, len(lines)), key, new, indent=""):
                return None
        else:
            return None
    return "\n".join(lines) + "\n"


def _block(lines: list[str], key: str) -> tuple[int, int] | None:
    """The line range of a top-level mapping's entries (after ``key:``, up to the next top-level line)."""
    start = next((i for i, line in enumerate(lines) if re.match(rf"{key}:\s*(#.*)?$", line)), None)
    if start is None:
        return None
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " #"):
        end += 1
    while end > start + 1 and not lines[end - 1].startswith("  "):  # trailing blanks/comments stay after
        end -= 1
    return start + 1, end


def _set_value(lines: list[str], span: tuple[int, int], key: str, value, indent: str = "  ") -> bool:
    """Replace ``key``'s value on its one line within ``span``, keeping a trailing comment; False if not there."""
    pattern = re.compile(rf"^({re.escape(indent)}{re.escape(key)}:\s*)([^#]*?)(\s+#.*)?$")
    for i in range(*span):
        match = pattern.match(lines[i])
        if match:
            lines[i] = f"{match.group(1)}{_scalar(value)}{match.group(3) or ''}"
            return True
    return False


def _scalar(value) -> str:
    """One YAML scalar as ``safe_dump`` writes it (no document end marker)."""
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()
