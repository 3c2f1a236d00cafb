"""The SWE domain: repository-level bug fixes from real releases, graded by running their tests.

Tasks come from ``swe_env.checked.shipped_tasks`` (checked tasks, train and held-out
disjoint by construction: each task has one split).  A prompt shows the issue text
and a window of each buggy source file around the lines the fix changes (a 135M
policy on a CPU cannot read whole modules); the policy answers with a unified diff
or SEARCH/REPLACE edits (``swe_env.patch_format``), which trusted code turns into
one diff and grades in the task's container (``swe_env.grade.grade``):
1.0 = resolved (every FAIL_TO_PASS and PASS_TO_PASS passes), else 0.0.

Grading is the slow part: each distinct (task, patch) is graded once per process
(:meth:`SweDomain.verify_batch` grades a batch concurrently, ``ContainerCap`` bounding
the containers), and a malformed or empty answer is never sent to Docker.

    domain = SweDomain()
    tasks = domain.tasks("train", [TaskSpec(name="all")], n=4, seed=0)
    score, info = domain.verify(tasks[0].data_source, response, tasks[0].ground_truth)
    info["status"], info["parse_status"], info["patch"]     # "patch_failed", "ok", "--- a/..."
    env = domain.environment(task, AgentLimits(max_steps=10))   # agent mode: one container per trajectory
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor

from domains.base import SPLITS, Task, run_grader
from harness_repo.contract import TaskSpec
from swe_env.feedback import execution_feedback, ground_truth
from swe_env.patch_format import ParsedPatch, parse_response

SOURCE_PREFIX = "swe/"
WINDOW_LINES = 8
"""Lines of context shown above and below the region the gold change touches (no content of the change)."""
MAX_SHOWN_LINES = 40
"""At most this many lines of one file in a prompt: the local policy's context is short."""
LEAK_MIN_CHARS = 12
"""An added line of the gold change shorter than this (``return x``) is too common to count as a leak."""
EXAM_SYSTEM = ("You fix bugs in Python repositories. Reply with the fix only, as SEARCH/REPLACE edits:\n"
               "path/to/file.py\n<<<<<<< SEARCH\nexact lines to replace\n=======\nnew lines\n>>>>>>> REPLACE")
EXAM_MAX_TOKENS = 160
GRADE_TIMEOUT_S = 180.0
GRADE_WORKERS = 2


class SweDomain:
    """Checked tasks from real release pairs, a patch parser and the trusted Docker grader."""

    name = "swe"
    reward_range: tuple[float, float] = (-1.0, 1.0)
    """SWE-RL pays -1 for a malformed answer: a harness may."""
    exam_max_tokens: int = EXAM_MAX_TOKENS

    def __init__(self, eval_specs: list[TaskSpec] | None = None) -> None:
        self.eval_specs: list[TaskSpec] = list(eval_specs or [TaskSpec(name="all")])
        self._grades: dict[str, dict] = {}
        self._lock = threading.Lock()

    # -- tasks -------------------------------------------------------------------------------

    @property
    def task_names(self) -> tuple[str, ...]:
        """``all``, each package and each training task's id: what a harness's task mix may name (never a
        held-out task)."""
        from swe_env.checked import shipped_tasks

        tasks = shipped_tasks("train")
        return ("all", *sorted({t.package for t in tasks}), *sorted(t.id for t in tasks))

    def task_kinds(self, name: str, split: str) -> dict[str, float]:
        """The packages a task name draws in ``split`` (``all``, a package or a task id), each with its share of
        the name's draws (``tasks`` cycles through the matching tasks alike): what a mix means across spellings."""
        from swe_env.checked import shipped_tasks

        drawn = [t.package for t in shipped_tasks("heldout" if split == "heldout" else "train")
                 if name in ("all", t.package, t.id)]
        return {package: drawn.count(package) / len(drawn) for package in sorted(set(drawn))}

    def check_task_specs(self, specs: list[TaskSpec]) -> None:
        """``ValueError`` for an empty mix, an unknown name or any knob (SWE tasks have none)."""
        if not specs:
            raise ValueError("No task specs given: the task mix needs at least one entry (e.g. name: all).")
        names = self.task_names
        problems = [f"unknown task {s.name!r}" for s in specs if s.name not in names]
        problems += [f"{s.name}: SWE tasks take no config (got {sorted(s.config)})" for s in specs if s.config]
        if problems:
            raise ValueError(f"{'; '.join(problems)}. Supported SWE task names: {', '.join(names)}.")

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split``: each spec's weight of the draws, cycling through its tasks in a seeded order.

        The held-out split never repeats a task (a greedy exam answers a repeated prompt the same way), so it
        returns fewer than ``n`` when fewer held-out tasks exist.
        """
        from swe_env.checked import shipped_tasks

        if split not in SPLITS:
            raise ValueError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")
        self.check_task_specs(specs)
        pool = shipped_tasks("heldout" if split == "heldout" else "train") if split != "val" else []
        rng = random.Random(f"swe-tasks/{split}/{seed}")
        chosen = []
        for spec in specs:
            matching = [t for t in pool if spec.name in ("all", t.package, t.id)]
            if matching:
                rng.shuffle(matching)
                chosen.append((spec.weight, matching))
        if not chosen:
            raise ValueError(f"No {split} SWE task matches {[s.name for s in specs]}; "
                             f"{split} has {len(pool)} task(s).")
        weights = [w for w, _ in chosen]
        out, cursor = [], [0] * len(chosen)
        if split == "heldout":
            n = min(n, len({t.id for _, ts in chosen for t in ts}))
        seen: set[str] = set()
        while len(out) < n:
            i = rng.choices(range(len(chosen)), weights)[0]
            task = chosen[i][1][cursor[i] % len(chosen[i][1])]
            cursor[i] += 1
            if split == "heldout" and task.id in seen:
                continue
            seen.add(task.id)
            out.append(self._task(task, split))
        return out

    def _task(self, swe_task, split: str) -> Task:
        from swe_env.tasks import buggy_sources

        truth = ground_truth(swe_task)
        return Task(
            task_id=swe_task.id, data_source=SOURCE_PREFIX + swe_task.package,
            question=render_question(swe_task.problem_statement, buggy_sources(swe_task), truth["gold_patch"]),
            split=split, ground_truth=truth,
            metadata={"task": swe_task.package, "package": swe_task.package, "files": list(swe_task.source_files)},
        )

    # -- agent mode --------------------------------------------------------------------------

    def environment(self, task: Task, limits=None):
        """A fresh, unstarted bash episode of ``task`` in its own container (``swe_env.agent_env``)."""
        from swe_env.agent_env import AgentLimits, BashEnvironment
        from swe_env.checked import load_task

        return BashEnvironment(load_task(task.ground_truth["task_id"]), limits or AgentLimits())

    def agent_messages(self, task: Task) -> list[dict]:
        """The opening conversation of an agent-mode episode of ``task`` (what a verl training row carries)."""
        from swe_env.agent_env import task_statement
        from swe_env.agent_loop import agent_messages
        from swe_env.checked import load_task

        return agent_messages(task_statement(load_task(task.ground_truth["task_id"])))

    # -- trusted exam ------------------------------------------------------------------------

    def exam_messages(self, task: Task) -> list[dict]:
        """The held-out prompt: a fixed system text and the task's question (issue + buggy code)."""
        return [{"role": "system", "content": EXAM_SYSTEM}, {"role": "user", "content": task.question}]

    def leaks_answer(self, text: str, ground_truth: dict) -> bool:
        """Whether ``text`` shows a line the gold change adds (stripped, at least ``LEAK_MIN_CHARS`` long)."""
        if not isinstance(text, str):
            return False
        shown = {line.strip() for line in text.splitlines()}
        return any(line in shown for line in added_lines(str(ground_truth.get("gold_patch") or "")))

    # -- verifier ----------------------------------------------------------------------------

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """1.0 when the parsed patch resolves the task, else 0.0; ``info`` = the grade's and the parse's.

        Never raises for what the answer does; ``GraderUnavailable`` when the engine fails (``run_grader``)."""
        return self.verify_batch([(data_source, response, ground_truth)])[0]

    def verify_batch(self, items: list[tuple[str, str, dict]]) -> list[tuple[float, dict]]:
        """:meth:`verify` for many answers: each distinct (task, patch) graded once, ``GRADE_WORKERS`` at a time."""
        parsed = [self._parse(response, gt) for _, response, gt in items]
        todo = {}
        for (_, _, gt), p in zip(items, parsed):
            if isinstance(p, ParsedPatch) and p.status == "ok":
                todo.setdefault(self._key(gt, p.patch), (gt, p.patch))
        with ThreadPoolExecutor(max_workers=GRADE_WORKERS) as pool:
            list(pool.map(lambda kv: self._grade(kv[0], *kv[1]), todo.items()))
        out = []
        for (_, _, gt), p in zip(items, parsed):
            if isinstance(p, str):
                info = {"status": "error", "resolved": False, "detail": p, "parse_status": "error", "patch": ""}
            elif p.status != "ok":
                status = "empty_patch" if p.status == "empty" else "malformed"
                info = {"status": status, "resolved": False, "detail": p.detail} | p.to_info()
            else:
                info = self._grades[self._key(gt, p.patch)] | p.to_info()
            info["execution"] = execution_feedback(info)
            out.append((1.0 if info.get("resolved") is True else 0.0, info))
        return out

    def _parse(self, response: str, ground_truth: dict) -> ParsedPatch | str:
        try:
            from swe_env.checked import load_task
            from swe_env.tasks import buggy_sources

            return parse_response(response, buggy_sources(load_task(str(ground_truth["task_id"]))))
        except Exception as exc:  # an unknown task id or a broken cache is a 0 with the cause
            return f"cannot load task: {type(exc).__name__}: {exc}"[:300]

    @staticmethod
    def _key(ground_truth: dict, patch: str) -> str:
        return hashlib.sha256(f"{ground_truth['task_id']}\0{patch}".encode()).hexdigest()

    def _grade(self, key: str, ground_truth: dict, patch: str) -> None:
        with self._lock:
            if key in self._grades:
                return
        from swe_env.checked import load_task
        from swe_env.grade import grade

        task = load_task(str(ground_truth["task_id"]))
        info = run_grader(lambda: grade(task, patch, timeout_s=GRADE_TIMEOUT_S).to_info(), "SWE")
        with self._lock:
            self._grades[key] = info


def added_lines(patch: str) -> list[str]:
    """The stripped lines a diff adds, long enough to be specific to it."""
    lines = [line[1:].strip() for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return [line for line in lines if len(line) >= LEAK_MIN_CHARS]


def touched_ranges(patch: str) -> dict[str, list[tuple[int, int]]]:
    """Per file, the old-side line ranges (1-based, inclusive) of a diff's hunks."""
    out: dict[str, list[tuple[int, int]]] = {}
    path = None
    for line in patch.splitlines():
        if line.startswith("--- "):
            name = line[4:].split("\t")[0].strip()
            path = name[2:] if name.startswith("a/") else name
        elif (m := re.match(r"^@@ -(\d+)(?:,(\d+))?", line)) and path:
            start, count = int(m.group(1)), int(m.group(2) or 1)
            out.setdefault(path, []).append((max(start, 1), max(start + count - 1, start)))
    return out


def render_question(problem: str, sources: dict[str, str], gold: str) -> str:
    """The issue text and, per source file, the buggy lines around each place the fix goes (never the fix).

    Each hunk of the gold change gets ``WINDOW_LINES`` of context either side; overlapping windows merge;
    all windows together show at most ``MAX_SHOWN_LINES`` lines (each cut to its share).
    """
    ranges = touched_ranges(gold)
    windows: list[tuple[str, int, int]] = []
    for path in sorted(sources):
        n = len(sources[path].splitlines())
        merged: list[list[int]] = []
        for start, end in sorted(ranges.get(path) or [(1, n)]):
            lo, hi = max(1, start - WINDOW_LINES), min(n, end + WINDOW_LINES)
            if merged and lo <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        windows += [(path, lo, hi) for lo, hi in merged]
    share = max(1, MAX_SHOWN_LINES // max(1, len(windows)))
    parts = [problem.strip()]
    for path, lo, hi in windows:
        hi = min(hi, lo + share - 1)
        body = "\n".join(sources[path].splitlines()[lo - 1:hi])
        parts.append(f"{path} (lines {lo}-{hi}):\n```python\n{body}\n```")
    return "\n\n".join(parts)
