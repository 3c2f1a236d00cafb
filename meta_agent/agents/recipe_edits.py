"""Text edits the recipe agent applies to harness files.

Each edit takes a file's current text (written by anyone, possibly an LLM) and
returns the new text.  Code edits *wrap* what is there instead of rewriting it:
the new ``compute_score`` / ``keep_group`` calls the previous one, so an edit
composes with whatever the harness already does and the diff reads as one block.
Each appended block starts with a ``# recipe: <rule>`` marker line, which is how
the agent later sees that the change is present.

Nothing here imports or runs harness code: the trusted side only reads text.
"""

from __future__ import annotations

import ast

import yaml

from harness_repo.contract import HarnessConfig


def marker(rule: str) -> str:
    """The comment line that opens the block a rule appends."""
    return f"# recipe: {rule}"


def has_marker(text: str | None, rule: str) -> bool:
    """Whether ``text`` already carries the block of ``rule``."""
    return bool(text) and marker(rule) in text  # type: ignore[operator]


def code_mentions(source: str | None, word: str) -> bool:
    """Whether ``word`` occurs in the code of ``source``: names or non-docstring string literals.

    Comments and docstrings do not count, so a seed saying "``\\boxed{}`` is ignored
    on purpose" does not look like support for it.
    """
    if not source:
        return False
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return word in source
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            if word in node.value:
                return True
        elif isinstance(node, ast.Name | ast.FunctionDef | ast.alias):
            name = getattr(node, "id", None) or getattr(node, "name", None) or ""
            if word in name:
                return True
    return False


def check_python(source: str, path: str) -> str:
    """``source`` if it compiles; ValueError naming ``path`` otherwise (a recipe bug, not a harness bug)."""
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        raise ValueError(f"recipe edit produced invalid Python in {path}: {exc}") from None
    return source


def _append(text: str, block: str) -> str:
    return text.rstrip("\n") + "\n\n" + block.strip("\n") + "\n"


_ACCEPT_BOXED = r'''
# recipe: boxed-answers
# Also accept a final \boxed{...} when the response has no "Answer:" line: the
# policy often states a correct result that way and was paid nothing for it.
import re as _re_boxed

_compute_score_before_boxed = compute_score


def _last_boxed(text):
    """The content of the last boxed{...} in ``text`` (balanced braces), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth = 0
    for i in range(start + len("\\boxed"), len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + len("\\boxed{"):i].strip() or None
    return None


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    text = solution_str or ""
    if not _re_boxed.search(r"(?im)^[ \t*]*answer[ \t*]*:", text):
        boxed = _last_boxed(text)
        if boxed is not None:
            text = text + "\nAnswer: " + boxed
    return _compute_score_before_boxed(data_source, text, ground_truth, extra_info=extra_info, **kwargs)
'''


def accept_boxed(reward_source: str) -> str:
    """``reward.py`` that also scores the last ``\\boxed{}`` when there is no ``Answer:`` line."""
    return check_python(_append(reward_source, _ACCEPT_BOXED), "reward.py")


_FORMAT_CREDIT = r'''
# recipe: format-shaping
# A small credit for ending with a well-formed "Answer: <x>" line even when the
# answer is wrong: most responses end without one and so carry no signal at all.
# The credit stays far below the pay line (0.5), so it cannot pay a wrong answer.
import re as _re_format

_compute_score_before_format_credit = compute_score
_FORMAT_CREDIT = {credit!r}
_FINAL_ANSWER_LINE = _re_format.compile(r"^[ \t*]*answer[ \t*]*:[ \t*]*[^\s*]", _re_format.IGNORECASE)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    result = _compute_score_before_format_credit(
        data_source, solution_str, ground_truth, extra_info=extra_info, **kwargs
    )
    score = result.get("score", 0.0) if isinstance(result, dict) else result
    lines = [line for line in (solution_str or "").splitlines() if line.strip()]
    if lines and _FINAL_ANSWER_LINE.match(lines[-1]) and float(score or 0.0) < _FORMAT_CREDIT:
        if isinstance(result, dict):
            return {{**result, "score": _FORMAT_CREDIT, "format_credit": True}}
        return _FORMAT_CREDIT
    return result
'''


def format_credit(reward_source: str, credit: float) -> str:
    """``reward.py`` that pays ``credit`` for a well-formed final ``Answer:`` line when it would pay less."""
    return check_python(_append(reward_source, _FORMAT_CREDIT.format(credit=credit)), "reward.py")


_FORMAT_REMINDER = """
{# recipe: format-shaping #}
Remember: your reply must end with one final line of the form "Answer: <number>", and nothing after it.
"""


def repeat_format(user_prompt: str | None) -> str:
    """``prompts/user.j2`` that restates the final-answer format at its end."""
    return _append(user_prompt if user_prompt is not None else "{{ question }}\n", _FORMAT_REMINDER)


_DROP_FLAT_GROUPS = r'''
# recipe: dynamic-sampling
# Drop GRPO groups whose rewards are all equal: their advantages are all zero, so
# they only dilute the batch (DAPO's dynamic sampling).  A group with an unknown
# reward is kept and left to the previous filter.
_keep_group_before_dynamic_sampling = globals().get("keep_group")


def keep_group(group):
    rewards = [traj.get("reward") for traj in group]
    if len(rewards) > 1 and all(isinstance(r, (int, float)) for r in rewards) and max(rewards) - min(rewards) < 1e-9:
        return False
    if _keep_group_before_dynamic_sampling is None:
        return True
    return _keep_group_before_dynamic_sampling(group)
'''


def drop_flat_groups(filters_source: str | None) -> str:
    """``filters.py`` whose ``keep_group`` also drops zero-variance groups (created when missing)."""
    base = filters_source if filters_source is not None else '"""Trajectory and group filters."""\n'
    return check_python(_append(base, _DROP_FLAT_GROUPS), "filters.py")


def load_config(text: str) -> dict:
    """``harness.yaml`` text as a plain dict (not validated: the edit validates what it writes)."""
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("harness.yaml is not a mapping; fix main before running the recipe agent")
    return data


def dump_config(data: dict, original: str) -> str:
    """``data`` as harness.yaml text, validated by HarnessConfig; keeps ``original``'s leading comment."""
    HarnessConfig.model_validate(data)  # a recipe must never write an invalid harness.yaml
    header = []
    for line in original.splitlines():
        if not line.startswith("#"):
            break
        header.append(line)
    body = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    return "\n".join(header + [body]) if header else body
