"""The math domain: reasoning-gym generators and a trusted verifier (math-verify as fallback).

Splits are disjoint by construction: every generated question is hashed (after
normalising case and whitespace) into one of ``N_BUCKETS`` buckets; bucket 0 is
held-out, bucket 1 is val, the rest is train, and ``tasks`` only returns items
whose bucket matches the split asked for.  So the same question can never be in
two splits, whatever seeds or difficulty knobs a harness picks.

The verifier takes the final answer from the last ``\\boxed{...}`` or the last
``Answer:`` line, whichever comes later, and scores it with reasoning-gym's own
scorer for the data source, falling back to math-verify (e.g. ``6.0`` for ``6``).

    domain = MathDomain()
    tasks = domain.tasks("train", [TaskSpec(name="chain_sum", config={"max_terms": 2})], n=8, seed=0)
    score, info = domain.verify("reasoning_gym/chain_sum", "... Answer: 7", {"answer": "7"})
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import threading
from typing import Any

from harness_repo.contract import TaskSpec
from meta_agent.domains.base import SPLITS, Task

N_BUCKETS = 10
SPLIT_OF_BUCKET = {0: "heldout", 1: "val"}  # every other bucket is train
SOURCE_PREFIX = "reasoning_gym/"
MAX_PRED_CHARS = 200  # longer "answers" are not worth a sympy parse that could run for minutes
MATH_VERIFY_TIMEOUT_S = 5

# The held-out evaluation mix: the tasks a 135M policy can learn on a CPU in a few rounds.
DEFAULT_EVAL_SPECS = [
    TaskSpec(name="chain_sum", config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),
    TaskSpec(name="products", config={"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1}),
]

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
    """reasoning-gym tasks with disjoint splits, verified by reasoning-gym's scorers and math-verify."""

    name = "math"

    def __init__(self, eval_specs: list[TaskSpec] | None = None) -> None:
        self.eval_specs: list[TaskSpec] = list(eval_specs or DEFAULT_EVAL_SPECS)

    # -- tasks -------------------------------------------------------------------------------

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split``, mixed by the specs' weights, in a seed-shuffled order.

        Within one call a question is not repeated unless its generator has fewer distinct
        questions in this split than asked for (tiny difficulty settings); then the distinct
        ones found are cycled.
        """
        if split not in SPLITS:
            raise ValueError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")
        if not specs:
            raise ValueError("No task specs given: the task mix needs at least one generator.")
        rng = random.Random(f"math-tasks/{split}/{seed}")
        counts = allocate([s.weight for s in specs], n, rng)
        out: list[Task] = []
        for index, (spec, count) in enumerate(zip(specs, counts)):
            if count:
                out += self._draw(spec, split, count, seed, index)
        rng.shuffle(out)
        return out

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
            except Exception as exc:  # unknown generator or bad knob: name both
                raise ValueError(f"reasoning-gym cannot build task {spec.name!r} with config {spec.config}: {exc}") from exc
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

    # -- verifier ----------------------------------------------------------------------------

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """Trusted score in [0, 1]: 1 when the final answer matches ``ground_truth["answer"]``. Never raises."""
        try:
            gold = ground_truth["answer"] if isinstance(ground_truth, dict) else ground_truth
            gold = str(gold)
        except (KeyError, TypeError):
            return 0.0, {"reason": "ground truth has no answer"}
        pred = extract_final_answer(response if isinstance(response, str) else "")
        if pred is None:
            return 0.0, {"reason": "no final answer"}
        info: dict[str, Any] = {"pred": pred[:MAX_PRED_CHARS]}
        score = 0.0
        rg_score, rg_error = _reasoning_gym_score(data_source, pred, gold, ground_truth)
        if rg_error:
            info["reasoning_gym_error"] = rg_error
        if rg_score is not None:
            info["reasoning_gym"] = rg_score
            score = rg_score
        if score < 1.0:
            mv = _math_verify(gold, pred)
            info["math_verify"] = mv
            score = max(score, mv if mv is not None else 0.0)
        info["method"] = "reasoning_gym" if rg_score is not None and rg_score >= score else "math_verify"
        return min(max(float(score), 0.0), 1.0), info


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
    answer = answer.strip().rstrip(".").strip()
    for wrapper in ("**", "$", "`"):
        if answer.startswith(wrapper) and answer.endswith(wrapper) and len(answer) >= 2 * len(wrapper):
            answer = answer[len(wrapper) : len(answer) - len(wrapper)].strip()
    return answer.rstrip(".").strip()


def _reasoning_gym_score(data_source: str, pred: str, gold: str, ground_truth: Any) -> tuple[float | None, str | None]:
    """reasoning-gym's score for the source (None when it has no scorer or the scorer fails) and the error."""
    if not data_source.startswith(SOURCE_PREFIX):
        return None, None
    import reasoning_gym

    metadata = ground_truth.get("metadata", {}) if isinstance(ground_truth, dict) else {}
    entry = {"question": "", "answer": gold, "metadata": metadata}
    try:
        score_fn = reasoning_gym.get_score_answer_fn(data_source[len(SOURCE_PREFIX) :])
        return float(score_fn(answer=pred, entry=entry)), None
    except Exception as exc:  # some scorers raise on malformed answers: that is a wrong answer, not a crash
        return None, f"{type(exc).__name__}: {exc}"[:200]


def _math_verify(gold: str, pred: str) -> float | None:
    """1.0 / 0.0 from math-verify, None when it cannot parse or fails."""
    from math_verify import parse, verify

    if len(pred) > MAX_PRED_CHARS:
        return None
    # math-verify bounds its time with signal.alarm, which only works on the main thread.
    timeout = MATH_VERIFY_TIMEOUT_S if threading.current_thread() is threading.main_thread() else None
    try:
        gold_parsed = parse(gold, parsing_timeout=timeout)
        pred_parsed = parse(pred, parsing_timeout=timeout)
        if not gold_parsed or not pred_parsed:
            return None
        return 1.0 if verify(gold_parsed, pred_parsed, timeout_seconds=timeout) else 0.0
    except Exception:
        return None
