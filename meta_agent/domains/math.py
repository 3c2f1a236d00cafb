"""The math domain: a fixed list of reasoning-gym generators and a strict trusted verifier.

Splits are disjoint by construction: every generated question is hashed (after
normalising case and whitespace) into one of ``N_BUCKETS`` buckets; bucket 0 is
held-out, bucket 1 is val, the rest is train, and ``tasks`` only returns items
whose bucket matches the split asked for.  So the same question can never be in
two splits, whatever seeds or difficulty knobs a harness picks.

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

    domain = MathDomain()
    tasks = domain.tasks("train", [TaskSpec(name="chain_sum", config={"max_terms": 2})], n=8, seed=0)
    score, info = domain.verify("reasoning_gym/chain_sum", "... Answer: 7", {"answer": "7"})
    messages = domain.exam_messages(tasks[0])  # the trusted held-out prompt
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import re
import threading
from fractions import Fraction
from typing import Any

from harness_repo.contract import TaskSpec
from meta_agent.domains.base import SPLITS, Task

N_BUCKETS = 10
SPLIT_OF_BUCKET = {0: "heldout", 1: "val"}  # every other bucket is train
SOURCE_PREFIX = "reasoning_gym/"
MAX_PRED_CHARS = 200  # longer "answers" are not worth a sympy parse that could run for minutes
MATH_VERIFY_TIMEOUT_S = 5

# Generators whose answers are plain numbers (checked with reasoning-gym 0.1.25) and that a 135M
# policy can sometimes solve at small difficulty settings.
TASK_NAMES = ("chain_sum", "products", "basic_arithmetic", "decimal_chain_sum",
              "gcd", "lcm", "simple_equations", "leg_counting")
# Bounds on harness-chosen knobs: generation runs in the trusted process, and a knob like
# max_terms=10**9 would hang it.  Matched on the knob's name suffix; other integers get INT_KNOB_MAX.
KNOB_LIMITS = {"_digits": 12, "_terms": 20, "_numbers": 20, "_animals": 20, "_instances": 100, "_places": 10}
INT_KNOB_MAX = 10**6
RESERVED_KNOBS = ("seed", "size")  # the domain sets these itself

# The held-out evaluation mix: the tasks a 135M policy can learn on a CPU in a few rounds.
DEFAULT_EVAL_SPECS = [
    TaskSpec(name="chain_sum", config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),
    TaskSpec(name="products", config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),
]
# The exam prompt is the seed harness's, word for word, so round-0 numbers stay comparable; it is
# hard-coded because the seed files are harness files, which a branch may change.
EXAM_SYSTEM = ('You are a careful math assistant. Solve the problem briefly, then give the result on a final '
               'line of the form "Answer: <number>".')
EXAM_USER_SUFFIX = '\n\nKeep the working short and end with the line "Answer: <number>".'
EXAM_MAX_TOKENS = 96

# math-verify warns once per process that we disabled its signal-based timeouts.
logging.getLogger("math_verify").setLevel(logging.ERROR)


def normalise_question(text: str) -> str:
    """The form a question is hashed in: lower case, whitespace collapsed."""
    return " ".join(text.lower().split())


def question_hash(text: str) -> str:
    """Hex sha256 of the normalised question."""
    return hashlib.sha256(normalise_question(text).encode()).hexdigest()


def split_of(question: str) -> str:
    """The split a question belongs to, fixed by its text alone."""
    return SPLIT_OF_BUCKET.get(int(question_hash(question), 16) % N_BUCKETS, "train")


def allocate(weights: list[float], n: int, rng: random.Random) -> list[int]:
    """Split ``n`` into integer counts proportional to ``weights`` (largest remainder, random tie-break)."""
    total = sum(weights)
    exact = [w * n / total for w in weights]
    counts = [int(x) for x in exact]
    order = sorted(range(len(weights)), key=lambda i: (-(exact[i] - counts[i]), rng.random()))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


class MathDomain:
    """reasoning-gym tasks with disjoint splits, a strict 0/1 verifier and a fixed exam prompt."""

    name = "math"
    task_names: tuple[str, ...] = TASK_NAMES
    reward_range: tuple[float, float] = (0.0, 1.0)
    exam_max_tokens: int = EXAM_MAX_TOKENS

    def __init__(self, eval_specs: list[TaskSpec] | None = None) -> None:
        self.eval_specs: list[TaskSpec] = list(eval_specs or DEFAULT_EVAL_SPECS)

    # -- tasks -------------------------------------------------------------------------------

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split``, mixed by the specs' weights, in a seed-shuffled order.

        Within one call a question is not repeated unless its generator has fewer distinct
        questions in this split than asked for (tiny difficulty settings); then the distinct
        ones found are cycled.  ``ValueError`` for an unknown split or a spec that
        :meth:`check_task_specs` refuses.
        """
        if split not in SPLITS:
            raise ValueError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")
        self.check_task_specs(specs)
        rng = random.Random(f"math-tasks/{split}/{seed}")
        counts = allocate([s.weight for s in specs], n, rng)
        out: list[Task] = []
        for index, (spec, count) in enumerate(zip(specs, counts)):
            if count:
                out += self._draw(spec, split, count, seed, index)
        rng.shuffle(out)
        return out

    def check_task_specs(self, specs: list[TaskSpec]) -> None:
        """``ValueError`` naming every spec that is not a supported task with valid, bounded knobs.

        Cheap (builds reasoning-gym's config objects, generates nothing), so the host can refuse
        a harness.yaml before training::

            domain.check_task_specs([TaskSpec(name="chess")])  # ValueError: unknown task 'chess'; ...
        """
        from reasoning_gym.factory import DATASETS

        if not specs:
            raise ValueError("No task specs given: the task mix needs at least one generator.")
        problems = []
        for spec in specs:
            if spec.name not in self.task_names:
                problems.append(f"unknown task {spec.name!r}")
                continue
            problems += [f"{spec.name}: {p}" for p in _knob_problems(spec.config)]
            try:
                config = DATASETS[spec.name][1](**spec.config)
                if hasattr(config, "validate"):
                    config.validate()
            except Exception as exc:  # any refusal of hostile knobs is the harness's error, named
                problems.append(f"{spec.name}: bad config {spec.config}: {type(exc).__name__}: {exc}")
        if problems:
            raise ValueError(f"{'; '.join(problems)}. Supported math tasks: {', '.join(self.task_names)}.")

    def _draw(self, spec: TaskSpec, split: str, count: int, seed: int, index: int) -> list[Task]:
        import reasoning_gym

        found: dict[str, Task] = {}
        chunk = max(64, count * N_BUCKETS * 2)
        max_items = chunk * 20
        drawn, batch = 0, 0
        while len(found) < count and drawn < max_items:
            batch_seed = int(hashlib.sha256(f"{seed}/{index}/{spec.name}/{batch}".encode()).hexdigest()[:8], 16)
            try:
                dataset = reasoning_gym.create_dataset(spec.name, size=chunk, seed=batch_seed, **spec.config)
            except Exception as exc:  # a knob combination the config check let through: name both
                raise ValueError(
                    f"reasoning-gym cannot build task {spec.name!r} with config {spec.config}: {exc}") from exc
            for item in dataset:
                question = str(item["question"])
                digest = question_hash(question)
                if split_of(question) == split and digest not in found:
                    found[digest] = self._task(spec, item, split, digest)
                    if len(found) == count:
                        break
            drawn += chunk
            batch += 1
        if not found:
            raise ValueError(
                f"Task {spec.name!r} with config {spec.config} produced no {split} question in {drawn} draws; "
                "widen its difficulty knobs."
            )
        tasks = list(found.values())
        return [tasks[i % len(tasks)] for i in range(count)]

    @staticmethod
    def _task(spec: TaskSpec, item: dict, split: str, digest: str) -> Task:
        # Round-trip through JSON: reasoning-gym metadata holds tuples, and archives want plain JSON.
        rg_meta = json.loads(json.dumps(item.get("metadata", {}), default=str))
        return Task(
            task_id=f"{spec.name}/{digest[:16]}",
            data_source=SOURCE_PREFIX + spec.name,
            question=str(item["question"]),
            ground_truth={"answer": str(item["answer"])},
            split=split,
            metadata={"task": spec.name, "config": dict(spec.config), "reasoning_gym": rg_meta},
        )

    # -- trusted exam ------------------------------------------------------------------------

    def exam_messages(self, task: Task) -> list[dict]:
        """The held-out exam's chat prompt for ``task``: the seed harness's system and user text."""
        return [{"role": "system", "content": EXAM_SYSTEM},
                {"role": "user", "content": f"{task.question}{EXAM_USER_SUFFIX}"}]

    def leaks_answer(self, text: str, ground_truth: dict) -> bool:
        """Whether ``text`` shows the gold answer as a standalone token.

        A number gold leaks through any number token of equal value (``7``, ``7.0``, ``+7``,
        ``1,234``; a fraction gold also through ``3/4`` or ``\\frac{3}{4}``) that is not part of
        a longer number: gold ``7`` is in "the answer is 7." but not in "17", "7.5" or "-7"
        (a sign counts only when attached).  Other golds leak as a whole word, ignoring case
        and spacing.  The question itself can hold the gold (``1 * 5`` for products), so
        compare with ``leaks_answer(task.question, ...)`` before blaming a prompt.
        """
        gold = _gold_text(ground_truth)
        if not gold or not isinstance(text, str):
            return False
        value = _number(gold, lowest_terms=False)
        if value is None:
            words = r"\s*".join(re.escape(w) for w in gold.split())
            return re.search(rf"(?<!\w){words}(?!\w)", text, re.IGNORECASE) is not None
        return value in _numbers_in(text, with_fractions=value.denominator != 1)

    # -- verifier ----------------------------------------------------------------------------

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """1.0 when the final answer is exactly the gold answer, else 0.0 (rules: module docstring).

        Never raises; ``info`` has ``reason``, ``pred`` and ``method``::

            domain.verify("reasoning_gym/gcd", "Answer: 6 or 7", {"answer": "7"})
            # (0.0, {"reason": "several candidates", "pred": "6 or 7", "method": None})
        """
        gold = _gold_text(ground_truth)
        if not gold:
            return 0.0, {"reason": "ground truth has no answer", "pred": None, "method": None}
        pred = extract_final_answer(response if isinstance(response, str) else "")
        if pred is None:
            return 0.0, {"reason": "no final answer", "pred": None, "method": None}
        if len(pred) > MAX_PRED_CHARS:
            return 0.0, {"reason": "final answer too long", "pred": pred[:MAX_PRED_CHARS], "method": None}
        try:
            score, method, reason = judge(pred, gold)
        except Exception as exc:  # a verifier bug must not crash a round; it is a 0 with the cause
            score, method, reason = 0.0, None, f"verifier error: {type(exc).__name__}: {exc}"[:200]
        return score, {"reason": reason, "pred": pred, "method": method}


def _gold_text(ground_truth: Any) -> str:
    """The gold answer as text ("" when there is none); verl may hand the dict over as JSON text."""
    if isinstance(ground_truth, str) and ground_truth.lstrip().startswith("{"):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError:
            return ""
    if isinstance(ground_truth, dict):
        ground_truth = ground_truth.get("answer")
    return "" if ground_truth is None else _unwrap(str(ground_truth))


def _knob_problems(config: dict) -> list[str]:
    problems = [f"config may not set {key!r} (the domain sets it)" for key in RESERVED_KNOBS if key in config]
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, (int, float, list, tuple, str)):
            continue
        if isinstance(value, (list, tuple, str)):
            if len(value) > 16:
                problems.append(f"{key} has {len(value)} items (at most 16)")
            continue
        limit = next((lim for suffix, lim in KNOB_LIMITS.items() if key.endswith(suffix)), INT_KNOB_MAX)
        if not -INT_KNOB_MAX <= value <= limit:
            problems.append(f"{key}={value} is out of bounds (at most {limit})")
    return problems


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


def _number(text: str, lowest_terms: bool) -> Fraction | None:
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
    gold_value = _number(gold, lowest_terms=False)
    if gold_value is not None:
        value_text = _VARIABLE_IS.sub("", pred, count=1)  # "x = 7" states 7 (simple_equations)
        if "=" in value_text:
            return 0.0, None, "an equation, not a value"
        value = _number(value_text, lowest_terms=True)
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


def _numbers_in(text: str, with_fractions: bool) -> set[Fraction]:
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
                value = _number(match.group(0), lowest_terms=False)
                if value is not None:
                    values.add(value)
    return values
