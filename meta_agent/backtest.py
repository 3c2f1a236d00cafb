"""Backtest a harness branch against ``main`` over archived trajectories.

Each harness commit runs in its own sandbox container (``sandboxes/backtest_runner.py``);
outputs are cached by (commit, sample).  Main's diagnostics also run, in a separate
container, over the candidate's outputs: deleting or rewriting a diagnostic on the
branch cannot make it disappear from the gate (the ratchet of DESIGN §3).  The
decision comes from ``gate.decide`` on the host.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from harness_repo.contract import HIDDEN_FROM_HARNESS
from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent import gate
from meta_agent.config import BacktestSettings, GateThresholds
from rl_backend.archive import Archive, sample_id
from rl_backend.schema import JSON_COLUMNS
from sandboxes import backtest_runner
from sandboxes.base import Limits, Mount, Sandbox

RUNNER = Path(backtest_runner.__file__)
VIEW_FIELDS = ("traj_id", "group_id", "sample_idx", "task_id", "data_source", "prompt", "response",
               "ground_truth", "response_tokens", "truncated", "finish_reason")
Progress = Callable[[str], None]


@dataclass
class HarnessRun:
    """What one harness commit produced over one sample (never a judgement)."""

    commit: str
    results: dict[str, dict]
    findings: list[dict]
    failure: str | None
    sandbox: dict = field(default_factory=dict)
    cached: bool = False


def trajectory_views(rows: list[dict]) -> list[dict]:
    """What harness code may see of each archived row: no verifier outcome, ever."""
    views = []
    for row in rows:
        view = {k: row.get(k) for k in VIEW_FIELDS}
        for key in JSON_COLUMNS:
            if key in view and isinstance(view[key], str):
                view[key] = json.loads(view[key])
        view["group_id"] = f"{row['run_id']}/{row['round']}/{row['group_id']}"
        assert not set(HIDDEN_FROM_HARNESS) & set(view)
        views.append(view)
    return views


def _limits(settings: BacktestSettings) -> Limits:
    return Limits(timeout_s=settings.timeout_s, memory_mb=settings.memory_mb, cpus=settings.cpus, pids=settings.pids)


def _parse_results(out: Path, expected: list[str]) -> tuple[dict[str, dict], str | None]:
    """Read the runner's results defensively: the harness shares the runner's process."""
    path = out / "results.jsonl"
    if not path.exists():
        return {}, "the harness produced no results file"
    results: dict[str, dict] = {}
    try:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            reward = row.get("reward")
            if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))
                                       or not np.isfinite(reward)):
                return {}, f"malformed reward in results: {reward!r}"
            results[str(row["traj_id"])] = {
                "reward": None if reward is None else float(reward),
                "keep": bool(row.get("keep", True)),
                "error": None if row.get("error") is None else str(row["error"])[:2000],
                "reward_info": row.get("reward_info") if isinstance(row.get("reward_info"), dict) else {},
            }
    except (ValueError, KeyError, TypeError) as exc:
        return {}, f"malformed results file: {exc}"
    missing = set(expected) - set(results)
    if missing or len(results) != len(expected):
        return {}, f"results cover {len(set(expected) & set(results))} of {len(expected)} trajectories"
    return results, None


def _read_findings(out: Path) -> list[dict]:
    try:
        findings = json.loads((out / "findings.json").read_text())
        return [f for f in findings if isinstance(f, dict)] if isinstance(findings, list) else []
    except (OSError, ValueError):
        return []


def _sandbox_summary(result) -> dict:
    return {"exit_code": result.exit_code, "duration_s": round(result.duration_s, 3), "timed_out": result.timed_out,
            "oom_killed": result.oom_killed, "peak_memory_mb": result.peak_memory_mb,
            "stderr_tail": result.stderr[-2000:]}


def run_harness(repo: HarnessRepo, commit: str, views: list[dict], sample_key: str, sandbox: Sandbox,
                cache_root: Path, settings: BacktestSettings) -> HarnessRun:
    """Apply the harness at ``commit`` to ``views`` in a fresh container; cached by (tree, sample)."""
    cache = cache_root / f"{repo.tree(commit)[:16]}-{sample_key}.json"
    if cache.exists():
        return HarnessRun(**json.loads(cache.read_text()) | {"cached": True})
    with tempfile.TemporaryDirectory(prefix="backtest-") as tmp:
        tmp_path = Path(tmp)
        harness = repo.export(commit, tmp_path / "harness")
        views_file = tmp_path / "views.jsonl"
        views_file.write_text("".join(json.dumps(v) + "\n" for v in views))
        out = tmp_path / "out"
        out.mkdir()
        out.chmod(0o777)
        result = sandbox.run(
            ["python3", "/in/runner.py", "harness"],
            mounts=[Mount(RUNNER, "/in/runner.py"), Mount(harness, "/in/harness"), Mount(views_file, "/in/views.jsonl")],
            output_dir=out, limits=_limits(settings),
        )
        failure = None
        results: dict[str, dict] = {}
        if not result.ok:
            status = _read_status(out)
            failure = status.get("error") or result.reason
        else:
            results, failure = _parse_results(out, [v["traj_id"] for v in views])
        run = HarnessRun(commit, results, _read_findings(out), failure, _sandbox_summary(result))
    _write_cache(cache, run)
    return run


def run_diagnostics(repo: HarnessRepo, commit: str, views: list[dict], sandbox: Sandbox,
                    settings: BacktestSettings, cache_file: Path | None = None) -> list[dict]:
    """The diagnostics of ``commit`` over ``views`` (which carry ``reward`` and ``keep``), in their own container."""
    if cache_file is not None and cache_file.exists():
        return json.loads(cache_file.read_text())
    with tempfile.TemporaryDirectory(prefix="diagnose-") as tmp:
        tmp_path = Path(tmp)
        diag = repo.export(commit, tmp_path / "harness") / "diagnostics"
        diag.mkdir(exist_ok=True)
        views_file = tmp_path / "views.jsonl"
        views_file.write_text("".join(json.dumps(v) + "\n" for v in views))
        out = tmp_path / "out"
        out.mkdir()
        out.chmod(0o777)
        result = sandbox.run(["python3", "/in/runner.py", "diagnose"],
                             mounts=[Mount(RUNNER, "/in/runner.py"), Mount(diag, "/in/diagnostics"),
                                     Mount(views_file, "/in/views.jsonl")],
                             output_dir=out, limits=_limits(settings))
        findings = _read_findings(out) if result.ok else [
            {"name": "diagnostics:failed", "severity": "error", "rate": 1.0, "example_ids": [],
             "message": _read_status(out).get("error") or result.reason, "source": "sandbox"}]
    if cache_file is not None:
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        cache_file.write_text(json.dumps(findings))
    return findings


def run_ratchet(repo: HarnessRepo, main_commit: str, candidate: HarnessRun, views: list[dict], sample_key: str,
                sandbox: Sandbox, cache_root: Path, settings: BacktestSettings) -> list[dict]:
    """Main's diagnostics over the candidate's rewards and masks: a deleted diagnostic still runs."""
    annotated = [v | {"reward": candidate.results[v["traj_id"]]["reward"],
                      "keep": candidate.results[v["traj_id"]]["keep"]} for v in views]
    cache = cache_root / f"ratchet-{repo.tree(main_commit)[:16]}-{repo.tree(candidate.commit)[:16]}-{sample_key}.json"
    findings = run_diagnostics(repo, main_commit, annotated, sandbox, settings, cache)
    return [f | {"source": "ratchet"} for f in findings]


def _read_status(out: Path) -> dict:
    try:
        status = json.loads((out / "status.json").read_text())
        return status if isinstance(status, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, run: HarnessRun) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    data = asdict(run)
    data.pop("cached")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _arm(run: HarnessRun, traj_ids: list[str]) -> gate.Arm:
    if run.failure:
        n = len(traj_ids)
        return gate.Arm(np.full(n, np.nan), np.ones(n, bool), np.ones(n, bool), failed=run.failure)
    rows = [run.results[t] for t in traj_ids]
    reward = np.array([np.nan if r["reward"] is None else r["reward"] for r in rows], float)
    return gate.Arm(reward, np.array([r["keep"] for r in rows], bool), np.array([r["error"] is not None for r in rows], bool))


def _error_names(findings: list[dict]) -> set[str]:
    return {str(f.get("name")) for f in findings if f.get("severity") == "error"}


def draw_sample(archive: Archive, settings: BacktestSettings, run_id: str | None = None) -> pa.Table:
    """Whole groups with a known verifier outcome; the held-out split is never shown to a harness."""
    table = archive.read(run_id=run_id)
    mask = pc.and_(pc.is_valid(table["verified"]), pc.not_equal(table["split"], "heldout"))
    table = table.filter(mask)
    if table.num_rows == 0:
        raise ValueError(f"the archive at {archive.root} has no trajectories with a verifier outcome to backtest on; "
                         "train a round first or import a dump (python -m rl_backend.verl_import)")
    return archive.sample_groups(table, n_groups=settings.sample_groups, seed=settings.seed,
                                 stratify=("round", "data_source"))


@dataclass
class BacktestOutcome:
    branch: str
    candidate_commit: str
    main_commit: str
    decision: str  # merge | reject
    reasons: list[str]
    report: dict
    report_json: Path
    report_md: Path
    merge_commit: str | None = None
    tag: str | None = None


def _reject_early(branch: str, reason: str) -> gate.GateResult:
    check = {"name": "contract", "passed": False, "detail": reason}
    return gate.GateResult("reject", [reason], [check], {})


def backtest_branch(repo: HarnessRepo, archive: Archive, branch: str, sandbox: Sandbox, out_dir: Path, *,
                    thresholds: GateThresholds = GateThresholds(), settings: BacktestSettings = BacktestSettings(),
                    run_id: str | None = None, apply: bool = True, progress: Progress = lambda s: None,
                    ) -> BacktestOutcome:
    """Replay ``branch`` and ``main`` over the same archive sample, judge, and (if ``apply``) merge or tag."""
    from meta_agent.backtest_report import build_report, write_report

    iv = repo.intervention(branch)
    main_commit = repo.head("main")
    try:  # judge what merging would produce, not the branch tip: main may have moved since it branched
        cand_commit, conflict = repo.merge_preview(branch), None
    except HarnessError as exc:
        cand_commit, conflict = repo.head(branch), str(exc)
    cache_root = out_dir / "cache"
    table = draw_sample(archive, settings, run_id=run_id)
    rows = table.to_pylist()
    sample_key = sample_id(table)
    traj_ids = [r["traj_id"] for r in rows]
    views = trajectory_views(rows)
    progress(f"sample {sample_key}: {len(rows)} trajectories in {len({v['group_id'] for v in views})} groups")

    runs: dict[str, HarnessRun] = {}
    violations = repo.contract_violations(branch)
    try:
        repo.config(cand_commit)  # validated on the host: knobs stay within trusted bounds
        config_error = None
    except (HarnessError, ValueError) as exc:
        config_error = str(exc)
    if conflict:
        result = _reject_early(branch, conflict)
    elif violations:
        result = _reject_early(branch, "changes outside the harness contract: " + ", ".join(violations))
    elif config_error:
        result = _reject_early(branch, f"invalid harness.yaml: {config_error}")
    else:
        progress(f"main {main_commit[:8]}: running in the sandbox")
        runs["main"] = run_harness(repo, main_commit, views, sample_key, sandbox, cache_root, settings)
        progress(f"candidate {cand_commit[:8]}: running in the sandbox")
        runs["candidate"] = run_harness(repo, cand_commit, views, sample_key, sandbox, cache_root, settings)
        ratchet: list[dict] = []
        if not runs["candidate"].failure:
            progress("main's diagnostics over the candidate's outputs (ratchet)")
            ratchet = run_ratchet(repo, main_commit, runs["candidate"], views, sample_key, sandbox, cache_root, settings)
            runs["candidate"].findings = runs["candidate"].findings + ratchet
        groups = {g: i for i, g in enumerate(dict.fromkeys(v["group_id"] for v in views))}
        sample = gate.Sample(np.array([groups[v["group_id"]] for v in views]),
                             np.array([r["verified"] >= 0.5 for r in rows], bool))
        new_errors = sorted(_error_names(runs["candidate"].findings) - _error_names(runs["main"].findings))
        result = gate.decide(_arm(runs["main"], traj_ids), _arm(runs["candidate"], traj_ids), sample,
                             iv.predicted_effects, thresholds, new_error_findings=new_errors, seed=settings.seed)

    report = build_report(iv, main_commit, cand_commit, table, sample_key, runs, result, thresholds, settings)
    json_path, md_path = write_report(report, out_dir / branch.replace("/", "_"))
    outcome = BacktestOutcome(branch, cand_commit, main_commit, result.decision, result.reasons, report,
                              json_path, md_path)
    if apply:
        apply_decision(repo, outcome)
    return outcome


def apply_decision(repo: HarnessRepo, outcome: BacktestOutcome) -> None:
    """Merge a passing branch with its evidence; tag and keep a failing one."""
    figures = outcome.report.get("key_figures", "")
    evidence = {"Backtest": f"{outcome.report_json} sample={outcome.report['sample']['id']}",
                "Candidate": outcome.report["intervention"]["head"]}
    if outcome.decision == "merge":
        try:
            outcome.merge_commit = repo.merge(
                outcome.branch, evidence | {"Verdict": f"merged; {figures}"},
                summary=f"Merge {outcome.branch}: {outcome.report['intervention']['subject']}")
            return
        except HarnessError as exc:
            outcome.decision = "reject"
            outcome.reasons = [f"passed the gate but does not merge cleanly into main: {exc}"]
            outcome.report["decision"] = "reject"
            outcome.report["reasons"] = outcome.reasons
            outcome.report_json.write_text(json.dumps(outcome.report, indent=2))
    verdict = "rejected: " + "; ".join(outcome.reasons)
    outcome.tag = repo.reject(outcome.branch, verdict[:1000], evidence | {"Verdict": f"rejected; {figures}"})
