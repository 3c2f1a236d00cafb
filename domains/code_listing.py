"""``python -m meta_agent tasks list --domain code [--json]``: the frozen code tasks, counted by source and split.

    source     split     tasks  tests  max lines
    codeio     train       169   1014        10
"""

from __future__ import annotations

import json

from domains.code_tasks import TASK_FILE, load_tasks


def task_counts() -> list[dict]:
    """One row per (source, split): tasks, tests, and the shortest and longest reference (code lines)."""
    rows: dict[tuple[str, str], dict] = {}
    for task in load_tasks():
        row = rows.setdefault((task["source"], task["split"]), {"source": task["source"], "split": task["split"],
                                                                "tasks": 0, "tests": 0, "min_lines": 10**9,
                                                                "max_lines": 0})
        row["tasks"] += 1
        row["tests"] += len(task["tests"])
        row["min_lines"] = min(row["min_lines"], task["lines"])
        row["max_lines"] = max(row["max_lines"], task["lines"])
    return [rows[k] for k in sorted(rows)]


def print_code_tasks(as_json: bool = False) -> int:
    """Print :func:`task_counts` as a table (or one JSON object per row); exit code 0."""
    rows = task_counts()
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"frozen tasks: {TASK_FILE}")
    print(f"{'source':<10} {'split':<8} {'tasks':>6} {'tests':>6}  reference lines")
    for row in rows:
        print(f"{row['source']:<10} {row['split']:<8} {row['tasks']:>6} {row['tests']:>6}  "
              f"{row['min_lines']}-{row['max_lines']}")
    print("HumanEval is held out only and reported on its own (data source code/humaneval).")
    return 0
