"""The one harness runtime: runs *inside* the sandbox and does everything harness code does.

Standard library plus Jinja2's sandboxed environment (the image also offers pyyaml
and math-verify to harness code).  The backtest, the local backend and verl's
reward entry all drive this same file through ``sandboxes.harness_client``, with
the same trajectory view and the same filter order, so the code that is judged is
the code that trains.  It decides nothing: it returns what harness code produced,
and the host validates every byte of it.

    python3 /in/runtime.py /in/harness /in/requests /out

serves requests ``/in/requests/<n>.json`` (written by the host, read-only here)
in order ``n = 0, 1, ...`` and answers each in ``/out/<n>.json`` (written to a
temporary name, then renamed).  Operations:

- ``render``   ``{"items": [{"question", "task"}]}`` -> per item ``{"messages": [...]}`` or ``{"error"}``:
  ``prompts/system.j2`` (optional) and ``prompts/user.j2`` rendered with Jinja's
  ``ImmutableSandboxedEnvironment`` and ``StrictUndefined``.
- ``score``    ``{"views": [...], "dynamic_sampling": bool, "mask_truncated": bool}`` -> per view
  ``{"traj_id", "reward", "reward_info", "keep", "error"}``, in this order:
  1. ``reward.compute_score(data_source, response, ground_truth, extra_info=...)`` for every view;
  2. ``filters.keep_trajectory(view)`` for every view (the view now carries ``reward``);
  3. ``filters.keep_group(members)`` for every group, in order of first appearance
     (members carry ``reward`` and ``keep``);
  4. with ``mask_truncated``, a truncated trajectory is dropped;
  5. with ``dynamic_sampling``, a group whose kept rewards are all equal is dropped.
  A trajectory whose reward or filter raised is never kept.
- ``diagnose`` ``{"views": [...]}`` (views carry ``reward`` and ``keep``) -> ``{"findings": [...]}``
  from every ``diagnostics/*.py``.
- ``stop``     ends the server.

A harness that fails to import answers every request with ``{"fatal": reason}``.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

RUNTIME_VERSION = 1
"""Bump when what this file does changes: backtest caches are keyed by it."""
MAX_ERROR_CHARS = 2000
MAX_INFO_CHARS = 4000
MAX_FINDINGS = 50
POLL_S = 0.002
IDLE_POLL_S = 0.02
"""Polling slows down after a second without requests: an idle session costs little CPU."""


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


class Harness:
    """The harness files of one commit, loaded once for the life of the server."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.reward = load_module(root / "reward.py", "harness_reward")
        if not callable(getattr(self.reward, "compute_score", None)):
            raise ImportError("reward.py must define compute_score(data_source, solution_str, ground_truth, ...)")
        filters = load_module(root / "filters.py", "harness_filters") if (root / "filters.py").is_file() else None
        self.keep_trajectory = getattr(filters, "keep_trajectory", None)
        self.keep_group = getattr(filters, "keep_group", None)
        self._templates: dict[str, object] | None = None

    # -- prompts

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

    def render(self, items: list[dict]) -> list[dict]:
        try:
            templates = self.templates()
        except Exception as exc:  # a template that does not parse fails every prompt
            return [{"error": f"parsing prompts: {short_error(exc)}"} for _ in items]
        out = []
        for item in items:
            variables = {"question": item["question"], "task": copy.deepcopy(item["task"])}
            try:
                messages = []
                if "system" in templates:
                    system = templates["system"].render(**variables).strip()
                    if system:
                        messages.append({"role": "system", "content": system})
                messages.append({"role": "user", "content": templates["user"].render(**variables).strip()})
                out.append({"messages": messages})
            except Exception as exc:
                out.append({"error": f"rendering prompts: {short_error(exc)}"})
        return out

    # -- rewards and filters

    def score(self, views: list[dict], dynamic_sampling: bool, mask_truncated: bool = False) -> list[dict]:
        results = []
        for view in views:
            row = {"traj_id": view["traj_id"], "reward": None, "reward_info": {}, "keep": True, "error": None}
            try:
                raw = self.reward.compute_score(view["data_source"], view["response"], copy.deepcopy(view["ground_truth"]),
                                                extra_info=copy.deepcopy(view["extra_info"]))
                row["reward"], row["reward_info"], row["error"] = normalise_score(raw)
            except Exception as exc:  # the harness's fault, recorded per trajectory
                row["error"] = f"reward: {short_error(exc)}"
            results.append(row)
        annotated = [dict(v, reward=r["reward"]) for v, r in zip(views, results)]
        if self.keep_trajectory is not None:
            for view, row in zip(annotated, results):
                row["keep"] = self._call("keep_trajectory", self.keep_trajectory, copy.deepcopy(view), row)
        groups: dict[str, list[int]] = {}
        for i, view in enumerate(annotated):
            groups.setdefault(view["group_id"], []).append(i)
        for members in groups.values():
            if self.keep_group is not None:
                members_view = [dict(copy.deepcopy(annotated[i]), keep=results[i]["keep"]) for i in members]
                try:
                    group_ok = bool(self.keep_group(members_view))
                except Exception as exc:
                    group_ok = False
                    for i in members:
                        results[i]["error"] = results[i]["error"] or f"keep_group: {short_error(exc)}"
                if not group_ok:
                    for i in members:
                        results[i]["keep"] = False
            if mask_truncated:
                for i in members:
                    results[i]["keep"] = results[i]["keep"] and not annotated[i].get("truncated")
            if dynamic_sampling:
                kept = {results[i]["reward"] for i in members if results[i]["keep"]}
                if len(kept) <= 1:
                    for i in members:
                        results[i]["keep"] = False
        for row in results:
            if row["error"] is not None:
                row["keep"] = False  # a trajectory the harness could not judge never trains
        return results

    @staticmethod
    def _call(name: str, fn, arg, row: dict) -> bool:
        try:
            return bool(fn(arg))
        except Exception as exc:
            row["error"] = row["error"] or f"{name}: {short_error(exc)}"
            return False

    # -- diagnostics

    def diagnose(self, views: list[dict]) -> list[dict]:
        findings: list[dict] = []
        folder = self.root / "diagnostics"
        for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
            try:
                module = load_module(path, f"diag_{path.stem}")
                for f in list(module.diagnose(copy.deepcopy(views)))[:MAX_FINDINGS]:
                    if not math.isfinite(float(f.get("rate", 0.0))):
                        raise ValueError(f"finding {f.get('name')!r} has a rate that is not finite")
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
    try:
        text = json.dumps(info, allow_nan=False)
    except (TypeError, ValueError):
        info = {k: repr(v)[:200] for k, v in info.items()}
        text = json.dumps(info)
    if len(text) > MAX_INFO_CHARS:
        return {"_truncated": text[:MAX_INFO_CHARS // 4]}
    return info


def handle(harness: Harness | None, fatal: str | None, request: dict) -> dict:
    op = request.get("op")
    if fatal is not None:
        return {"fatal": fatal}
    assert harness is not None
    if op == "render":
        return {"prompts": harness.render(request["items"])}
    if op == "score":
        return {"results": harness.score(request["views"], bool(request.get("dynamic_sampling")),
                                         bool(request.get("mask_truncated")))}
    if op == "diagnose":
        return {"findings": harness.diagnose(request["views"])}
    return {"fatal": f"unknown operation {op!r}"}


def write_answer(out: Path, n: int, answer: dict) -> None:
    tmp = out / f".{n}.tmp"
    tmp.write_text(json.dumps(answer, allow_nan=False))
    tmp.rename(out / f"{n}.json")


def serve(root: Path, requests: Path, out: Path) -> int:
    # Harness code printing to stdout must not mix with anything: it all goes to stderr (the logs).
    sys.stdout = sys.stderr
    harness, fatal = None, None
    try:
        harness = Harness(root)
    except Exception as exc:
        fatal = short_error(exc)
    n, last = 0, time.monotonic()
    while True:
        path = requests / f"{n}.json"
        if not path.exists():
            time.sleep(POLL_S if time.monotonic() - last < 1.0 else IDLE_POLL_S)
            continue
        last = time.monotonic()
        request = json.loads(path.read_text())
        if request.get("op") == "stop":
            return 0
        try:
            answer = handle(harness, fatal, request)
            write_answer(out, n, answer)
        except Exception as exc:  # e.g. an answer that is not JSON: the whole request failed
            write_answer(out, n, {"fatal": f"{request.get('op')}: {short_error(exc)}",
                                  "traceback": traceback.format_exc()[-4000:]})
        n += 1


if __name__ == "__main__":
    if len(sys.argv) != 4:
        raise SystemExit("usage: runtime.py HARNESS_DIR REQUESTS_DIR OUT_DIR")
    os.umask(0o022)
    sys.exit(serve(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
