"""Reading and writing ``harness.yaml`` for a recipe: edits made in place, so the file's text stays.

A recipe changes a knob or a task's config; the branch's diff must show that line and nothing else, and the
seed's comments (why 4x4 groups, why 2e-5) must survive the merge. So the change is applied to a round-trip
parse of main's text (ruamel.yaml keeps comments, key order, flow style and the spelling of every scalar it
does not touch) and only the changed values are written.
"""

from __future__ import annotations

import io

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError as RoundTripError
from ruamel.yaml.representer import RoundTripRepresenter

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

    ``data`` is applied to a round-trip parse of ``original``: unchanged values keep their text (comments,
    order, ``2.0e-5``), changed ones are rewritten on their own line, new keys go at the end of their mapping.
    The text must load back as ``data``; if it does not (or ``original`` does not parse), the whole form is
    written, keeping ``original``'s leading comment.
    """
    HarnessConfig.model_validate(data)  # a recipe must never write an invalid harness.yaml
    edited = _round_trip(original, data)
    if edited is not None and yaml.safe_load(edited) == data:
        return edited
    header = []
    for line in original.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return "\n".join(header + [body]) if header else body


def _round_trip(original: str, data: dict) -> str | None:
    """``original`` with ``data``'s differences written into it; None when ``original`` is not a YAML mapping."""
    rt = YAML(typ="rt")
    rt.Representer = _Representer
    rt.preserve_quotes = True
    rt.width = 4096  # never re-wrap a long line the seed wrote on one line
    rt.indent(mapping=2, sequence=4, offset=2)  # the seeds' "  - name:" under "tasks:"
    try:
        doc = rt.load(original)
    except RoundTripError:
        return None
    if not isinstance(doc, CommentedMap):
        return None
    _merge_map(doc, data)
    out = io.StringIO()
    rt.dump(doc, out)
    return out.getvalue()


def _float_text(value: float) -> str:
    """A new float spelled as the seeds spell theirs (``1.0e-5``), which every YAML 1.1 reader takes for a
    float: PyYAML reads Python's ``1e-05`` as a string."""
    text = repr(float(value))
    if "e" not in text or not value == value or value in (float("inf"), float("-inf")):
        return yaml.safe_dump(float(value)).strip().removesuffix("...").strip()
    mantissa, exponent = text.split("e")
    mantissa = mantissa if "." in mantissa else mantissa + ".0"
    return f"{mantissa}e{'-' if int(exponent) < 0 else '+'}{abs(int(exponent))}"


class _Representer(RoundTripRepresenter):
    """Round-trip output with new floats written by ``_float_text`` (untouched ones keep their own text)."""


_Representer.add_representer(
    float, lambda rep, value: rep.represent_scalar("tag:yaml.org,2002:float", _float_text(value)))


def _same(old, new) -> bool:
    """Equal in value and kind (YAML's ``true`` is not ``1``), so an untouched scalar keeps its spelling."""
    if isinstance(old, bool) != isinstance(new, bool):
        return False
    return old == new


def _merge(old, new):
    """``new`` with ``old``'s containers reused where they can be, so their comments and styles stay."""
    if isinstance(old, CommentedMap) and isinstance(new, dict):
        _merge_map(old, new)
        return old
    if isinstance(old, CommentedSeq) and isinstance(new, list):
        _merge_seq(old, new)
        return old
    if not isinstance(old, (dict, list)) and not isinstance(new, (dict, list)) and _same(old, new):
        return old
    return new


def _merge_map(old: CommentedMap, new: dict) -> None:
    for key in [k for k in old if k not in new]:
        del old[key]
    for key, value in new.items():
        if key in old:
            merged = _merge(old[key], value)
            if merged is not old[key]:
                old[key] = merged
        else:
            old[key] = value  # appended at the end of the mapping


def _merge_seq(old: CommentedSeq, new: list) -> None:
    del old[len(new):]
    for i, value in enumerate(new):
        if i < len(old):
            merged = _merge(old[i], value)
            if merged is not old[i]:
                old[i] = merged
        else:
            old.append(value)
