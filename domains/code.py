"""The code domain: write a Python function; graded by running it on hidden tests in a container.

Tasks are frozen in ``code_tasks.jsonl.gz`` (``domains.code_tasks``): CodeI/O
function-writing problems (train and held-out, split by a hash of their text) and HumanEval
(held-out only, reported on its own: rows of data source ``code/humaneval``).  A task's
``ground_truth`` is only its id: the hidden tests and their expected outputs stay in trusted
code, so neither harness code nor the policy's prompt can reach them.  The prompt shows a worked
example on a made-up task, then the task with one example call (the first test) and the function's signature.

The verifier extracts the program from the answer (``code_answers.extract_program``) and grades
it with ``execution.programs``: 1.0 only when every test passes.  ``info["execution"]`` is what
harness code sees: per-test outcomes, the program's status and the exceptions it raised, never
an expected value.  Many answers are graded per container (``verify_batch``), each distinct
(task, program) once per process.

    domain = CodeDomain()
    tasks = domain.tasks("train", [TaskSpec(name="codeio")], n=4, seed=0)
    score, info = domain.verify(tasks[0].data_source, "```python\\ndef main_solution(x): ...\\n```",
                                tasks[0].ground_truth)
    info["status"], info["tests"]        # "failed", ["passed", "failed", ...]
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading

from domains.base import SPLITS, Task, run_grader
from domains.code_answers import execution_feedback, extract_program, with_prompt
from domains.code_tasks import MAX_LINES, tasks_by_id
from execution.programs import ProgramJob, ProgramResult, grade_programs
from harness_repo.contract import TaskSpec

SOURCE_PREFIX = "code/"
TRAIN_SOURCES = ("codeio",)
HELDOUT_SOURCES = ("codeio", "humaneval")
EXAM_SYSTEM = ("You write correct Python. Reply with one complete Python function in a ```python code block "
               "and nothing else.")
EXAM_MAX_TOKENS = 128
"""The seed's training budget: the worked example's one-line answers fit in ~40 tokens (SmolLM2-135M)."""
GRADE_WORKERS = max(1, int(os.environ.get("META_AGENT_CODE_WORKERS", "2")))
LEAK_MIN_CHARS = 4
"""A hidden expected output shorter than this (``1``, ``[]``) is too common to count as a leak."""


WORKED_EXAMPLE = """Here is a solved task, then yours.

Solved task: Given two integers `a` and `b`, return their sum in a dictionary with the key `total`.

Example: main_solution(a=2, b=3) returns {'total': 5}

```python
def main_solution(a, b):
    return {"total": a + b}
```

Your task: """
"""Shown before every CodeI/O task (made up: no task's code).  Without it SmolLM2-135M solved 0 of the 24
shortest tasks greedily (it wrote loops around wrong logic, helpers it never defined, or renamed the
function); with it, 4 (one-line returns computed from the arguments)."""


def render_question(task: dict) -> str:
    """The problem as the policy reads it: a worked example on a made-up task, then the description, the spec,
    one example call (the first test) and a skeleton of the function whose return line has the example's
    shape (its keys, never a hidden value).  HumanEval keeps its own prompt, as papers quote it."""
    if task["source"] == "humaneval":
        return f"Complete this Python function.\n\n```python\n{task['prompt_code'].rstrip()}\n```"
    example = task["tests"][0]
    call = ", ".join(f"{k}={v!r}" for k, v in example["input"].items())
    return (f"{WORKED_EXAMPLE}{task['description']}\n\n{task['io_spec']}\n\n"
            f"Example: {task['entry']}({call}) returns {example['output']!r}\n\n"
            f"Complete the function:\n```python\n{task['signature']}\n    ...\n"
            f"    {_return_shape(example['output'])}\n```")


def _return_shape(output: object) -> str:
    """``return {"key": ...}`` for a dict output (the 135M policy otherwise invents its own keys),
    else ``return ...``."""
    if isinstance(output, dict) and output:
        return "return {" + ", ".join(f"{json.dumps(k)}: ..." for k in output) + "}"
    return "return ..."


class CodeDomain:
    """Frozen function-writing tasks and the trusted execution grader."""

    name = "code"
    task_names: tuple[str, ...] = TRAIN_SOURCES
    reward_range: tuple[float, float] = (-1.0, 1.0)
    """A harness may pay a malformed answer below zero."""
    exam_max_tokens: int = EXAM_MAX_TOKENS

    def __init__(self, eval_specs: list[TaskSpec] | None = None, sandbox=None) -> None:
        self.eval_specs: list[TaskSpec] = list(eval_specs or [TaskSpec(name="codeio")])
        self._sandbox = sandbox
        self._grades: dict[str, ProgramResult] = {}
        self._lock = threading.Lock()

    # -- tasks -------------------------------------------------------------------------------

    def check_task_specs(self, specs: list[TaskSpec], split: str = "train") -> None:
        """``ValueError`` for an empty mix, an unknown source, or a knob other than ``max_lines`` (1..10)."""
        if not specs:
            raise ValueError("No task specs given: the task mix needs at least one entry (e.g. name: codeio).")
        names = HELDOUT_SOURCES if split == "heldout" else self.task_names
        problems = [f"unknown task {s.name!r}" for s in specs if s.name not in names]
        for s in specs:
            extra = sorted(set(s.config) - {"max_lines"})
            lines = s.config.get("max_lines", MAX_LINES)
            if extra:
                problems.append(f"{s.name}: unknown knob(s) {extra}; the only knob is max_lines")
            if isinstance(lines, bool) or not isinstance(lines, int) or not 1 <= lines <= MAX_LINES:
                problems.append(f"{s.name}: max_lines must be an integer in 1..{MAX_LINES}, got {lines!r}")
        if problems:
            raise ValueError(f"{'; '.join(problems)}. Supported code tasks: {', '.join(names)}.")

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split`` mixed by the specs' weights, each source cycled in a seeded order.

        The held-out split never repeats a task, so it returns fewer than ``n`` when fewer exist.
        """
        if split not in SPLITS:
            raise ValueError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")
        self.check_task_specs(specs, split)
        rng = random.Random(f"code-tasks/{split}/{seed}")
        chosen = []
        for spec in specs:
            limit = spec.config.get("max_lines")  # HumanEval's canonical solutions can be longer than MAX_LINES
            pool = sorted((t for t in tasks_by_id().values() if t["split"] == split and t["source"] == spec.name
                           and (limit is None or t["lines"] <= limit)), key=lambda t: t["id"])
            if pool:
                rng.shuffle(pool)
                chosen.append((spec.weight, pool))
        if not chosen:
            raise ValueError(f"No {split} code task matches {[s.name for s in specs]} (the val split is empty).")
        weights = [w for w, _ in chosen]
        if split == "heldout":
            n = min(n, sum(len(pool) for _, pool in chosen))
        out, cursor, seen = [], [0] * len(chosen), set()
        while len(out) < n:
            i = rng.choices(range(len(chosen)), weights)[0]
            task = chosen[i][1][cursor[i] % len(chosen[i][1])]
            cursor[i] += 1
            if split == "heldout" and task["id"] in seen:
                continue
            seen.add(task["id"])
            out.append(Task(task_id=task["id"], data_source=SOURCE_PREFIX + task["source"],
                            question=render_question(task), ground_truth={"task_id": task["id"]}, split=split,
                            metadata={"task": task["source"], "entry": task["entry"], "lines": task["lines"]}))
        return out

    # -- trusted exam ------------------------------------------------------------------------

    def exam_messages(self, task: Task) -> list[dict]:
        """The held-out prompt: a fixed system text and the task's question."""
        return [{"role": "system", "content": EXAM_SYSTEM}, {"role": "user", "content": task.question}]

    def leaks_answer(self, text: str, ground_truth: dict) -> bool:
        """Whether ``text`` shows the expected output of a hidden test (any but the first, which the question shows)."""
        task = tasks_by_id().get(str((ground_truth or {}).get("task_id")))
        if task is None or not isinstance(text, str):
            return False
        shown = [repr(t["output"]) for t in task["tests"][1:]] + [json.dumps(t["output"]) for t in task["tests"][1:]]
        return any(len(s) >= LEAK_MIN_CHARS and s in text for s in shown)

    # -- verifier ----------------------------------------------------------------------------

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """1.0 when the answer's program passes every hidden test, else 0.0.

        Never raises for what the program does; ``GraderUnavailable`` when the engine fails (``run_grader``)."""
        return self.verify_batch([(data_source, response, ground_truth)])[0]

    def verify_batch(self, items: list[tuple[str, str, dict]]) -> list[tuple[float, dict]]:
        """:meth:`verify` for many answers: every distinct program graded once, many per container."""
        prepared = [self._prepare(response, gt) for _, response, gt in items]
        todo: dict[str, tuple[ProgramJob, list]] = {}
        for p in prepared:
            if isinstance(p, tuple) and p[2] not in self._grades:  # (job, expected, key, parse status, task id)
                todo.setdefault(p[2], (p[0], p[1]))
        if todo:
            graded = run_grader(lambda: grade_programs([job for job, _ in todo.values()],
                                                       {k: exp for k, (_, exp) in todo.items()},
                                                       self.sandbox(), workers=GRADE_WORKERS), "code")
            with self._lock:
                self._grades.update(graded)
        else:
            graded = {}
        out = []
        for p in prepared:
            if isinstance(p, dict):
                out.append((0.0, p))
                continue
            job, _, key, parse_status, task_id = p
            result = self._grades.get(key) or graded[key]
            info = result.to_info() | {"parse_status": parse_status, "task_id": task_id}
            info["execution"] = execution_feedback(result.status, parse_status, result.tests, result.errors,
                                                   result.detail, job.code)
            out.append((float(result.verified), info))
        return out

    def _prepare(self, response: str, ground_truth: dict):
        task = tasks_by_id().get(str((ground_truth or {}).get("task_id")))
        if task is None:
            detail = f"unknown code task {(ground_truth or {}).get('task_id')!r}"
            return {"status": "error", "parse_status": "error", "detail": detail, "verified": 0,
                    "execution": execution_feedback("error", "error", [], [], detail, "")}
        parsed = extract_program(response, task["entry"])
        if parsed.status == "no_code":
            tests = ["error"] * len(task["tests"])
            return {"status": "no_code", "parse_status": "no_code", "tests": tests, "verified": 0, "share": 0.0,
                    "execution": execution_feedback("no_code", "no_code", tests, [], "no code block", "")}
        code = with_prompt(parsed.code, task["prompt_code"], task["entry"])
        key = hashlib.sha256(f"{task['id']}\0{code}".encode()).hexdigest()
        job = ProgramJob(key=key, code=code, entry=task["entry"], call=task["call"],
                         inputs=tuple(t["input"] for t in task["tests"]))
        return job, [t["output"] for t in task["tests"]], key, parsed.status, task["id"]

    def sandbox(self):
        """The Docker sandbox programs run in (made on first use; ``SandboxUnavailable`` says how to start one)."""
        if self._sandbox is None:
            from sandboxes.docker import DockerSandbox

            self._sandbox = DockerSandbox()
        return self._sandbox


def verify(data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
    """``CodeDomain().verify`` as a module-level function, for ``--verifier domains.code:verify``."""
    return _VERIFIER.verify(data_source, response, ground_truth)


_VERIFIER = CodeDomain()
