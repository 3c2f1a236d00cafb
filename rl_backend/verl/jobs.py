"""A launched verl job seen from the controller: is it alive, how did it end, what did it log, whose failure was it.

    state = exit_code(job)                 # None while it runs, else its exit status
    entries = read_metrics(plan.metrics, round=3)
    raise job_failure("round 3: the verl job exited with 1", plan.log)

``job`` is the dict ``job.json`` records (``backend.VerlBackend._launch`` / ``_submit``): a local job's
``pid`` and ``identity``, or a submitted one's ``submission_id`` and ``job_address``.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import deque
from pathlib import Path

from rl_backend.base import TrainingFailed, infrastructure_failure
from rl_backend.verl.config import HARNESS_FAILURE_MARK, job_command
from sandboxes.processes import running

LOG_TAIL_LINES = 40


def exit_code(job: dict) -> int | None:
    """The job's exit status, None while it runs; a re-attached local job (not our child) reports 0 when gone,
    a submitted one what ``ray job status`` says (a job Ray does not know is a failure, never a success)."""
    if "submission_id" in job:
        done = subprocess.run(job_command("status", job["job_address"], job["submission_id"]), capture_output=True,
                              text=True)
        return job_state(done.stdout + done.stderr, done.returncode)
    process = job.get("process")
    if process is not None:
        return process.poll()
    return None if running(job.get("pid"), job.get("identity")) else 0


def job_state(output: str, returncode: int) -> int | None:
    """``ray job status``'s answer as an exit status: None while pending or running, 0 succeeded, 1 otherwise."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", output)  # the CLI colours its words
    if returncode == 0 and re.search(r"Job '[^']*' succeeded", text):
        return 0
    if returncode == 0 and re.search(r"Status for job '[^']*': (PENDING|RUNNING)", text):
        return None
    return 1


def job_name(job: dict) -> str:
    """How a message names the job: its Ray submission id or its pid."""
    return f"Ray job {job['submission_id']}" if "submission_id" in job else f"pid {job['pid']}"


def fetch_job_log(job: dict, log: Path) -> None:
    """A submitted job's driver log, from the cluster into ``job.log`` (a local job already writes there)."""
    if "submission_id" in job:
        with log.open("ab") as f:
            subprocess.run(job_command("logs", job["job_address"], job["submission_id"]), stdout=f,
                           stderr=subprocess.STDOUT)


def job_failure(message: str, log: Path) -> TrainingFailed:
    """A dead job's failure, blamed on the harness only when its log holds the sampler's proof
    (``HARNESS_FAILURE_MARK``: the harness left nothing to train); every other death is the infrastructure's."""
    tail = log_tail(log)
    try:
        proved = HARNESS_FAILURE_MARK in log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        proved = False
    text = f"{message}; last lines of {log}:\n{tail}"
    return TrainingFailed(text, log_tail=tail) if proved else infrastructure_failure(text, tail)


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a job log, or ``(no log)``."""
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines))
    except FileNotFoundError:
        return "(no log)"


def read_metrics(path: Path, round: int) -> list[dict]:
    """verl's file-logger lines as progress entries, with the ``STEP_METRICS`` under our names (``loss``,
    ``reward``, ``kl``; the sampler already logs the harness counts under ours) beside verl's own."""
    entries = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return entries
    for line in lines:
        try:
            record = json.loads(line)
            data = dict(record["data"])
            step = int(record["step"])
        except (ValueError, KeyError, TypeError):
            continue  # a line being written
        entry = {"round": round, "step": step, **data}
        for ours, theirs in (("loss", "actor/pg_loss"), ("reward", "critic/score/mean"), ("kl", "actor/kl_loss"),
                             ("response_length", "response_length/mean"),
                             ("throughput", "perf/throughput"), ("time_per_step", "perf/time_per_step")):
            if theirs in data:
                entry[ours] = data[theirs]
        entries.append(entry)
    return entries
