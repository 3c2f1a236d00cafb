"""The harness runtime's protocol against a real Docker engine: parity, caller-blindness, hostile answers.

- Parity: many batches per request give what one batch per request gives, and both give what the
  documented order (``sandboxes/harness_runtime/``) computes in-process from the same harness files.
- One behaviour whatever the caller: a harness that records everything it can observe (how many
  calls come before a filter, what its files and processes show, its cgroup, the mount table) sees
  the same thing when called the way a backtest calls it and the way training calls it.
- Hostile answers: a runtime that answers NaN, lies about a frame's length, floods, dies mid-answer
  or never answers fails the session with a reason, never the host.

    .venv/bin/python -m pytest -q tests/test_harness_protocol.py
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

import pytest

from sandboxes.base import Limits
from sandboxes.harness_wire import views_frame
from sandboxes.harness_client import (REQUEST_S_BASE, REQUEST_S_PER_ITEM, HarnessFailed, HarnessSession,
                                      trajectory_view)

pytestmark = pytest.mark.docker

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
RANGE = (0.0, 1.0)

FILTERS = '''
def keep_trajectory(traj):
    return traj["sample_idx"] != 3 and traj["reward"] is not None


def keep_group(group):
    if any(m["task_id"].endswith("7") for m in group):
        raise ValueError("no sevens")
    return sum(m["keep"] for m in group) >= 2
'''
"""Drops the 4th sample, fails groups whose task ends in 7, and drops groups with fewer than 2 kept."""

REWARD_TAIL = '''
_seed = compute_score


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    # groups g5 and g15, and g3 (keyed on their tasks: the ids harness code sees are opaque, issue 45)
    if extra_info["sample_idx"] == 2 and extra_info["task_id"] in ("chain_sum-5-0-5", "products-5-0-3"):
        raise RuntimeError("boom")
    if extra_info["sample_idx"] == 1 and extra_info["task_id"] == "chain_sum-5-0-3":
        return 7.0  # outside the domain's range
    return _seed(data_source, solution_str, ground_truth, extra_info)
'''

OBSERVER = '''
import builtins, json, os

SEEN = {"calls_before_filter": [], "run": 0}
_RUN = {"n": 0}
builtins.OBSERVED = (SEEN, _RUN)  # shared with filters.py (harness modules are loaded apart)


def _try(fn):
    try:
        return fn()
    except Exception as exc:
        return type(exc).__name__


def _listing(path):
    return _try(lambda: sorted(os.listdir(path)))


def _observe():
    return {
        "argv": _try(lambda: open("/proc/self/cmdline", "rb").read().decode(errors="replace")),
        "parent": _try(lambda: open(f"/proc/{os.getppid()}/cmdline", "rb").read().decode(errors="replace")),
        "parent_fds": _listing(f"/proc/{os.getppid()}/fd"),
        "parent_stdin": _try(lambda: open(f"/proc/{os.getppid()}/fd/0", "rb").read(10)),
        "parent_mem": _try(lambda: open(f"/proc/{os.getppid()}/mem", "rb").read(1)),
        "own_fds": len(_listing("/proc/self/fd")),
        "root": _listing("/"), "tmp": _listing("/tmp"), "rt": _listing("/tmp/rt"), "in": _listing("/in"),
        "out": _listing("/out"),
        "memory": _try(lambda: open("/sys/fs/cgroup/memory/memory.limit_in_bytes").read().strip()),
        "memory2": _try(lambda: open("/sys/fs/cgroup/memory.max").read().strip()),
        "pids": _try(lambda: open("/sys/fs/cgroup/pids/pids.max").read().strip()),
        "cpu": _try(lambda: open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read().strip()),
        # how many (pid numbers vary at random between containers, whoever starts them)
        "processes": len([p for p in os.listdir("/proc") if p.isdigit()]),
        "mountinfo": _try(lambda: open("/proc/self/mountinfo").read()),
        "mounts": _try(lambda: sorted(" ".join((l.split()[4], l.split(" - ")[1].split()[0]))
                                      for l in open("/proc/self/mountinfo"))),
        "environ": sorted(os.environ),
    }


OBSERVED = []
LOOKAHEAD = {"sizes": set(), "pending": 0}


def _lookahead():
    """What the worker holds beyond this group: the sizes of every list in its callers' frames, and the bytes
    already queued on any of its descriptors (the next groups, if they were sent ahead)."""
    import array, fcntl, sys, termios
    frame = sys._getframe(2)
    while frame is not None:
        for name, value in frame.f_locals.items():
            if isinstance(value, (list, tuple, dict, bytes, bytearray)):
                LOOKAHEAD["sizes"].add(f"{frame.f_code.co_name}.{name}={len(value)}")
        frame = frame.f_back
    for fd in range(3, 16):
        buf = array.array("i", [0])
        try:
            fcntl.ioctl(fd, termios.FIONREAD, buf)
        except OSError:
            continue
        LOOKAHEAD["pending"] = max(LOOKAHEAD["pending"], buf[0])


_IDS = []


def _sharing(*values):
    """How many distinct objects each argument was over a group's 4 calls: if the caller's encoding (runs of
    equal values, say) showed through as one shared object, it would tell a request's size."""
    _IDS.append(tuple(map(id, values)))
    if len(_IDS) == 4:
        LOOKAHEAD["sizes"].add("distinct=" + ",".join(str(len(set(ids))) for ids in zip(*_IDS)))
        _IDS.clear()


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    _RUN["n"] += 1
    _lookahead()
    _sharing(data_source, solution_str, ground_truth, extra_info)
    if not OBSERVED:
        OBSERVED.append(json.dumps(_observe(), sort_keys=True))
    k = _RUN["n"] - 1  # the observation travels in 3000-character parts, one per reward of this lane (info is capped)
    return {"score": 0.0, "part": OBSERVED[0][3000 * k:3000 * (k + 1)], "lane": os.getpid(),
            "calls": SEEN["calls_before_filter"],
            "lookahead": json.dumps([sorted(LOOKAHEAD["sizes"]), LOOKAHEAD["pending"]])}
'''

OBSERVER_FILTERS = '''
import builtins


def keep_trajectory(traj):
    # how many rewards were computed since the last filter call: the size of a batch, if calls came in batches
    seen, run = builtins.OBSERVED
    seen["calls_before_filter"].append(run["n"] - seen["run"])
    seen["run"] = run["n"]
    return True
'''


# -- fixtures


def _harness(root: Path, files: dict[str, str]) -> Path:
    for path in SEED.rglob("*"):
        if path.is_file():
            target = root / path.relative_to(SEED)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    for name, text in files.items():
        (root / name).write_text(text)
    return root


@pytest.fixture(scope="module")
def views() -> list[dict]:
    from domains.math import MathDomain
    from rl_backend.synthetic import synthetic_math_rows

    rows = synthetic_math_rows("p", 0, 24, 4, seed=5, verify=MathDomain().verify)
    for i, row in enumerate(rows):
        row["truncated"] = i % 9 == 0
    return [trajectory_view(r) for r in rows]


@pytest.fixture(scope="module")
def parity_harness(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("parity")
    return _harness(root, {"filters.py": FILTERS,
                           "reward.py": (SEED / "reward.py").read_text() + REWARD_TAIL})


def _batches(views: list[dict], sizes: list[int]) -> list[list[dict]]:
    out, start = [], 0
    for size in sizes:
        out.append(views[start:start + size])
        start += size
    assert start == len(views)
    return out


def _documented(harness: Path, batches: list[list[dict]], dynamic_sampling: bool, mask_truncated: bool) -> list:
    """The runtime's documented order, computed here in-process from the same files (test oracle)."""
    def load(name: str):
        spec = importlib.util.spec_from_file_location(f"oracle_{name}", harness / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    reward, filters = load("reward"), load("filters")
    out = []
    for batch in batches:
        groups: dict[str, list[dict]] = {}
        for view in batch:
            groups.setdefault(view["group_id"], []).append(view)
        rows = {}
        for members in groups.values():
            for v in members:
                try:
                    raw = reward.compute_score(v["data_source"], v["response"], v["ground_truth"],
                                               extra_info=dict(v["extra_info"]))
                    score = float(raw["score"] if isinstance(raw, dict) else raw)
                    rows[v["traj_id"]] = [score, True, None]
                except Exception:
                    rows[v["traj_id"]] = [None, False, "error"]
                if rows[v["traj_id"]][0] is not None and not RANGE[0] <= rows[v["traj_id"]][0] <= RANGE[1]:
                    rows[v["traj_id"]] = [None, False, "range"]
            for v in members:
                rows[v["traj_id"]][1] = rows[v["traj_id"]][1] and filters.keep_trajectory(
                    dict(v, reward=rows[v["traj_id"]][0]))
            try:
                ok = filters.keep_group([dict(v, reward=rows[v["traj_id"]][0], keep=rows[v["traj_id"]][1])
                                         for v in members])
            except ValueError:
                ok = False
                for v in members:
                    rows[v["traj_id"]][2] = rows[v["traj_id"]][2] or "error"
            for v in members:
                row = rows[v["traj_id"]]
                row[1] = row[1] and ok and not (mask_truncated and v["truncated"]) and row[2] is None
            if dynamic_sampling and len({rows[v["traj_id"]][0] for v in members if rows[v["traj_id"]][1]}) <= 1:
                for v in members:
                    rows[v["traj_id"]][1] = False
        out.extend((t, r[0], r[1], r[2] is not None) for t, r in rows.items())
    return out


def _summary(scored) -> list:
    return [(s.traj_id, s.reward, s.keep, s.error is not None) for s in scored]


# -- parity


@pytest.mark.parametrize("dynamic_sampling,mask_truncated", [(False, False), (True, True)])
def test_many_batches_per_request_match_one_by_one_and_the_documented_order(
        docker_sandbox, parity_harness, views, dynamic_sampling, mask_truncated):
    sizes = [8, 16, 4, 32, 36]  # uneven batches of whole groups, as training's steps make them
    batches = _batches(views, sizes)
    knobs = {"reward_range": RANGE, "dynamic_sampling": dynamic_sampling, "mask_truncated": mask_truncated}
    with HarnessSession(docker_sandbox, parity_harness) as session:
        together = session.score_batches(batches, **knobs)
        one_by_one = [s for batch in batches for s in session.score(batch, **knobs)]
    assert [s.__dict__ for s in together] == [s.__dict__ for s in one_by_one]
    expected = _documented(parity_harness, batches, dynamic_sampling, mask_truncated)
    assert _summary(together) == expected
    # the cases the oracle covers all occur: kept, dropped, reward errors, group errors, a refused reward
    assert {k for _, _, k, _ in expected} == {True, False}
    assert any(s.invalid_reward == 7.0 for s in together)
    assert any(s.error and s.error.startswith("reward: RuntimeError: boom") for s in together)
    assert any(s.error and s.error.startswith("keep_group: ValueError") for s in together)


def test_requests_overlapped_with_the_hosts_checks_match_one_request(docker_sandbox, parity_harness, views,
                                                                      monkeypatch):
    """With many requests, each is sent before the previous answer is checked: same results, same order."""
    import sandboxes.harness_client as client

    batches = _batches(views, [8, 16, 4, 32, 36])
    with HarnessSession(docker_sandbox, parity_harness) as session:
        whole = session.score_batches(batches, reward_range=RANGE)
        monkeypatch.setattr(client, "REQUEST_VIEWS", 16)  # requests of 8, 16, 4, 32 and 36 views (a big batch alone)
        sent, encode = [], session._encode
        monkeypatch.setattr(session, "_encode", lambda make, i: sent.append(make(i)[1]) or encode(make, i))
        split = session.score_batches(batches, reward_range=RANGE)
    assert sent == [8, 16, 4, 32, 36]
    assert [s.__dict__ for s in split] == [s.__dict__ for s in whole] and len(whole) == 96


def test_a_group_split_across_batches_is_two_groups(docker_sandbox, parity_harness, views):
    """Batches are the unit training scored: the same group id in two batches is judged twice, apart."""
    group = views[:4]
    with HarnessSession(docker_sandbox, parity_harness) as session:
        split = session.score_batches([group[:2], group[2:]], reward_range=RANGE)
        alone = session.score(group[:2], reward_range=RANGE) + session.score(group[2:], reward_range=RANGE)
    assert [s.__dict__ for s in split] == [s.__dict__ for s in alone]


# -- prompts: one message per request, no harness Python in the render process

RENDERER_PATCH = '''
import jinja2.environment
jinja2.environment.Template.render = lambda self, *a, **k: "PATCHED"  # would rewrite every prompt it could reach


def compute_score(*args, **kwargs):
    return {"score": 0.5, "patched": jinja2.environment.Template.render(None) == "PATCHED"}
'''


VIEWS_DIGEST = '''
import hashlib, json


def _without_ids(view):  # the ids are opaque, drawn per session (issue 45): the rest is as sent
    out = {k: v for k, v in view.items() if k not in ("traj_id", "group_id")}
    out["extra_info"] = {k: v for k, v in view["extra_info"].items() if k not in ("traj_id", "group_id")}
    return out


def diagnose(views):
    text = json.dumps([_without_ids(v) for v in views], sort_keys=True, ensure_ascii=False)
    return [{"name": f"digest-of-{len(views)}", "rate": 0.5, "message": hashlib.sha256(text.encode()).hexdigest(),
             "example_ids": [v["traj_id"] for v in views[:3]]}]
'''

SCRIBBLER = '''
def diagnose(views):
    for view in views:
        view["response"] = "scribbled"
        view["extra_info"]["task_id"] = None
    views.reverse()
    return []
'''


def test_diagnostics_see_the_views_sent_each_its_own_copy(docker_sandbox, tmp_path, views):
    """A diagnose call's views travel as the host marshalled them: every diagnostic sees them whole, in order,
    with non-ASCII text and nested dicts as sent, and what one diagnostic changes the next never sees."""
    import hashlib

    sent = [v | {"reward": float(i % 2), "keep": i % 3 != 0} for i, v in enumerate(views[:12])]
    sent[5] = sent[5] | {"response": "Answer: 7 \u2014 d\u00e9j\u00e0 vu \U0001F600",
                         "extra_info": dict(sent[5]["extra_info"], deep={"a": [1, 2.5, None]})}
    harness = _harness(tmp_path / "digest", {"diagnostics/a_scribble.py": SCRIBBLER,
                                             "diagnostics/b_digest.py": VIEWS_DIGEST})
    for f in (harness / "diagnostics").glob("*.py"):
        if f.name not in ("a_scribble.py", "b_digest.py"):
            f.unlink()
    with HarnessSession(docker_sandbox, harness) as session:
        findings = session.diagnose(sent)
    bare = [{k: v for k, v in view.items() if k not in ("traj_id", "group_id")}
            | {"extra_info": {k: v for k, v in view["extra_info"].items() if k not in ("traj_id", "group_id")}}
            for view in sent]
    expected = hashlib.sha256(json.dumps(bare, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    # the examples the diagnostic named by the ids it saw come back as the rows' own
    assert [(f["name"], f["rate"], f["message"], f["example_ids"]) for f in findings] == \
        [("digest-of-12", 0.5, expected, [v["traj_id"] for v in sent[:3]])]


def test_a_diagnose_call_over_the_runtimes_frame_limit_is_refused_before_it_is_sent(docker_sandbox, views,
                                                                                     monkeypatch):
    """The runtime reads at most ``MAX_REQUEST_BYTES`` in one frame and ends on a larger one, which the host
    would read as the harness dying: the client refuses such a call first, as the caller's error."""
    import sandboxes.harness_runtime as runtime

    monkeypatch.setattr(runtime, "MAX_REQUEST_BYTES", 2000)  # this process's copy: the client's check
    session = HarnessSession(docker_sandbox, SEED)  # never started: nothing is sent
    with pytest.raises(ValueError, match=r"a diagnose call over 12 views is [\d,]+ bytes, over the harness "
                                         r"runtime's limit of 2,000 for one frame: diagnose a smaller sample"):
        session.diagnose([v | {"reward": 0.0, "keep": True} for v in views[:12]])


def test_prompts_of_one_request_match_one_by_one_and_no_harness_python_reaches_them(docker_sandbox, tmp_path,
                                                                                    views):
    """The render process takes a request's prompts in one message because it imports no harness Python: a
    reward.py whose import patches the template engine (and so could count the prompts) changes no prompt."""
    items = [{"question": f"{i}+{i}?", "task": {"a": i, "b": i}} for i in range(6)]
    patcher = _harness(tmp_path / "patcher", {"reward.py": (SEED / "reward.py").read_text() + RENDERER_PATCH})
    with HarnessSession(docker_sandbox, SEED) as session:
        together = session.render(items)
        one_by_one = [session.render([item])[0] for item in items]
    with HarnessSession(docker_sandbox, patcher) as session:
        patched = session.render(items)
        scored = session.score(views[:1], reward_range=RANGE)
    assert together == one_by_one == patched
    assert [m[-1]["content"].split("\n")[0] for m in together] == [f"{i}+{i}?" for i in range(6)]
    assert scored[0].reward_info["patched"] is True  # the patch ran, where the harness's Python runs


def test_prompts_over_many_render_requests_match_one_request(docker_sandbox, monkeypatch):
    """A long item list travels in requests of ``REQUEST_PROMPTS`` items (the runtime holds each whole): in
    order, every item answered once, as one request answers them."""
    import sandboxes.harness_client as client

    items = [{"question": f"{i}*2?", "task": {"a": i}} for i in range(5)]
    with HarnessSession(docker_sandbox, SEED) as session:
        whole = session.render(items)
        monkeypatch.setattr(client, "REQUEST_PROMPTS", 2)  # 5 items: requests of 2, 2 and 1
        sent, encode = [], session._encode
        monkeypatch.setattr(session, "_encode",
                            lambda make, i: sent.append(len(make(i)[0]["items"])) or encode(make, i))
        chunked = session.render(items)
    assert sent == [2, 2, 1]
    assert chunked == whole and [m[-1]["content"].split("\n")[0] for m in chunked] == [f"{i}*2?" for i in range(5)]


def test_a_reward_that_does_not_import_fails_render_with_its_reason(docker_sandbox, tmp_path):
    broken = _harness(tmp_path / "broken", {"reward.py": "raise RuntimeError('no reward today')\n"})
    with HarnessSession(docker_sandbox, broken) as session, \
            pytest.raises(HarnessFailed, match="cannot import reward.py: RuntimeError: no reward today"):
        session.render([{"question": "1+1?", "task": {}}])


# -- one behaviour whatever the caller


@pytest.fixture(scope="module")
def observer(tmp_path_factory) -> Path:
    return _harness(tmp_path_factory.mktemp("observer"), {"reward.py": OBSERVER, "filters.py": OBSERVER_FILTERS})


def _seen(session: HarnessSession, batches: list[list[dict]], *, one_request: bool) -> dict:
    if one_request:
        scored = session.score_batches(batches, reward_range=RANGE)
    else:
        scored = [s for batch in batches for s in session.score(batch, reward_range=RANGE)]
    lane = scored[0].reward_info["lane"]  # the score worker that scored the first group: its parts, in order
    seen = json.loads("".join(s.reward_info["part"] for s in scored if s.reward_info["lane"] == lane))
    lanes = list(dict.fromkeys(s.reward_info["lane"] for s in scored))
    return seen | {"calls_before_filter": scored[-1].reward_info["calls"], "lanes": len(lanes),
                   "lane_of_group": [lanes.index(s.reward_info["lane"]) for s in scored[::4]],
                   "lookahead": json.loads(scored[-1].reward_info["lookahead"])}


def test_harness_code_sees_the_same_whoever_calls_it(docker_sandbox, observer, views):
    """A reward that counts its batch, lists its folders and inspects its processes, called as a backtest
    calls it (every batch in one request, then the render, the backtest's limits) and as training calls it
    (a long-lived session, one step of 1, 3 or 2 groups per request, the training runtime's limits)."""
    backtest_limits = Limits(timeout_s=60, memory_mb=256, pids=32)
    training_limits = Limits(timeout_s=24 * 3600, memory_mb=1024, cpus=1.0, pids=64)
    with tempfile.TemporaryDirectory(prefix="backtest-") as tmp:
        exported = Path(tmp) / "harness"  # where the backtest exports a commit: must not show inside
        _harness(exported, {"reward.py": OBSERVER, "filters.py": OBSERVER_FILTERS})
        with HarnessSession(docker_sandbox, exported, limits=backtest_limits, request_timeout_s=30) as session:
            backtest = _seen(session, _batches(views, [32, 32, 32]), one_request=True)
            session.render([{"question": "1+1?", "task": {}}])  # a backtest renders its tasks once it has scored
    with HarnessSession(docker_sandbox, observer, limits=training_limits, request_timeout_s=300) as session:
        training = _seen(session, _batches(views, [4, 12, 8] * 4), one_request=False)

    # the raw mount table differs between any two containers (mount ids, layer and container ids): what
    # it says about the caller is in the next test; here, the same mount points and file systems
    assert backtest.pop("mountinfo") != training.pop("mountinfo")
    # each request is served by fresh processes (issue 45): the backtest's one request by one per lane, each
    # of training's 12 (1, 3 or 2 groups) by its own; the lanes still alternate over the session's groups
    per_request = ("lanes", "lane_of_group")
    assert [backtest.pop(k) for k in per_request] == [2, [0, 1] * 12]
    assert [training.pop(k) for k in per_request] == [20, [0, 1, 2, 1, 3, 4, 5, 6, 7, 6, 8, 9, 10, 11, 12, 11, 13,
                                                          14, 15, 16, 17, 16, 18, 19]]
    # what it saw was real: one group's worth of rewards before each filter, and only its own request's groups
    # (as its last group's rewards were computed: the lane's 11 groups before it, or none in training's last)
    assert backtest.pop("calls_before_filter") == [4, 0, 0, 0] * 11
    assert training.pop("calls_before_filter") == []
    for seen in (backtest, training):  # the byte sizes of the frames a process read: as many as its groups
        seen["lookahead"][0] = [s for s in seen["lookahead"][0] if not s.startswith("worker_main.frame=")]
    assert backtest == training
    # nothing queued behind its group, in its memory or its pipe: it is sent the next only once it answered
    sizes, pending = backtest["lookahead"]
    assert pending == 0 and "worker_main.unit=4" in sizes and not [s for s in sizes if s.endswith(("=32", "=96"))]
    assert [s for s in sizes if s.startswith("distinct=")] == ["distinct=4,4,4,4"]  # no object shared in a group
    assert "/tmp/rt/runtime.py" in backtest["parent"]
    # the process that reads requests is closed to harness code; there are no request files to list
    for key in ("parent_fds", "parent_stdin", "parent_mem"):
        assert backtest[key] == "PermissionError", (key, backtest[key])
    assert backtest["in"] == backtest["out"] == "FileNotFoundError"
    assert backtest["rt"] == ["harness", "harness_rt", "runtime.py"]  # the runtime's package and its launcher


def test_the_mount_table_names_no_host_path(docker_sandbox, observer, views):
    with HarnessSession(docker_sandbox, observer) as session:
        seen = _seen(session, [views[:4]], one_request=True)
    roots = {line.split()[3] for line in seen["mountinfo"].splitlines()}
    host_paths = [str(observer), str(Path.cwd()), tempfile.gettempdir(), str(Path.home()), "/work"]
    assert not [r for r in roots for h in host_paths if r.startswith(h) and r != "/"], roots
    # only the engine's own: its cgroup names and the container's hosts/hostname/resolv.conf files
    engine = [r for r in roots if r != "/" and not r.startswith("/docker/")
              and not r.startswith(("/bus", "/fs", "/irq", "/sys", "/null"))]
    assert sorted(r.rsplit("/", 1)[0].startswith("/var/lib/docker/containers/") and r.rsplit("/", 1)[1]
                  for r in engine) == ["hostname", "hosts", "resolv.conf"], engine


# -- timeouts that scale with the request


def test_a_hung_harness_fails_at_its_call_deadline_not_a_flat_one(docker_sandbox, tmp_path, views):
    hung = _harness(tmp_path / "hung", {"reward.py": "def compute_score(*a, **k):\n    while True:\n        pass\n"})
    session = HarnessSession(docker_sandbox, hung, request_timeout_s=300)
    assert session.request_deadline_s(32) == pytest.approx(REQUEST_S_BASE + 32 * REQUEST_S_PER_ITEM)
    assert session.request_deadline_s(10**7) == 300
    with session, pytest.raises(HarnessFailed, match=r"timed out: the harness's score call did not return "
                                                     r"within 10s \(hung\)"):
        session.score(views[:4], reward_range=RANGE)


# -- hostile answers on the wire

HOSTILE_RUNTIMES = {
    # kind: (what runtime.py does after the harness arrived, what the failure says)
    "nan": ('out(b\'{"reward": [NaN], "info": [{}], "keep": [true], "error": [null]}\')', "not valid JSON"),
    "huge-header": ('os.write(1, b"99999999999\\n")', "over the limit"),
    "not-a-header": ('os.write(1, b"hello world\\n{}")', "not a length"),
    "endless-header": ('os.write(1, b"7" * 100)', "no line end"),
    "dies-mid-answer": ('os.write(1, b"1000\\n{\\"reward\\": [1.0"); os._exit(0)', "died"),
    "silent": ("time.sleep(3600)", "timed out after 2s"),
    "short-list": ('out(b\'{"reward": [], "info": [], "keep": [], "error": []}\')', "should list 1 items"),
    "bad-keep": ('out(b\'{"reward": [1.0], "info": [{}], "keep": ["yes"], "error": [null]}\')', "keep of"),
    "not-utf8": ('out(b\'{"x": "\\xff"}\')', "not UTF-8"),
}

HOSTILE_TEMPLATE = '''
import os, sys, time
def out(data):
    os.write(1, b"%d\\n" % len(data) + data)
line = b""
while not line.endswith(b"\\n"):
    line += os.read(0, 1)
n, got = int(line), 0
while got < n:
    got += len(os.read(0, n - got))
{action}
time.sleep(3600)
'''


@pytest.mark.parametrize("kind", sorted(HOSTILE_RUNTIMES))
def test_hostile_answers_fail_the_session_not_the_host(docker_sandbox, tmp_path, views, kind):
    action, says = HOSTILE_RUNTIMES[kind]
    runtime = tmp_path / "runtime.py"
    runtime.write_text(HOSTILE_TEMPLATE.replace("{action}", action))
    session = HarnessSession(docker_sandbox, SEED, request_timeout_s=2, runtime_file=runtime)
    with session, pytest.raises(HarnessFailed) as failed:
        session.score(views[:1], reward_range=RANGE)
    assert says in str(failed.value), str(failed.value)
    with pytest.raises(HarnessFailed, match="not started"):  # the failed session is closed, not half-open
        session.score(views[:1], reward_range=RANGE)


SECOND_REQUEST_DIES = HOSTILE_TEMPLATE.replace("{action}", '''out(b'{"reward": [1.0], "info": [{}], \
"keep": [true], "error": [null]}')
line = b""
while not line.endswith(b"\\n"):
    line += os.read(0, 1)
os.read(0, 100)
os.write(1, b"1000\\n{"); os._exit(0)''')


def test_a_runtime_that_dies_on_a_later_request_fails_the_session(docker_sandbox, tmp_path, views, monkeypatch):
    """The first answer is good, the second request's runtime dies mid-answer: the session fails and closes."""
    import sandboxes.harness_client as client

    monkeypatch.setattr(client, "REQUEST_VIEWS", 1)
    runtime = tmp_path / "runtime.py"
    runtime.write_text(SECOND_REQUEST_DIES)
    session = HarnessSession(docker_sandbox, SEED, request_timeout_s=5, runtime_file=runtime)
    with session, pytest.raises(HarnessFailed, match="died during score"):
        session.score_batches([views[:1], views[1:2], views[2:3]], reward_range=RANGE)
    with pytest.raises(HarnessFailed, match="not started"):
        session.score(views[:1], reward_range=RANGE)


def test_a_bad_answer_with_the_next_request_in_flight_closes_the_session(docker_sandbox, tmp_path, views,
                                                                         monkeypatch):
    """The host sends request 2 before it checks answer 1.  Answer 1 is malformed: the session closes, so no
    later request can read answer 2 as its own (it would otherwise wait on a runtime that went quiet)."""
    import sandboxes.harness_client as client

    monkeypatch.setattr(client, "REQUEST_VIEWS", 1)
    runtime = tmp_path / "runtime.py"
    runtime.write_text(HOSTILE_TEMPLATE.replace("{action}", HOSTILE_RUNTIMES["bad-keep"][0]))
    session = HarnessSession(docker_sandbox, SEED, request_timeout_s=5, runtime_file=runtime)
    with session:
        with pytest.raises(HarnessFailed, match="keep of"):
            session.score_batches([views[:1], views[1:2]], reward_range=RANGE)
        with pytest.raises(HarnessFailed, match="not started"):
            session.score(views[:1], reward_range=RANGE)


def test_the_answer_size_cap_holds_on_the_wire(docker_sandbox, tmp_path, views, monkeypatch):
    import sandboxes.harness_client as client

    monkeypatch.setattr(client, "MAX_ANSWER_BYTES", 1000)
    runtime = tmp_path / "runtime.py"
    runtime.write_text(HOSTILE_TEMPLATE.replace("{action}", 'out(b"[" + b"1," * 5000 + b"1]")'))
    with HarnessSession(docker_sandbox, SEED, runtime_file=runtime) as session, \
            pytest.raises(HarnessFailed, match="10003 bytes, over the limit of 1000"):
        session.score(views[:1], reward_range=RANGE)


def test_a_harness_that_kills_the_reader_fails_the_session(docker_sandbox, tmp_path, views):
    killer = _harness(tmp_path / "killer", {"reward.py": (
        "import os, signal\n"
        "def compute_score(*a, **k):\n"
        "    os.kill(os.getppid(), signal.SIGINT)  # pid 1 ignores SIGKILL from inside; Python's SIGINT kills it\n"
        "    return 1.0\n")})
    # its parent is the score lane's snapshot now (a fresh process per request, issue 45): the snapshot dies,
    # and the session fails as the harness's
    with HarnessSession(docker_sandbox, killer) as session, \
            pytest.raises(HarnessFailed, match="the harness's score process died"):
        session.score(views[:4], reward_range=RANGE)


def test_a_harness_cannot_interrupt_the_reader(docker_sandbox, tmp_path, views):
    # the reader is the container's init: a signal it has no handler for is ignored from inside its namespace,
    # and Python's SIGINT handler would otherwise end it with KeyboardInterrupt (a race CI met once the snapshot
    # died: the request process, reparented to pid 1, signalled the reader through os.getppid())
    interrupter = _harness(tmp_path / "interrupter", {"reward.py": (
        "import os, signal\n"
        "def compute_score(*a, **k):\n"
        "    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):\n"
        "        os.kill(1, sig)\n"
        "    return 1.0\n")})
    with HarnessSession(docker_sandbox, interrupter) as session:
        for _ in range(2):
            rewards = [r.reward for r in session.score(views[:4], reward_range=RANGE)]
            assert rewards == [1.0] * 4


def test_host_environment_stays_out(docker_sandbox, observer, views, monkeypatch):
    monkeypatch.setenv("PROTOCOL_TEST_SECRET", "s3cr3t")
    with HarnessSession(docker_sandbox, observer) as session:
        seen = _seen(session, [views[:4]], one_request=True)
    assert "PROTOCOL_TEST_SECRET" not in seen["environ"] and os.environ["PROTOCOL_TEST_SECRET"] == "s3cr3t"


def test_score_requests_stay_under_the_runtimes_frame_limit(docker_sandbox, views, monkeypatch):
    """The runtime ends on a frame over ``MAX_REQUEST_BYTES``, which the host would read as the harness dying
    (long SWE responses: 16,384 views of 64 KB are a GiB).  Batches travel in requests that stay under it, scored
    as one request scores them; a single generation batch over it is the caller's error, refused before it is
    sent."""
    import sandboxes.harness_runtime as runtime

    batches = [views[k:k + 4] for k in range(0, 12, 4)]
    with HarnessSession(docker_sandbox, SEED) as session:
        whole = session.score_batches(batches, reward_range=RANGE)
        one = len(views_frame([v for b in batches for v in b], session._ids))
        monkeypatch.setattr(runtime, "MAX_REQUEST_BYTES", one * 2 // 3)  # this process's copy: the client's
        apart = session.score_batches(batches, reward_range=RANGE)
        assert [(s.reward, s.keep) for s in apart] == [(s.reward, s.keep) for s in whole]
        assert len(apart) == 12
        monkeypatch.setattr(runtime, "MAX_REQUEST_BYTES", one // 6)
        with pytest.raises(ValueError, match=r"a generation batch of 4 views is [\d,]+ bytes, over the harness "
                                             r"runtime's limit of [\d,]+ for one frame: score smaller batches"):
            session.score_batches(batches, reward_range=RANGE)
