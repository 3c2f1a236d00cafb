"""The probe's rows judged by trusted code: the verifier's record on every row, the prompt checks on fresh tasks."""

from __future__ import annotations

import json

from meta_agent.judge.probe_answers import Constructed
from meta_agent.prompt_checks import prompt_text


def verify(rows: list[tuple[dict, str, Constructed]], domain) -> dict[str, bool]:
    """Attach the trusted record to every row (``verifier_info``, as training does); traj id -> verified."""
    todo = [(row, answer) for row, _, answer in rows if answer.verdict is None]
    # a task's group repeats its constructed answers (four kinds): each distinct answer is graded once
    keys = {row["traj_id"]: (row["data_source"], row["response"], json.dumps(row["ground_truth"], sort_keys=True,
                                                                             default=str)) for row, _ in todo}
    distinct = {keys[row["traj_id"]]: (row["data_source"], row["response"], row["ground_truth"]) for row, _ in todo}
    items = list(distinct.values())
    batch = getattr(domain, "verify_batch", None)  # code grades many programs per container
    graded = dict(zip(distinct, batch(items) if batch is not None else [domain.verify(*item) for item in items]))
    records = {traj: graded[key] for traj, key in keys.items()}
    records |= {row["traj_id"]: answer.verdict for row, _, answer in rows if answer.verdict is not None}
    for row, _, _ in rows:
        row["verifier_info"] = json.dumps(records[row["traj_id"]][1], default=str)
    return {traj: score >= 0.5 for traj, (score, _) in records.items()}


def prompt_checks(rendered: list, tasks: list, domain) -> list[dict]:
    """``probe_render`` and ``probe_leak`` over the prompts rendered for fresh ``tasks``."""
    errors = [r for r in rendered if isinstance(r, str)]
    checks = [{"name": "probe_render", "passed": not errors,
               "detail": f"{len(errors)} of {len(rendered)} prompts over fresh tasks failed to render"
                         + (f": {errors[0][:300]}" if errors else "")}]
    leaks = [t.task_id for r, t in zip(rendered, tasks) if not isinstance(r, str)
             and domain.leaks_answer(prompt_text(r), t.ground_truth)
             and not domain.leaks_answer(t.question, t.ground_truth)]
    checks.append({"name": "probe_leak", "passed": not leaks,
                   "detail": f"{len(leaks)} of {len(rendered)} prompts over fresh tasks show the gold answer that "
                             "their question does not" + (f" (first: {leaks[0]})" if leaks else "")})
    return checks
