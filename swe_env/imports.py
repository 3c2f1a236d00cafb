"""Trajectories other tools wrote -> archive rows graded by the trusted grader.

Three formats, read as those tools write them:

- ``mini-swe-agent``: a ``*.traj.json`` with ``trajectory_format: "mini-swe-agent-1.1"``, ``info``
  (``exit_status``, ``submission``, ``model_stats``) and ``messages`` (``role``, ``content``, the
  commands in ``extra.actions[].command``); the task id from ``instance_id`` or the file name;
- ``swe-agent``: a ``.traj`` with ``trajectory`` steps (``action``, ``observation``, ``response``,
  ``thought``), ``history`` (chat messages) and ``info`` (``submission``, ``exit_status``); the
  task id from the file name (``<instance_id>.traj``) unless the file names one;
- ``swebench-predictions``: SWE-bench predictions (``instance_id``, ``model_patch``), as a JSON
  list, a JSON object keyed by instance id (mini-swe-agent's ``preds.json``) or JSON lines.

Each trajectory's patch is graded against the shipped task of its id (``swe_env.grade``), never
trusting what the file says about its own outcome.  A malformed file is an ``ImportFormatError``
naming the file and line.

    python -m meta_agent import-trajectories runs/*.traj.json --format mini-swe-agent \\
        --archive runs/swe/archive --run-id imported --round 0
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from swe_env.feedback import execution_feedback, ground_truth
from trajectory.rows import trajectory_row

FORMATS = ("mini-swe-agent", "swe-agent", "swebench-predictions")
MAX_FILE_BYTES = 256 << 20
MINI_EXITS = {"Submitted": "submitted", "LimitsExceeded": "step_limit", "TimeExceeded": "time_limit",
              "RepeatedFormatError": "format_error"}
SWE_AGENT_EXITS = {"exit_cost": "step_limit", "exit_context": "context_limit", "exit_format": "format_error",
                   "exit_command_timeout": "time_limit", "exit_total_execution_time": "time_limit"}


class ImportFormatError(ValueError):
    """A file that is not what its format says; the message names the file and line."""


@dataclass
class Imported:
    """One trajectory (or prediction) as read from a file, before grading."""

    task_id: str
    patch: str
    source: str
    """``file:line`` where it was read."""
    messages: list[dict] = field(default_factory=list)
    actions: list[str] = field(default_factory=list)
    exit_status: str = "submitted"
    tokens: int | None = None


def read_trajectories(path: Path, fmt: str) -> list[Imported]:
    """The trajectories in ``path`` written by the tool ``fmt`` (one of :data:`FORMATS`)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise ImportFormatError(f"{path}: larger than {MAX_FILE_BYTES >> 20} MiB")
    text = path.read_text(encoding="utf-8", errors="replace")
    if fmt == "swebench-predictions":
        return _predictions(path, text)
    data = _json(path, text)
    if not isinstance(data, dict):
        raise ImportFormatError(f"{path}:1: expected a JSON object, found {type(data).__name__}")
    return [_mini(path, text, data) if fmt == "mini-swe-agent" else _swe_agent(path, text, data)]


def import_rows(paths: list[Path], fmt: str, *, run_id: str, round: int,
                progress: Callable[[str], None] = lambda _: None) -> list[dict]:
    """Every trajectory of ``paths`` graded and made an archive row of split ``train``.

    All files are read (and refused) before anything is graded.  Rows of one task form one group.
    """
    from swe_env.checked import load_task
    from swe_env.grade import grade

    items = [item for path in paths for item in read_trajectories(Path(path), fmt)]
    tasks = {}
    for item in items:
        if item.task_id not in tasks:
            try:
                tasks[item.task_id] = load_task(item.task_id)
            except Exception as exc:
                raise ImportFormatError(f"{item.source}: task {item.task_id!r} is not a shipped, checked task "
                                        f"({exc})") from exc
    rows, per_task = [], {}
    for i, item in enumerate(items):
        task = tasks[item.task_id]
        info = grade(task, item.patch).to_info() | {"patch": item.patch, "parse_status": "ok", "source": item.source}
        agent = {} if fmt == "swebench-predictions" else {"exit_status": item.exit_status, "actions": item.actions,
                                                           "steps": len(item.actions)}
        info["execution"] = execution_feedback(info, **agent)
        idx = per_task.setdefault(item.task_id, 0)
        per_task[item.task_id] += 1
        prompt = next((str(m.get("content")) for m in item.messages if m.get("role") == "user"), task.problem_statement)
        rows.append(trajectory_row(
            traj_id=f"{run_id}-r{round}-import-{i}", run_id=run_id, round=round, step=0,
            group_id=f"import-{item.task_id}", sample_idx=idx, domain="swe", task_id=item.task_id,
            data_source=f"swe/{task.package}", split="train", prompt=prompt,
            response="\n".join(f"$ {a}" for a in item.actions) if item.actions else item.patch,
            messages=item.messages or None, ground_truth=ground_truth(task),
            verified=1.0 if info.get("resolved") is True else 0.0, verifier_info=json.dumps(info, default=str),
            response_tokens=item.tokens, truncated=item.exit_status in ("step_limit", "time_limit", "context_limit"),
            finish_reason=item.exit_status, policy_ref=f"import:{fmt}",
        ))
        progress(f"{item.source}: {item.task_id} {info.get('status')}")
    return rows


# -- readers -----------------------------------------------------------------------------------


def _json(path: Path, text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}:{exc.lineno}: not JSON ({exc.msg}, column {exc.colno})") from exc


def _line_of(text: str, key: str) -> int:
    """The line where ``"key"`` first appears (1 if it does not): where to look in a malformed file."""
    at = text.find(f'"{key}"')
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _need(path: Path, text: str, data: dict, key: str, kind: type, where: str = ""):
    value = data.get(key)
    if not isinstance(value, kind):
        found = "missing" if key not in data else f"a {type(value).__name__}"
        raise ImportFormatError(f"{path}:{_line_of(text, key)}: {where}{key!r} should be a {kind.__name__}, "
                                f"found {found}")
    return value


def _task_id(path: Path, data: dict, info: dict) -> str:
    for value in (data.get("instance_id"), info.get("instance_id")):
        if isinstance(value, str) and value:
            return value
    return re.sub(r"\.traj(\.json)?$", "", path.name)


def _mini(path: Path, text: str, data: dict) -> Imported:
    if data.get("trajectory_format") != "mini-swe-agent-1.1":
        raise ImportFormatError(f"{path}:{_line_of(text, 'trajectory_format')}: trajectory_format is "
                                f"{data.get('trajectory_format')!r}, not 'mini-swe-agent-1.1'")
    info = _need(path, text, data, "info", dict)
    messages = _need(path, text, data, "messages", list)
    actions, kept = [], []
    for n, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ImportFormatError(f"{path}:{_line_of(text, 'messages')}: messages[{n}] has no role")
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        for action in extra.get("actions") or []:
            command = action.get("command") if isinstance(action, dict) else action
            if not isinstance(command, str):
                raise ImportFormatError(f"{path}:{_line_of(text, 'actions')}: messages[{n}].extra.actions holds "
                                        f"{command!r}, not a command")
            actions.append(command)
        kept.append({"role": message["role"], "content": _content(message.get("content"))})
    exit_status = str(info.get("exit_status") or "")
    submission = info.get("submission")
    return Imported(task_id=_task_id(path, data, info), patch=submission if isinstance(submission, str) else "",
                    source=f"{path}:1", messages=kept, actions=actions,
                    exit_status=MINI_EXITS.get(exit_status, exit_status.lower() or "unknown"),
                    tokens=None)


def _swe_agent(path: Path, text: str, data: dict) -> Imported:
    steps = _need(path, text, data, "trajectory", list)
    info = _need(path, text, data, "info", dict)
    history = data.get("history") if isinstance(data.get("history"), list) else []
    actions = []
    for n, step in enumerate(steps):
        if not isinstance(step, dict) or not isinstance(step.get("action"), str):
            raise ImportFormatError(f"{path}:{_line_of(text, 'trajectory')}: trajectory[{n}] has no 'action' string")
        actions.append(step["action"].strip())
    messages = [{"role": str(m.get("role")), "content": _content(m.get("content"))}
                for m in history if isinstance(m, dict) and isinstance(m.get("role"), str)]
    exit_status = str(info.get("exit_status") or "")
    status = "submitted" if exit_status.startswith("submitted") else SWE_AGENT_EXITS.get(exit_status,
                                                                                          exit_status or "unknown")
    submission = info.get("submission")
    return Imported(task_id=_task_id(path, data, info), patch=submission if isinstance(submission, str) else "",
                    source=f"{path}:1", messages=messages, actions=actions, exit_status=status)


def _predictions(path: Path, text: str) -> list[Imported]:
    stripped = text.lstrip()
    if stripped.startswith(("[", "{")) and not _is_jsonl(text):
        data = _json(path, text)
        records = list(data.values()) if isinstance(data, dict) and "instance_id" not in data else \
            (data if isinstance(data, list) else [data])
        lines = [_line_of(text, r.get("instance_id", "")) if isinstance(r, dict) else 1 for r in records]
    else:
        records, lines = [], []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ImportFormatError(f"{path}:{n}: not a JSON object ({exc.msg})") from exc
                lines.append(n)
    out = []
    for record, line in zip(records, lines):
        if not isinstance(record, dict) or not isinstance(record.get("instance_id"), str) \
                or not isinstance(record.get("model_patch"), (str, type(None))):
            raise ImportFormatError(f"{path}:{line}: a prediction needs 'instance_id' (text) and 'model_patch' "
                                    f"(text or null)")
        out.append(Imported(task_id=record["instance_id"], patch=record["model_patch"] or "", source=f"{path}:{line}"))
    if not out:
        raise ImportFormatError(f"{path}:1: no predictions")
    return out


def _is_jsonl(text: str) -> bool:
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        return False
    try:
        return all(isinstance(json.loads(line), dict) for line in lines)
    except json.JSONDecodeError:
        return False


def _content(content) -> str:
    """Message content as text (tool-call models may send a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)
