"""The math domain: a fixed list of reasoning-gym generators and a strict trusted verifier.

Splits are disjoint by construction: every generated question is hashed (after
normalising case and whitespace) into one of ``N_BUCKETS`` buckets; bucket 0 is
held-out, bucket 1 is val, the rest is train, and ``tasks`` only returns items
whose bucket matches the split asked for.  So the same question can never be in
two splits, whatever seeds or difficulty knobs a harness picks.

The verifier scores 1.0 or 0.0, never partial credit; its rules live with the answer
parsing in ``domains/math_answers.py``.

    domain = MathDomain()
    tasks = domain.tasks("train", [TaskSpec(name="chain_sum", config={"max_terms": 2})], n=8, seed=0)
    score, info = domain.verify("reasoning_gym/chain_sum", "... Answer: 7", {"answer": "7"})
    messages = domain.exam_messages(tasks[0])  # the trusted held-out prompt
"""

from __future__ import annotations

import hashlib
import json
import random
import re

from domains.base import SPLITS, Task
from domains.math_answers import (  # noqa: F401  (extract_final_answer re-exported)
    MAX_PRED_CHARS,
    extract_final_answer,
    gold_text,
    judge,
    numbers_in,
    parse_number,
)
from harness_repo.contract import TaskSpec

N_BUCKETS = 10
SPLIT_OF_BUCKET = {0: "heldout", 1: "val"}  # every other bucket is train
SOURCE_PREFIX = "reasoning_gym/"

# Generators whose answers are plain numbers (checked with reasoning-gym 0.1.25) and that a 135M
# policy can sometimes solve at small difficulty settings.
TASK_NAMES = ("chain_sum", "products", "basic_arithmetic", "decimal_chain_sum",
              "gcd", "lcm", "simple_equations", "leg_counting")
# Bounds on harness-chosen knobs: generation runs in the trusted process, and a knob like
# max_terms=10**9 would hang it.  Matched on the knob's name suffix; other integers get INT_KNOB_MAX.
KNOB_LIMITS = {"_digits": 12, "_terms": 20, "_numbers": 20, "_animals": 20, "_instances": 100, "_places": 10}
INT_KNOB_MAX = 10**6
RESERVED_KNOBS = ("seed", "size")  # the domain sets these itself

# The held-out evaluation mix: the tasks a 135M policy can learn on a CPU in a few rounds, one step wider
# than the seed's training mix (up to 3 terms) so the exam has enough distinct questions: 2-term 1-digit
# sums and products have only 25 and 9 distinct held-out questions, so an exam of 128 drawn from them
# repeats questions and its interval is far wider than 128 tasks suggest; with 3 terms there are >100 each.
DEFAULT_EVAL_SPECS = [
    TaskSpec(name="chain_sum", config={"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 1}),
    TaskSpec(name="products", config={"min_terms": 2, "max_terms": 3, "min_digits": 1, "max_digits": 1}),
]
# The exam prompt is the seed harness's, word for word, so round-0 numbers stay comparable; it is
# hard-coded because the seed files are harness files, which a branch may change.  The worked example
# matters: with the earlier prompt (no example) SmolLM2-135M greedily wrote "1 * 9 = 9" and stopped,
# scoring 0 of 64 held-out tasks; with this one 12 of 32 answers end in the Answer: line and 10 of 32
# are right, so training has something to build on.  The example's numbers (125, 250, 375) are out of
# reach of the exam's golds: it shows the format without showing any task's answer.
EXAM_SYSTEM = ('You are a careful math assistant. Work it out in one line, then give the result on a final line '
               'of the form "Answer: <number>".\n\nExample:\nQuestion: What is 125 + 250?\nReply:\n'
               '125 + 250 = 375\nAnswer: 375')
EXAM_USER_SUFFIX = '\n\nEnd with the line "Answer: <number>".'
EXAM_MAX_TOKENS = 96



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
        gold = gold_text(ground_truth)
        if not gold or not isinstance(text, str):
            return False
        value = parse_number(gold, lowest_terms=False)
        if value is None:
            words = r"\s*".join(re.escape(w) for w in gold.split())
            return re.search(rf"(?<!\w){words}(?!\w)", text, re.IGNORECASE) is not None
        return value in numbers_in(text, with_fractions=value.denominator != 1)

    # -- verifier ----------------------------------------------------------------------------

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """1.0 when the final answer is exactly the gold answer, else 0.0 (rules: module docstring).

        Never raises; ``info`` has ``reason``, ``pred`` and ``method``::

            domain.verify("reasoning_gym/gcd", "Answer: 6 or 7", {"answer": "7"})
            # (0.0, {"reason": "several candidates", "pred": "6 or 7", "method": None})
        """
        gold = gold_text(ground_truth)
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


def verify(data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
    """``MathDomain().verify`` as a module-level function, for ``--verifier domains.math:verify``."""
    return _VERIFIER.verify(data_source, response, ground_truth)


_VERIFIER = MathDomain()
