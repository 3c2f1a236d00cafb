"""What harness code costs while verl trains: container CPU seconds and bytes of reward info, per request.

The local backend records its one harness session's cost with the round (``eval["harness_cost"]``), and the
tripwire compares it per trajectory with the round before (``meta_agent.judge.cpu_cost.training_cost_alarm``).
On verl the harness runs in one session per reward-worker process (``reward_entry._session``: the entry's
requests and the sampler's), so each process appends one line per score request to
``<folder>/<host>-<pid>.cost`` (the entry's records folder, or the sampler's group records folder)::

    {"session": "<hex>", "cpu_s": 3.2, "trajectories": 512, "reward_info_bytes": 20480}

``cpu_s`` is the session's container CPU so far (the cgroup's count, every process of it), read at most once a
``READ_EVERY_S`` per session (a reading from the engine's stats call, where there are no cgroup files, takes
0.3-1 s): the last reading of a session may miss at most that long of its work.  :func:`load_cost` sums the
sessions of every process and folder into ``harness_cost``.  Trusted code; nothing here runs harness code.

    meter(harness_dir, session, scored, records_dir)              # after each score request
    eval_summary["harness_cost"] = load_cost(plan.records, plan.group_records)
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

READ_EVERY_S = 1.0
"""The least time between two CPU readings of one session."""

_lock = threading.Lock()
_last: dict[int, tuple[object, str, float, float | None]] = {}
"""id(session) -> (the session, its token, when read, cpu_s read): holding the session keeps its id its own."""


def meter(session: object, scored: list, folder: str | Path | None) -> None:
    """One cost line for a score request that ``session`` answered with ``scored`` (a list of ``Scored``)."""
    if folder is None:
        return
    info_bytes = sum(len(json.dumps(s.reward_info, default=str)) for s in scored if s.reward_info)
    now = time.monotonic()
    with _lock:
        _, token, when, cpu_s = _last.get(id(session), (session, secrets.token_hex(8), -READ_EVERY_S, None))
        if now - when >= READ_EVERY_S:
            process = getattr(session, "_process", None)
            usage = getattr(process, "usage", None)
            reading = usage()["cpu_s"] if usage is not None else None
            cpu_s, when = (reading if reading is not None else cpu_s), now
        _last[id(session)] = (session, token, when, cpu_s)
        line = json.dumps({"session": token, "cpu_s": cpu_s, "trajectories": len(scored),
                           "reward_info_bytes": info_bytes}) + "\n"
        path = Path(folder) / f"{socket.gethostname()}-{os.getpid()}.cost"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as f:
            f.write(line)


def load_cost(*folders: str | Path) -> dict:
    """``{"cpu_s", "trajectories", "reward_info_bytes", "sessions"}`` over every cost file of ``folders``: each
    session's last CPU reading, summed (None when no session was read), and the requests' counts summed."""
    cpu: dict[str, float] = {}
    trajectories = info = 0
    for folder in folders:
        for path in sorted(Path(folder).glob("*.cost")) if Path(folder).is_dir() else []:
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a worker killed mid-write
                trajectories += int(entry.get("trajectories") or 0)
                info += int(entry.get("reward_info_bytes") or 0)
                if isinstance(entry.get("cpu_s"), (int, float)):
                    cpu[entry["session"]] = max(cpu.get(entry["session"], 0.0), float(entry["cpu_s"]))
    return {"cpu_s": round(sum(cpu.values()), 3) if cpu else None, "trajectories": trajectories,
            "reward_info_bytes": info, "sessions": len(cpu)}
