"""Final answers of math responses: extraction and exact comparison with the gold (trusted).

The verifier scores 1.0 or 0.0, never partial credit (reasoning-gym's scorers give
0.5 to ``70`` or ``-7`` for gold ``7``, so they are not used).  Its rules, in order:

1. The final answer is the last ``\\boxed{...}`` or the text after the last
   ``Answer:``, whichever comes later; none (or an empty / unclosed one) scores 0.
   Earlier answers in the response do not count, right or wrong: the last one is final.
2. Tolerated around it: whitespace, a trailing period, markdown ``*`` / ``**``,
   one pair of ``$``, ``$$``, backticks, ``\\(...\\)`` or ``\\[...\\]``, and the
   Unicode minus.  A final answer over ``MAX_PRED_CHARS`` is 0 without parsing.
3. Several candidates are wrong: ``or``, ``and``, ``maybe``, ``perhaps``,
   ``possibly``, ``either``, ``;``, ``|``, ``±`` / ``\\pm``, or a comma that is not a
   thousands separator (``6, 7``, ``6,7``; ``1,234`` is one number) -- unless the
   gold answer itself contains that word or separator.
4. A gold answer that is a number (integer, decimal, fraction) is compared as an
   exact rational: the prediction must be one number and nothing else -- an
   integer or decimal (``+7``, ``7.0``, ``.5``, ``1,234``; commas are the only
   thousands separator, so ``1 234`` is two numbers) or a fraction in lowest
   terms (``3/4``, ``\\frac{3}{4}``).  So ``6.0`` == ``6`` and ``1/2`` == ``0.5``, but
   ``14/2`` and ``2/4`` are unfinished work, and ``7x``, ``7 apples``, ``1+6``,
   ``7 (approx)`` and scientific notation are not numbers.  The one equation
   accepted is a single-letter variable set to the number (``x = 7``, as
   simple_equations answers are phrased); any other ``=`` is wrong.
5. A gold answer that is not a number matches if equal after collapsing
   whitespace; otherwise math-verify compares both as LaTeX, and the prediction
   must parse whole (no trailing words), contain no free symbol the gold lacks
   (``x + y`` for ``x + 1``), no ``=`` unless the gold has one, and no unevaluated
   integral, derivative, sum, product or limit (a restated question is not an
   answer).  math-verify's signal-based timeouts only work on the main thread;
   elsewhere they are off and ``MAX_PRED_CHARS`` bounds the work.

The rules do not depend on the data source.  ``info`` always holds ``reason``,
``pred`` and ``method`` (``numeric``, ``exact``, ``symbolic`` or None).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from fractions import Fraction
from typing import Any

MAX_PRED_CHARS = 200  # longer "answers" are not worth a sympy parse that could run for minutes
MATH_VERIFY_TIMEOUT_S = 5

# math-verify warns once per process that we disabled its signal-based timeouts.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def gold_text(ground_truth: Any) -> str:
    """The gold answer as text ("" when there is none); verl may hand the dict over as JSON text."""
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            return ""
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("answer")
    return "" if ground_truth is None else _unwrap(str(ground_truth))


# -- final-answer extraction -----------------------------------------------------------------

_BOXED = re.compile(r"\\boxed\s*\{")
_ANSWER_LINE = re.compile(r"(?i)\banswer\s*:[ \t]*([^\n]*)")


def extract_final_answer(response: str) -> str | None:
    """The last ``\\boxed{...}`` content or the text after the last ``Answer:``, whichever comes later."""
    candidates: list[tuple[int, str]] = []
    for match in _BOXED.finditer(response):
        content = _balanced(response, match.end())
        if content is not None:
            candidates.append((match.start(), content))
    for match in _ANSWER_LINE.finditer(response):
        text = match.group(1)
        inner = _BOXED.search(text)
        if inner:  # "Answer: \boxed{7}" -> 7
            text = _balanced(text, inner.end()) or text
        candidates.append((match.start(), text))
    if not candidates:
        return None
    answer = _clean(max(candidates, key=lambda c: c[0])[1])
    return answer or None


def _balanced(text: str, start: int) -> str | None:
    """Content from ``start`` up to the brace closing the one just before it; None if unclosed."""
    depth = 1
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
    return None


def _clean(answer: str) -> str:
    # "*" at either end is markdown ("**Answer:** 7", "**7**"), never part of a final answer.
    answer = answer.strip().rstrip(".").strip().strip("*").strip()
    for wrapper in ("$", "`"):
        if answer.startswith(wrapper) and answer.endswith(wrapper) and len(answer) >= 2 * len(wrapper):
            answer = answer[len(wrapper) : len(answer) - len(wrapper)].strip()
    return answer.rstrip(".").strip()


# -- judging one final answer ----------------------------------------------------------------

_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("`", "`"), ("**", "**"))
_HEDGE = re.compile(r"(?i)\b(?:or|and|maybe|perhaps|possibly|either)\b|[;|±]|\\(?:pm|mp)(?![A-Za-z])")
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_VARIABLE_IS = re.compile(r"^[A-Za-z]\s*=\s*")
_DECIMAL = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")
_FRACTION = re.compile(r"([+-]?)(\d+)\s*/\s*(\d+)")
_LATEX_FRACTION = re.compile(r"([+-]?)\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}")


def _unwrap(text: str) -> str:
    """``text`` without surrounding whitespace, trailing period, one wrapper pair; Unicode minus as ``-``."""
    text = text.strip().rstrip(".").strip().replace("\u2212", "-")
    for left, right in _WRAPPERS:
        if text.startswith(left) and text.endswith(right) and len(text) >= len(left) + len(right):
            return text[len(left) : len(text) - len(right)].strip().rstrip(".").strip()
    return text


def parse_number(text: str, lowest_terms: bool) -> Fraction | None:
    """The exact value of a lone number (integer, decimal, ``a/b``, ``\\frac{a}{b}``), else None.

    With ``lowest_terms`` a fraction must be reduced and not a whole number: ``14/2`` is work
    still to do (and a restated ``a / b`` question), not an answer.
    """
    if _DECIMAL.fullmatch(text):
        return Fraction(text.replace(",", ""))
    match = _FRACTION.fullmatch(text) or _LATEX_FRACTION.fullmatch(text)
    if match is None:
        return None
    sign, p, q = match.group(1), int(match.group(2)), int(match.group(3))
    if q == 0 or (lowest_terms and (q == 1 or math.gcd(p, q) != 1)):
        return None
    return Fraction(-p if sign == "-" else p, q)


def _several(pred: str, gold: str) -> bool:
    """Whether ``pred`` offers more than one answer (a hedge word or a non-thousands comma)."""
    hedges = {m.group(0).lower() for m in _HEDGE.finditer(pred)}
    if hedges - {m.group(0).lower() for m in _HEDGE.finditer(gold)}:
        return True
    return "," in _THOUSANDS_COMMA.sub("", pred) and "," not in _THOUSANDS_COMMA.sub("", gold)


def judge(pred: str, gold: str) -> tuple[float, str | None, str]:
    """``(score, method, reason)`` for one extracted final answer against the gold answer text."""
    pred, gold = _unwrap(pred), _unwrap(gold)
    if not pred:
        return 0.0, None, "no final answer"
    if _several(pred, gold):
        return 0.0, None, "several candidates"
    gold_value = parse_number(gold, lowest_terms=False)
    if gold_value is not None:
        value_text = _VARIABLE_IS.sub("", pred, count=1)  # "x = 7" states 7 (simple_equations)
        if "=" in value_text:
            return 0.0, None, "an equation, not a value"
        value = parse_number(value_text, lowest_terms=True)
        if value is None:
            return 0.0, None, "not a single number"
        return (1.0, "numeric", "equal") if value == gold_value else (0.0, "numeric", "different value")
    if " ".join(pred.split()) == " ".join(gold.split()):
        return 1.0, "exact", "equal"
    if "=" in pred and "=" not in gold:
        return 0.0, None, "an equation, not a value"
    return _symbolic(pred, gold)


def _latex(text: str) -> str:
    return text.replace("**", "^").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")


def _symbolic(pred: str, gold: str) -> tuple[float, str | None, str]:
    """math-verify on both as LaTeX, refusing partial parses, extra free symbols and unevaluated operators."""
    from math_verify import LatexExtractionConfig, parse, verify
    from sympy import Derivative, Integral, Limit, Product, Sum

    # math-verify bounds its time with signal.alarm, which only works on the main thread.
    timeout = MATH_VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    config = [LatexExtractionConfig()]
    gold_parsed = parse(f"${_latex(gold)}$", extraction_config=config, parsing_timeout=timeout)
    pred_parsed = parse(f"${_latex(pred)}$", extraction_config=config, parsing_timeout=timeout)
    if len(gold_parsed) < 2 or len(pred_parsed) < 2 or not hasattr(pred_parsed[0], "free_symbols"):
        return 0.0, None, "not parsable as math"
    # math-verify extracts the longest parsable piece: "x + 1 apples" comes back as "x + 1".
    if "".join(str(pred_parsed[1]).split()) != "".join(_latex(pred).split()):
        return 0.0, None, "extra text"
    expr = pred_parsed[0]
    if expr.has(Integral, Derivative, Sum, Product, Limit):
        return 0.0, None, "unevaluated operator"
    gold_symbols = getattr(gold_parsed[0], "free_symbols", set())
    if expr.free_symbols - gold_symbols:
        return 0.0, None, "extra symbols"
    equal = verify(gold_parsed, pred_parsed, timeout_seconds=timeout)
    return (1.0, "symbolic", "equal") if equal else (0.0, "symbolic", "different value")


# -- answer leakage --------------------------------------------------------------------------

# A run of digits with inner "," or "." (a sign only when attached); never starts inside a word or number.
_NUMBER_RUN = re.compile(r"(?<![\w.,])([+-]?)(\.?\d(?:[\d,.]*\d)?)")


def numbers_in(text: str, with_fractions: bool) -> set[Fraction]:
    """Values of the number tokens in ``text``; a run that is not one number counts as its parts."""
    text = text.replace("\u2212", "-")
    values: set[Fraction] = set()
    for match in _NUMBER_RUN.finditer(text):
        sign, run = match.groups()
        if _DECIMAL.fullmatch(run):
            values.add(Fraction(sign + run.replace(",", "")))
        else:  # "6,7" or "1.2.3": each part is a number that is on show
            values.update(Fraction(part) for part in re.findall(r"\d+(?:\.\d+)?", run))
    if with_fractions:
        for pattern in (_LATEX_FRACTION, re.compile(r"(?<![\w.])" + _FRACTION.pattern + r"(?![\d.])")):
            for match in pattern.finditer(text):
                value = parse_number(match.group(0), lowest_terms=False)
                if value is not None:
                    values.add(value)
    return values
