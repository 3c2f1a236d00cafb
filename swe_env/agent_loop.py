"""Agent-mode rollouts: a policy behind an endpoint drives a ``BashEnvironment``, one command per turn.

Each turn the policy answers with exactly one fenced ```` ```bash ```` block (its command, or
``submit``); an answer with none or several gets a format reminder, and ``MAX_FORMAT_ERRORS``
of them end the trajectory as ``format_error``.  An endpoint failure ends it as
``endpoint_error``.  Whatever way it ends, the work tree's diff is graded by trusted code and
the trajectory becomes one archive row (``trajectory_row``), appended to ``rows_path`` as soon
as it is finished, so nothing finished is lost when a later one fails.

    client = PolicyClient("http://127.0.0.1:8000/v1", "my-model")
    domain = SweDomain()
    rows = collect(domain.tasks("train", domain.eval_specs, 4, 0), client, rows_path=Path("agent_rows.jsonl"),
                   make_env=lambda t: domain.environment(t, AgentLimits(max_steps=20)), run_id="r1", round=0)
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from swe_env.agent_env import SUBMIT, BashEnvironment
from swe_env.policy_client import PolicyClient, PolicyEndpointError
from trajectory.rows import trajectory_row

ACTION = re.compile(r"```(?:bash|sh)?[ \t]*\n(.*?)\n?```", re.DOTALL)
MAX_FORMAT_ERRORS = 3
SYSTEM = (f"You are fixing a bug in a Python repository through a bash shell. Each reply: brief reasoning, then "
          f"exactly one command in a ```bash block. Commands run one at a time in the repository; the shell does not "
          f"keep state between them. When the fix is done, reply with ```bash\n{SUBMIT}\n```.")
FORMAT_REMINDER = (f"Format error: your reply must contain exactly one ```bash block with one command "
                   f"(or `{SUBMIT}` when done).")


@dataclass
class Trajectory:
    """One agent episode as it happened."""

    task_id: str
    messages: list[dict] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    exit_status: str = ""
    error: str = ""
    tokens: int = 0
    outcome: dict = field(default_factory=dict)


def parse_action(text: str) -> str | None:
    """The one command of a reply, or None when it holds no fenced block or several."""
    blocks = ACTION.findall(text or "")
    return blocks[0].strip() if len(blocks) == 1 and blocks[0].strip() else None


def observation_text(obs: object) -> str:
    """The user turn that shows the policy a command's result (the verl agent loop shows it the same way)."""
    return f"exit code {obs.returncode}\n{obs.output}"


def agent_messages(first: str) -> list[dict]:
    """An episode's opening conversation: the agent system prompt and the task statement (``env.start()``); the
    verl loop and its dataset rows open with the same one."""
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}]


def run_episode(env: BashEnvironment, client: PolicyClient) -> Trajectory:
    """Drive ``env`` with ``client`` to the end; the container is removed whatever happens."""
    traj = Trajectory(task_id=env.task.id)
    try:
        first = env.start()
        traj.messages = agent_messages(first)
        format_errors = 0
        while env.exit_status is None:
            try:
                text, usage = client.complete(traj.messages)
            except PolicyEndpointError as exc:
                traj.error = str(exc)
                env.end("endpoint_error")
                break
            traj.tokens += int(usage.get("completion_tokens") or 0)
            traj.messages.append({"role": "assistant", "content": text})
            action = parse_action(text)
            if action is None:
                format_errors += 1
                if format_errors >= MAX_FORMAT_ERRORS:
                    env.end("format_error")
                    break
                traj.messages.append({"role": "user", "content": FORMAT_REMINDER})
                continue
            obs = env.step(action)
            traj.actions.append(action)
            traj.observations.append(obs.output)
            traj.messages.append({"role": "user", "content": observation_text(obs)})
        traj.exit_status = env.exit_status or "error"
        traj.outcome = env.result()
    finally:
        env.close()
    return traj


def trajectory_to_row(traj: Trajectory, *, traj_id: str, run_id: str, round: int, split: str, group_id: str,
                      sample_idx: int, ground_truth: dict, data_source: str, policy_ref: str,
                      harness_commit: str | None = None) -> dict:
    """The archive row of one finished episode (``messages`` the whole conversation, ``response`` its actions)."""
    info = dict(traj.outcome.get("verifier_info") or {})
    if traj.error:
        info["endpoint_error"] = traj.error[:1000]
    response = "\n".join(f"$ {a}" for a in traj.actions)
    return trajectory_row(
        traj_id=traj_id, run_id=run_id, round=round, step=0, group_id=group_id,
        sample_idx=sample_idx, domain="swe", task_id=traj.task_id, data_source=data_source, split=split,
        prompt=next((m["content"] for m in traj.messages if m["role"] == "user"), ""), response=response,
        messages=traj.messages, ground_truth=ground_truth, verified=float(traj.outcome.get("verified", 0.0)),
        verifier_info=json.dumps(info, default=str), response_tokens=traj.tokens,
        truncated=traj.exit_status in ("step_limit", "time_limit"), finish_reason=traj.exit_status,
        harness_commit=harness_commit, policy_ref=policy_ref,
    )


def collect(tasks: list, client: PolicyClient, *, make_env: Callable[[object], BashEnvironment], run_id: str,
            round: int, rows_path: Path, split: str = "train", group_size: int = 1, harness_commit: str | None = None,
            progress: Callable[[str], None] = lambda _: None) -> list[dict]:
    """``group_size`` episodes per task (``TaskLike``: ``task_id``, ``data_source``, ``ground_truth``), one after
    the other in ``make_env(task)``; each row appended to ``rows_path`` as soon as it is finished.

    A row already in ``rows_path`` (a resumed collection) is not run again.  An endpoint that fails before
    a trajectory's first command raises ``PolicyEndpointError``; the rows finished before stay in ``rows_path``.
    """
    done = {}
    if rows_path.exists():
        for line in rows_path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["traj_id"]] = row
    rows = []
    for t, task in enumerate(tasks):
        for k in range(group_size):
            index = t * group_size + k
            traj_id = f"{run_id}-r{round}-{split}-agent-{index}"
            if traj_id in done:
                rows.append(done[traj_id])
                continue
            traj = run_episode(make_env(task), client)
            if traj.exit_status == "endpoint_error" and not traj.actions:  # nothing happened: no trajectory
                raise PolicyEndpointError(f"{traj.error} ({len(rows)} finished trajectories kept in {rows_path})")
            row = trajectory_to_row(traj, traj_id=traj_id, run_id=run_id, round=round, split=split,
                                    group_id=f"{split}-agent-g{t}", sample_idx=k, ground_truth=task.ground_truth,
                                    data_source=task.data_source, policy_ref=f"endpoint:{client.model}",
                                    harness_commit=harness_commit)
            with rows_path.open("a") as f:
                f.write(json.dumps(row) + "\n")
            rows.append(row)
            progress(f"{task.task_id} #{k}: {traj.exit_status}, {len(traj.actions)} steps, "
                     f"{traj.outcome.get('verifier_info', {}).get('status')}")
    return rows
