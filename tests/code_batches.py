"""One batch of hostile programs, each followed by an honest one, graded in one container: what every held-out
set of code-grader attacks runs, so that a hostile program's reach into the next (honest) one shows."""

from __future__ import annotations

from execution.programs import ProgramJob, grade_programs


def between_honest(sandbox, hostile: dict[str, str], honest: str, inputs, expected, extra: dict[str, str] | None = None,
                   **grade_kwargs) -> dict:
    """Grade ``honest_first``, then each hostile program followed by ``honest_after_<name>``, then ``extra``, all in
    one batch (one container), every program entered as ``f`` and expected to return ``expected``."""
    programs = {"honest_first": honest}
    for name, code in hostile.items():
        programs[name] = code
        programs[f"honest_after_{name}"] = honest
    programs |= extra or {}
    jobs = [ProgramJob(name, code, entry="f", inputs=inputs) for name, code in programs.items()]
    return grade_programs(jobs, {job.key: expected for job in jobs}, sandbox, batch_size=len(jobs), **grade_kwargs)
