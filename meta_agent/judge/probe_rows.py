"""The probe's rows judged by trusted code: the verifier's record on every row, the prompt checks on fresh tasks."""

from __future__ import annotations

import json
from collections.abc import Callable

from meta_agent.judge.probe_answers import Constructed
from meta_agent.prompt_checks import prompt_text, template_item
from sandboxes.harness_client import HarnessFailed, HarnessSession


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


def leaking(rendered: list, tasks: list, domain) -> list[int]:
    """Indexes of the fresh tasks whose rendered prompt shows the gold answer their question does not."""
    return [i for i, (r, t) in enumerate(zip(rendered, tasks)) if not isinstance(r, str)
            and domain.leaks_answer(prompt_text(r), t.ground_truth)
            and not domain.leaks_answer(t.question, t.ground_truth)]


def main_rendering(open_main: Callable[[], HarnessSession] | None, rendered: list, tasks: list,
                   domain) -> dict[int, list | str] | None:
    """Main's prompts for the fresh tasks whose candidate prompt leaks (index -> messages or the rendering error),
    rendered in a session of main's own; None where none leaks, no main is given or main's session fails (then
    every leak stays the candidate's).  Templates only: the render process runs no harness Python."""
    found = leaking(rendered, tasks, domain)
    if not found or open_main is None:
        return None
    session = open_main()
    try:
        session.start()
        return dict(zip(found, session.render([template_item(tasks[i].question, tasks[i].template_vars())
                                               for i in found])))
    except HarnessFailed:
        return None
    finally:
        session.close()


def prompt_checks(rendered: list, tasks: list, domain, main: dict[int, list | str] | None = None) -> list[dict]:
    """``probe_render`` and ``probe_leak`` over the prompts rendered for fresh ``tasks``; ``main``: main's prompts
    for the leaking ones (:func:`main_rendering`): a gold main's own prompt shows too is not the candidate's leak
    (a worked example's numbers meet a fresh task's gold by the draw)."""
    errors = [r for r in rendered if isinstance(r, str)]
    checks = [{"name": "probe_render", "passed": not errors,
               "detail": f"{len(errors)} of {len(rendered)} prompts over fresh tasks failed to render"
                         + (f": {errors[0][:300]}" if errors else "")}]
    found = leaking(rendered, tasks, domain)
    mains = [i for i in found if main is not None and not isinstance(main.get(i, ""), str)
             and domain.leaks_answer(prompt_text(main[i]), tasks[i].ground_truth)]
    leaks = [tasks[i].task_id for i in found if i not in mains]
    checks.append({"name": "probe_leak", "passed": not leaks,
                   "detail": f"{len(leaks)} of {len(rendered)} prompts over fresh tasks show the gold answer that "
                             "their question does not" + (f" (first: {leaks[0]})" if leaks else "")
                             + (f"; {len(mains)} more where main's prompt for the same task shows it too (main's, "
                                "not counted)" if mains else "")})
    return checks
