"""Runs *inside* the sandbox container: apply one harness to archived trajectories.

Standard library only (the image adds pyyaml, jinja2 and math-verify for harness
code).  This file computes nothing that decides anything: it records what the
harness code returned, per trajectory, and the host-side gate judges it.

Two stages, one container each:

    python3 /in/runner.py harness    # /in/harness + /in/views.jsonl -> /out/results.jsonl, findings.json
    python3 /in/runner.py diagnose   # /in/diagnostics + /in/views.jsonl (with reward, keep) -> findings.json

``/out/status.json`` is written last; its absence means the run died.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
import traceback
from pathlib import Path

IN = Path("/in")
OUT = Path("/out")
MAX_ERROR_CHARS = 2000
MAX_FINDINGS = 50


def _load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        raise ImportError(f"cannot import {path.name}: {_short_error(exc)}") from exc
    return module


def _short_error(exc: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return text[:MAX_ERROR_CHARS]


def _read_views(path: Path) -> list[dict]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _normalise_score(value) -> tuple[float | None, dict, str | None]:
    """verl's contract: a float, or a dict with "score"."""
    info: dict = {}
    if isinstance(value, dict):
        info = {k: v for k, v in value.items() if k != "score"}
        value = value.get("score")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, info, f"reward is not a number: {type(value).__name__}"
    if not math.isfinite(float(value)):
        return None, info, f"reward is not finite: {value}"
    return float(value), info, None


def _jsonable(info: dict) -> dict:
    try:
        json.dumps(info)
        return info
    except (TypeError, ValueError):
        return {k: repr(v)[:200] for k, v in info.items()}


def compute_rewards(harness: Path, views: list[dict]) -> list[dict]:
    reward_mod = _load_module(harness / "reward.py", "harness_reward")
    results = []
    for view in views:
        extra = {k: view.get(k) for k in ("traj_id", "task_id", "prompt", "truncated", "response_tokens")}
        row = {"traj_id": view["traj_id"], "reward": None, "reward_info": {}, "keep": True, "error": None}
        try:
            raw = reward_mod.compute_score(view["data_source"], view["response"], view["ground_truth"], extra_info=extra)
            row["reward"], info, row["error"] = _normalise_score(raw)
            row["reward_info"] = _jsonable(info)
        except Exception as exc:  # the harness's fault, recorded per trajectory
            row["error"] = f"reward: {_short_error(exc)}"
        view["reward"] = row["reward"]
        results.append(row)
    return results


def apply_filters(harness: Path, views: list[dict], results: list[dict]) -> None:
    path = harness / "filters.py"
    if not path.exists():
        return
    filters = _load_module(path, "harness_filters")
    keep_traj = getattr(filters, "keep_trajectory", None)
    keep_group = getattr(filters, "keep_group", None)
    groups: dict[str, list[int]] = {}
    for i, view in enumerate(views):
        groups.setdefault(view["group_id"], []).append(i)
    for members in groups.values():
        group_ok = True
        if keep_group is not None:
            try:
                group_ok = bool(keep_group([views[i] for i in members]))
            except Exception as exc:
                for i in members:
                    results[i]["error"] = results[i]["error"] or f"keep_group: {_short_error(exc)}"
        for i in members:
            ok = group_ok
            if ok and keep_traj is not None:
                try:
                    ok = bool(keep_traj(views[i]))
                except Exception as exc:
                    results[i]["error"] = results[i]["error"] or f"keep_trajectory: {_short_error(exc)}"
            results[i]["keep"] = ok
            views[i]["keep"] = ok


def run_diagnostics(folder: Path, views: list[dict], source: str) -> list[dict]:
    findings: list[dict] = []
    if not folder.is_dir():
        return findings
    for path in sorted(folder.glob("*.py")):
        try:
            module = _load_module(path, f"diag_{path.stem}")
            out = module.diagnose([dict(v) for v in views])
            for f in list(out)[:MAX_FINDINGS]:
                finding = {
                    "name": str(f.get("name", path.stem)),
                    "severity": str(f.get("severity", "info")),
                    "rate": float(f.get("rate", 0.0)),
                    "example_ids": [str(x) for x in list(f.get("example_ids", []))[:10]],
                    "message": str(f.get("message", ""))[:500],
                }
                findings.append({**finding, "diagnostic": path.name, "source": source})
        except Exception as exc:
            findings.append(
                {"name": f"{path.stem}:crashed", "severity": "error", "rate": 1.0, "example_ids": [],
                 "message": _short_error(exc), "diagnostic": path.name, "source": source}
            )
    return findings


def _write_json(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    tmp.rename(path)


def main(stage: str) -> int:
    start = time.monotonic()
    views = _read_views(IN / "views.jsonl")
    status = {"ok": True, "stage": stage, "n": len(views), "error": None}
    try:
        if stage == "harness":
            results = compute_rewards(IN / "harness", views)
            apply_filters(IN / "harness", views, results)
            with (OUT / "results.jsonl").open("w") as f:
                for row in results:
                    f.write(json.dumps(row) + "\n")
            findings = run_diagnostics(IN / "harness" / "diagnostics", views, "candidate")
        elif stage == "diagnose":
            findings = run_diagnostics(IN / "diagnostics", views, "ratchet")
        else:
            raise SystemExit(f"unknown stage {stage!r}: expected 'harness' or 'diagnose'")
        _write_json(OUT / "findings.json", findings)
    except Exception as exc:  # import errors and the like: the whole harness fails
        status.update(ok=False, error=_short_error(exc), traceback=traceback.format_exc()[-4000:])
    status["duration_s"] = round(time.monotonic() - start, 3)
    _write_json(OUT / "status.json", status)
    return 0 if status["ok"] else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "harness"))
