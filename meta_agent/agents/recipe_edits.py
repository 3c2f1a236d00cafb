"""Text edits the recipe agent applies to harness files.

Each edit takes a file's current text (written by anyone, possibly an LLM) and
returns the new text.  Code edits *wrap* what is there instead of rewriting it:
the new ``compute_score`` calls the previous one, so an edit composes with
whatever the harness already does and the diff reads as one block.  Each appended
block starts with a ``# recipe: <rule>`` marker line (inside a Jinja comment in
templates), which is how the agent later sees that the change is present.

Nothing here imports or runs harness code: the trusted side only reads text.
"""

from __future__ import annotations

import ast
import re

from domains import Domain
from harness_repo.contract import HarnessConfig, TaskSpec
from meta_agent.agents.recipe_yaml import dump_config, load_config  # noqa: F401 - the recipes call edits.*
from meta_agent.cost import RoundLimits, cost_check, predict
from meta_agent.names import get_domain


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
# Read the final answer as the trusted verifier does: the last \boxed{...} when it
# comes after the last "Answer:" line (or there is none).  A correct boxed answer
# was verified right and paid nothing; an "Answer:" line overridden by a later box
# was paid for an answer the verifier did not read.
import re as _re_boxed

_compute_score_before_boxed = compute_score
_ANSWER_LINE_BOXED = _re_boxed.compile(r"(?im)^[ \t*]*answer[ \t*]*:")


def _last_boxed(text):
    """Where the last closed boxed{...} starts and its content (None when empty); None without one."""
    start = len(text)
    while (start := text.rfind("\\boxed{", 0, start)) >= 0:
        depth = 0
        for i in range(start + len("\\boxed"), len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return start, " ".join(text[start + len("\\boxed{"):i].split()) or None
    return None  # an unclosed box is no answer: the verifier skips it too


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    text = solution_str or ""
    boxed = _last_boxed(text)
    lines = [m.start() for m in _ANSWER_LINE_BOXED.finditer(text)]
    if boxed is not None and (not lines or boxed[0] > lines[-1]):
        # the box is the final answer: score it alone (an empty box is no answer)
        text = "Answer: " + boxed[1] if boxed[1] else ""
    return _compute_score_before_boxed(data_source, text, ground_truth, extra_info=extra_info, **kwargs)
'''


def accept_boxed(reward_source: str) -> str:
    """``reward.py`` that also scores the last ``\\boxed{}`` when it comes after the last ``Answer:`` line."""
    return check_python(_append(reward_source, _ACCEPT_BOXED), "reward.py")


# A prompt line, not a format credit in the reward: why is in ``recipe.final_answer_prompt``.
_FINAL_LINE_REQUEST = """
{# recipe: final-answer-prompt #}
Always end with the line "Answer: <number>", even when you are unsure: then give your best guess.
Write nothing after that line.
"""


def asks_for_final_line(user_prompt: str | None) -> bool:
    """Whether ``prompts/user.j2`` already asks for an ``Answer:`` line (Jinja comments aside).

    The seed's user prompt ends with one.  Asking a second time is no repair: in six live cells of the
    repair bench whose prompt already asked, the repeated request lowered ``no_final_answer_rate`` in none.
    """
    if not user_prompt:
        return False
    return "Answer:" in re.sub(r"\{#.*?#\}", "", user_prompt, flags=re.S)


_VALUE_ALONE = re.compile(
    r"\b(?:only|just|solely)\b[^.!?\n]{0,40}\b(?:number|answer|result|value|digits?)\b"
    r"|\b(?:number|answer|result|value)s?\s+only\b|\bnothing else\b"
    r"|\b(?:no|without(?: any)?)\s+(?:other |further |extra )?(?:words|text|explanation|working|reasoning|steps)\b",
    re.IGNORECASE)
"""A request for the bare value: a reply that obeys it has no ``Answer:`` line for the verifier to read."""


def drop_value_alone(user_prompt: str) -> str:
    """``user_prompt`` without its own sentences asking for the value alone, in lines of plain text (a line with
    Jinja in it is kept whole: what it renders is the task's, not an instruction of the template's)."""
    lines = []
    for line in user_prompt.split("\n"):
        if re.search(r"\{[{%#]", line) or not _VALUE_ALONE.search(line):
            lines.append(line)
            continue
        kept = " ".join(s for s in re.split(r"(?<=[.!?])\s+", line.strip()) if not _VALUE_ALONE.search(s))
        if kept:
            lines.append(kept)
    return "\n".join(lines)


def ask_for_final_line(user_prompt: str | None) -> str:
    """``prompts/user.j2`` that ends by asking for the final ``Answer:`` line, best guess included, its own
    requests for the value alone taken out (left in, the nearer instruction still contradicts the line)."""
    return _append(drop_value_alone(user_prompt) if user_prompt is not None else "{{ question }}\n",
                   _FINAL_LINE_REQUEST)


def refusal(data: dict) -> str | None:
    """Why the gate would refuse harness.yaml ``data`` unrun (schema, the domain's task check, the trusted
    per-round limits), or None."""
    try:
        config = HarnessConfig.model_validate(data)
        get_domain(config.domain).check_task_specs(config.tasks)
    except ValueError as exc:  # pydantic's ValidationError included
        return f"harness.yaml would be refused: {exc}"
    cost = cost_check(predict(config.grpo), RoundLimits())
    return None if cost["passed"] else f"harness.yaml would be refused: {cost['detail']}"


def harder(domain: Domain, name: str, task_config: dict, knobs: tuple[str, ...]) -> tuple[str, dict] | None:
    """``task_config`` one step harder: the knob of ``knobs`` stretched least (``max_x - min_x``) + 1, if the
    domain accepts it, else the next one; None when none can rise."""
    present = [k for k in knobs if isinstance(task_config.get(k), int) and not isinstance(task_config[k], bool)]
    # terms and digits take turns: the knob furthest from being stretched goes first
    for knob in sorted(present, key=lambda k: task_config[k] - int(task_config.get("min" + k[3:], task_config[k]))):
        config = dict(task_config, **{knob: task_config[knob] + 1})
        try:
            domain.check_task_specs([TaskSpec(name=name, config=config)])
        except ValueError:
            continue
        return knob, config
    return None


_KEEP_EVERYTHING = '''
# recipe: loosen-filters
# The filters above kept too little of the batch to learn from (the digest's kept_share): every
# trajectory the harness can judge trains again.  These definitions override the ones above,
# which stay for the diff and for a later, more careful filter.


def keep_trajectory(traj):
    return True


def keep_group(group):
    return True
'''


def _returns_true(node: ast.FunctionDef) -> bool:
    body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) \
        and isinstance(node.body[0].value, ast.Constant) else node.body  # a docstring does not count
    return len(body) == 1 and isinstance(body[0], ast.Return) and isinstance(body[0].value, ast.Constant) \
        and body[0].value.value is True


def keeps_everything(filters_source: str | None) -> bool:
    """Whether ``filters.py``'s last ``keep_trajectory`` and ``keep_group`` (absent ones keep all) are
    ``return True``; code that does not parse keeps nothing for sure, so False."""
    if filters_source is None:
        return True
    try:
        tree = ast.parse(filters_source)
    except SyntaxError:
        return False
    last = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    return all(_returns_true(last[name]) for name in ("keep_trajectory", "keep_group") if name in last)


def ends_keeping_everything(filters_source: str | None) -> bool:
    """Whether ``filters.py`` ends in :func:`keep_everything`'s override (nothing after it can rebind a filter)."""
    return filters_source is None or filters_source.rstrip().endswith(_KEEP_EVERYTHING.strip())


def keep_everything(filters_source: str) -> str:
    """``filters.py`` whose filters keep every trajectory and group, the old functions left above."""
    return check_python(_append(filters_source, _KEEP_EVERYTHING), "filters.py")


_VERIFIER_ANSWERS = r'''
# recipe: verifier-answers
# Pay exactly the final answers the trusted verifier accepts for a numeric gold answer: the last
# \boxed{...} or the text after the last "Answer:" anywhere in a line, whichever comes later; one
# number and nothing else (integer, decimal, 1,234, a reduced fraction or \frac{a}{b}, "x = 7"),
# wrappers ($, **, backticks, \(..\)) tolerated; hedges ("6 or 7"), unreduced fractions (14/2) and
# answers over 200 characters are wrong.  A gold answer that is not a number is paid only when
# equal after collapsing whitespace: stricter than the verifier (no symbolic match), never looser.
# This replaces the reward above: unpaid correct answers are paid and paid wrong ones are not.
import json as _json_va
import math as _math_va
import re as _re_va
from fractions import Fraction as _Fraction_va

_VA_BOXED = _re_va.compile(r"\\boxed\s*\{")
_VA_ANSWER = _re_va.compile(r"(?i)\banswer\s*:[ \t]*([^\n]*)")
_VA_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("`", "`"), ("**", "**"))
_VA_HEDGE = _re_va.compile(r"(?i)\b(?:or|and|maybe|perhaps|possibly|either)\b|[;|±]|\\(?:pm|mp)(?![A-Za-z])")
_VA_THOUSANDS = _re_va.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_VA_VARIABLE = _re_va.compile(r"^[A-Za-z]\s*=\s*")
_VA_DECIMAL = _re_va.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")
_VA_FRACTION = _re_va.compile(r"([+-]?)(\d+)\s*/\s*(\d+)")
_VA_LATEX_FRACTION = _re_va.compile(r"([+-]?)\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")


def _va_balanced(text, start):
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def _va_final(text):
    candidates = []
    for m in _VA_BOXED.finditer(text):
        content = _va_balanced(text, m.end())
        if content is not None:
            candidates.append((m.start(), content))
    for m in _VA_ANSWER.finditer(text):
        value = m.group(1)
        inner = _VA_BOXED.search(value)
        if inner:
            value = _va_balanced(value, inner.end()) or value
        candidates.append((m.start(), value))
    if not candidates:
        return None
    answer = max(candidates, key=lambda c: c[0])[1].strip().rstrip(".").strip().strip("*").strip()
    for w in ("$", "`"):
        if answer.startswith(w) and answer.endswith(w) and len(answer) >= 2 * len(w):
            answer = answer[len(w):len(answer) - len(w)].strip()
    return answer.rstrip(".").strip() or None


def _va_unwrap(text):
    text = text.strip().rstrip(".").strip().replace("\u2212", "-")
    for left, right in _VA_WRAPPERS:
        if text.startswith(left) and text.endswith(right) and len(text) >= len(left) + len(right):
            return text[len(left):len(text) - len(right)].strip().rstrip(".").strip()
    return text


def _va_number(text, lowest_terms):
    if _VA_DECIMAL.fullmatch(text):
        return _Fraction_va(text.replace(",", ""))
    m = _VA_FRACTION.fullmatch(text) or _VA_LATEX_FRACTION.fullmatch(text)
    if m is None:
        return None
    sign, p, q = m.group(1), int(m.group(2)), int(m.group(3))
    if q == 0 or (lowest_terms and (q == 1 or _math_va.gcd(p, q) != 1)):
        return None
    return _Fraction_va(-p if sign == "-" else p, q)


def _va_several(pred, gold):
    if {h.group(0).lower() for h in _VA_HEDGE.finditer(pred)} - {h.group(0).lower() for h in _VA_HEDGE.finditer(gold)}:
        return True
    return "," in _VA_THOUSANDS.sub("", pred) and "," not in _VA_THOUSANDS.sub("", gold)


def _va_gold(ground_truth):
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        ground_truth = _json_va.loads(ground_truth)
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("answer")
    return "" if ground_truth is None else _va_unwrap(str(ground_truth))


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    gold = _va_gold(ground_truth)
    pred = _va_final(solution_str if isinstance(solution_str, str) else "")
    if pred is None or not gold:
        return {"score": 0.0, "pred": pred, "format_ok": False}
    if len(pred) > 200:
        return {"score": 0.0, "pred": pred[:200], "format_ok": False}
    value = _va_unwrap(pred)
    correct = False
    if value and not _va_several(value, gold):
        gold_value = _va_number(gold, lowest_terms=False)
        if gold_value is not None:
            stated = _VA_VARIABLE.sub("", value, count=1)
            correct = "=" not in stated and _va_number(stated, lowest_terms=True) == gold_value
        else:
            correct = " ".join(value.split()) == " ".join(gold.split())
    return {"score": 1.0 if correct else 0.0, "pred": pred, "format_ok": True}
'''


def verifier_answers(reward_source: str) -> str:
    """``reward.py`` whose ``compute_score`` pays exactly the numeric final answers the math verifier accepts
    (every form it reads, nothing it rejects) and, for a gold answer that is not a number, only an equal one."""
    return check_python(_append(reward_source, _VERIFIER_ANSWERS), "reward.py")
