"""Harness code of one commit, loaded in a worker: prompts (templates only), reward and filters, diagnostics;
and the checks on what a reward returns."""

from __future__ import annotations

import contextlib
import copy
import gc
import importlib.util
import itertools
import json
import marshal
import math
import os
import traceback
from pathlib import Path

from .frames import FrameReader, recv_frame, send_frame
from .limits import MAX_ERROR_CHARS, MAX_FINDINGS, MAX_INFO_CHARS, MAX_WORKER_BYTES


def short_error(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[:MAX_ERROR_CHARS]


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path.name}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ImportError(f"cannot import {path.name}: {short_error(exc)}") from exc
    return module


_SCALARS = (str, int, float, bool, type(None))


def _flat(value) -> bool:
    """A dict of scalars (most ground truths, extra_info, reward info): copied and checked the quick way."""
    return type(value) is dict and all(type(v) in _SCALARS for v in value.values())


@contextlib.contextmanager
def bulk():
    """Plain data built in bulk (a unit read from the pipe, a diagnostic's copy of the views) without the cyclic
    collector: it holds no cycles, and each collection would walk every view built so far again (at 250,000
    views, most of the time these steps took).  Never around harness code: its cycles still get collected."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _copy(value):
    """An independent copy of plain data (what one call changes, the next does not see); marshal is C-fast."""
    if _flat(value):
        return dict(value)
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:
        return copy.deepcopy(value)


# -- the harness, in a worker process


class Prompts:
    """The prompt templates of one commit, rendered in Jinja's sandbox; no harness Python is imported here.

    Templates see only the variables they are given, so the render worker may take a whole request's
    prompts in one message: nothing in that process can count them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._templates: dict[str, object] | None = None

    def templates(self) -> dict[str, object]:
        if self._templates is None:
            from jinja2 import StrictUndefined
            from jinja2.sandbox import ImmutableSandboxedEnvironment

            env = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
            found = {}
            for name in ("system", "user"):
                path = self.root / "prompts" / f"{name}.j2"
                if path.is_file():
                    found[name] = env.from_string(path.read_text())
            if "user" not in found:
                found["user"] = env.from_string("{{ question }}")
            self._templates = found
        return self._templates

    def render_one(self, item: dict) -> dict:
        try:
            templates = self.templates()
        except Exception as exc:  # a template that does not parse fails every prompt
            return {"error": f"parsing prompts: {short_error(exc)}"}
        variables = {"question": item["question"], "task": _copy(item["task"])}
        try:
            messages = []
            if "system" in templates:
                system = templates["system"].render(**variables).strip()
                if system:
                    messages.append({"role": "system", "content": system})
            messages.append({"role": "user", "content": templates["user"].render(**variables).strip()})
            return {"messages": messages}
        except Exception as exc:
            return {"error": f"rendering prompts: {short_error(exc)}"}


class Harness:
    """The harness's Python (reward, filters, diagnostics) of one commit, loaded once for the life of a worker."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reward = load_module(root / "reward.py", "harness_reward")
        if not callable(getattr(self.reward, "compute_score", None)):
            raise ImportError("reward.py must define compute_score(data_source, solution_str, ground_truth, ...)")
        filters = load_module(root / "filters.py", "harness_filters") if (root / "filters.py").is_file() else None
        self.keep_trajectory = getattr(filters, "keep_trajectory", None)
        self.keep_group = getattr(filters, "keep_group", None)

    # -- rewards and filters, one group at a time

    def score_group(self, views: list[dict]) -> list[tuple]:
        """Per member ``(reward, info, keep, error)``: compute_score, keep_trajectory, keep_group."""
        rows = []
        for view in views:
            try:
                raw = self.reward.compute_score(view["data_source"], view["response"], _copy(view["ground_truth"]),
                                                extra_info=_copy(view["extra_info"]))
                reward, info, error = normalise_score(raw)
            except Exception as exc:  # the harness's fault, recorded per trajectory
                reward, info, error = None, {}, f"reward: {short_error(exc)}"
            rows.append([reward, info, True, error])
        annotated = [dict(v, reward=r[0]) for v, r in zip(views, rows)]
        if self.keep_trajectory is not None:
            for view, row in zip(annotated, rows):
                try:  # the annotated views are this group's own (decoded for it): no copy needed
                    row[2] = bool(self.keep_trajectory(view))
                except Exception as exc:
                    row[2] = False
                    row[3] = row[3] or f"keep_trajectory: {short_error(exc)}"
        if self.keep_group is not None:
            members = [dict(v, keep=r[2]) for v, r in zip(annotated, rows)]
            try:
                group_ok = bool(self.keep_group(members))
            except Exception as exc:
                group_ok = False
                for row in rows:
                    row[3] = row[3] or f"keep_group: {short_error(exc)}"
            if not group_ok:
                for row in rows:
                    row[2] = False
        return [tuple(r) for r in rows]


class Diagnostics:
    """The harness's ``diagnostics/*.py`` of one commit; nothing else of the harness is imported here.

    The host sends a diagnose session only ``diagnostics/`` and a ``harness.yaml`` it wrote from the
    validated knobs (``meta_agent.judge.diagnose_sessions.export_diagnostics``), so a finding depends on the
    diagnostics' code, those knobs and the call's views alone."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def diagnose(self, views: list[dict]) -> list[dict]:
        return self.diagnose_frame(marshal.dumps(views))

    def diagnose_frame(self, frame: bytes) -> list[dict]:
        """Findings of every diagnostic over the views marshalled in ``frame``, all in this process; each diagnostic
        gets its own copy, loaded from the frame, so what one changes in the views the next never sees."""
        def load() -> list[dict]:
            with bulk():
                return marshal.loads(frame)

        return [f for path in self.paths() for f in self.run_one(path, load)]

    def diagnose_forked(self, chunks: list[bytes]) -> list[dict]:
        """The diagnose worker's way to ``diagnose_frame``: the views, marshalled in ``chunks`` (one list of views
        each, in order), loaded once, here, and each diagnostic run in a
        child forked from this process (one at a time), which answers its findings over a pipe and ends.

        A child's copy of the views, of every module and of ``builtins`` is its own (copy-on-write): what one
        diagnostic changes or leaves behind, the next never sees, and the frame is loaded once instead of once per
        diagnostic (three loads of 440 MB at 1M views with the seed's three).  The views are frozen out of the
        cyclic collector first (``gc.freeze``): a child's collections would walk, and so copy, every page of them;
        harness code still runs with the collector on.  A child that ends without answering (``sys.exit``,
        ``os._exit``, a signal) ends this process too, so the call fails as the harness dying, as it did when
        the diagnostics ran in this process."""
        paths = self.paths()
        if not paths:
            return []
        views: list[dict] = []
        with bulk():
            for chunk in chunks:
                views += views_of(marshal.loads(chunk))
        gc.freeze()
        findings: list[dict] = []
        for path in paths:
            findings += _in_child(lambda: self.run_one(path, lambda: views))
        return findings

    def paths(self) -> list[Path]:
        folder = self.root / "diagnostics"
        return sorted(folder.glob("*.py")) if folder.is_dir() else []

    def run_one(self, path: Path, load) -> list[dict]:
        """One diagnostic's findings over the views ``load()`` returns (its own copy), or its crash as a finding."""
        findings: list[dict] = []
        try:
            module = load_module(path, f"diag_{path.stem}")
            views = load()
            for f in list(module.diagnose(views))[:MAX_FINDINGS]:
                findings.append({
                    "name": str(f.get("name", path.stem))[:200],
                    "severity": str(f.get("severity", "info")),
                    "rate": float(f.get("rate", 0.0)),
                    "example_ids": [str(x)[:200] for x in list(f.get("example_ids", []))[:10]],
                    "message": str(f.get("message", ""))[:500],
                    "diagnostic": path.name,
                })
        except Exception as exc:
            findings.append({"name": f"{path.stem}:crashed", "severity": "error", "rate": 1.0, "example_ids": [],
                             "message": short_error(exc), "diagnostic": path.name})
        return findings


def views_of(chunk) -> list[dict]:
    """A diagnose chunk's views: as marshalled (a list of dicts), or built from the columns
    ``harness_wire.column_frame`` sent (``keys``, ``columns`` in that order, and the keys of each ``nested`` column,
    whose dicts are built first), each value the object the frame holds.  Trusted code, before any harness code
    runs in the process; what it builds is what the dicts' frame held."""
    if type(chunk) is list:
        return chunk
    keys, columns = chunk["keys"], chunk["columns"]
    for name, subkeys in chunk["nested"].items():
        at = keys.index(name)
        columns[at] = list(map(dict, map(zip, itertools.repeat(subkeys), zip(*columns[at]))))
    return list(map(dict, map(zip, itertools.repeat(keys), zip(*columns))))


def _in_child(run) -> list:
    """``run()`` in a child forked from this process, its result (plain data) back over a pipe.  A child that ends
    without a well-formed answer ends this process (``SystemExit``): the reader reports the harness dead."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(rfd)
            send_frame(wfd, marshal.dumps(run()))
        finally:
            os._exit(0)
    os.close(wfd)
    try:
        answer = recv_frame(FrameReader(rfd), MAX_WORKER_BYTES)
    except (ValueError, EOFError, TypeError):
        answer = None
    finally:
        os.close(rfd)
        os.waitpid(pid, 0)
    if type(answer) is not list:
        raise SystemExit("a diagnostic ended its process without answering")
    return answer


def normalise_score(value) -> tuple[float | None, dict, str | None]:
    """verl's contract: a number, or a dict with a number under ``"score"`` (kept whole as the info)."""
    info: dict = {}
    if isinstance(value, dict):
        info = {str(k): v for k, v in value.items()}
        value = value.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, jsonable(info), f"reward is not a number: {type(value).__name__}"
    value = float(value)
    if not math.isfinite(value):
        return None, jsonable(info), f"reward is not finite: {value}"
    return value, jsonable(info), None


def jsonable(info: dict) -> dict:
    """``info`` as plain, bounded JSON (values that are not become their repr)."""
    if len(info) <= 16 and all(type(v) in (int, bool, type(None)) or (type(v) is str and len(v) <= 200)
                               or (type(v) is float and math.isfinite(v)) for v in info.values()):
        return info  # already plain and well under MAX_INFO_CHARS: the common case, without a JSON round trip
    try:
        text = json.dumps(info, allow_nan=False)
    except (TypeError, ValueError):
        info = {k: repr(v)[:200] for k, v in info.items()}
        text = json.dumps(info)
    if len(text) > MAX_INFO_CHARS:
        return {"_truncated": text[:MAX_INFO_CHARS // 4]}
    return json.loads(text)  # plain types only, whatever subclasses the harness returned
