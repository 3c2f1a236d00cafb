"""The backtest report: JSON for programs, Markdown for people (DESIGN §4)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path


from meta_agent.config import BacktestSettings, GateThresholds
from meta_agent.judge.gate import GateResult
from meta_agent.judge.request import GateVerdict
from meta_agent.review.records import UNDEFINED_WHY
from meta_agent.templates import harness_name, harness_quote


def _key_figures(result: GateResult) -> str:
    m = result.metrics
    parts = []
    for name in ("reward_auc", "hack_rate", "failure_pay", "miss_rate", "signal_share", "kept_share"):
        if name in m:
            parts.append(f"{name} {_figure(m[name].main)}->{_figure(m[name].candidate)}")
    return ", ".join(parts) or "; ".join(result.reasons)


def build_report(iv, main_commit: str, cand_commit: str, verdict: GateVerdict, thresholds: GateThresholds,
                 settings: BacktestSettings) -> dict:
    """Everything needed to audit one gate decision, with no reference to live objects."""
    table, sample_key, runs, result = verdict.sample.table, verdict.sample.key, verdict.runs, verdict.result
    rows = table.select(["round", "task_id", "data_source", "group_id", "run_id"]).to_pylist()
    report = {
        "intervention": {"branch": iv.branch, "head": iv.head, "subject": iv.subject, "hypothesis": iv.hypothesis,
                         "predicted_effects": iv.predicted_effects, "skill": iv.skill},
        "main_commit": main_commit,
        "candidate_commit": cand_commit,
        "sample": {
            "id": sample_key,
            "trajectories": table.num_rows,
            "groups": len({(r["run_id"], r["round"], r["group_id"]) for r in rows}),
            "rounds": dict(sorted(Counter(str(r["round"]) for r in rows).items())),
            "data_sources": dict(sorted(Counter(r["data_source"] for r in rows).items())),
            "definition": f"whole GRPO groups (from {settings.sample_groups}, up to {settings.max_sample_groups} while "
                          f"undecided), stratified by round and task, seed "
                          f"{settings.seed}; rows with a verifier outcome, held-out split excluded",
        },
        "runs": {arm: {"commit": r.commit, "failure": r.failure, "cached": r.cached, "sandbox": r.sandbox,
                       "errors": sum(1 for x in r.results.values() if x["error"]),
                       "findings": r.findings} for arm, r in runs.items()},
        "gate": result.to_dict(),
        "thresholds": thresholds.model_dump(),
        "decision": result.decision,
        "reasons": result.reasons,
        "key_figures": _key_figures(result),
    }
    if verdict.cost is not None:
        report["cost"] = verdict.cost
    if verdict.probe is not None:
        report["probe"] = verdict.probe.to_dict()
    return report


def _defined(*values: object) -> bool:
    return all(isinstance(v, (int, float)) and v == v for v in values)


def _figure(value: object, form: str = "{:.3f}") -> str:
    """A figure, or ``undefined`` where it is NaN (nothing in the sample to measure it on), never ``nan``."""
    return form.format(value) if _defined(value) else "undefined"


def render_markdown(report: dict) -> str:
    iv, gate = report["intervention"], report["gate"]
    lines = [
        f"# Backtest: `{iv['branch']}` — **{report['decision'].upper()}**",
        "",
        f"*{iv['subject']}*",
        "",
        f"- Hypothesis: {iv['hypothesis'] or '(none given)'}",
        f"- Predicted effects: {'; '.join(iv['predicted_effects']) or '(none)'}",
        f"- main `{report['main_commit'][:10]}` vs candidate `{report['candidate_commit'][:10]}` "
        f"(branch tip `{iv['head'][:10]}` merged onto main)",
        f"- Sample `{report['sample']['id']}`: {report['sample']['trajectories']} trajectories in "
        f"{report['sample']['groups']} groups ({report['sample']['definition']})",
        "",
    ]
    if report["reasons"]:
        lines += ["## Why rejected", ""] + [f"- {r}" for r in report["reasons"]] + [""]
    if gate["metrics"]:
        conf = int(report["thresholds"]["confidence"] * 100)
        lines += ["## Metrics", "", f"| metric | main | candidate | delta | {conf}% CI (paired over groups) |",
                  "|---|---:|---:|---:|---|"]
        for m in gate["metrics"].values():
            lines.append(f"| {m['name']} | {_figure(m['main'])} | {_figure(m['candidate'])} | "
                         f"{_figure(m['delta'], '{:+.3f}')} | " + (
                             f"[{m['ci_low']:+.3f}, {m['ci_high']:+.3f}] |" if _defined(m['ci_low'], m['ci_high'])
                             else f"undefined: {UNDEFINED_WHY.get(m['name'], 'no data for it in the sample')} |"))
        lines.append("")
    if gate["effects"]:
        lines += ["## Predicted effects", ""] + [f"- {e['text']} — **{e['status']}**" for e in gate["effects"]] + [""]
    lines += ["## Gate checks", ""] + [f"- [{'x' if c['passed'] else ' '}] {c['name']}: {c['detail']}"
                                       for c in gate["checks"]] + [""]
    for arm, run in report["runs"].items():
        box = run["sandbox"]
        lines.append(f"- {arm}: {'FAILED: ' + run['failure'] if run['failure'] else 'ok'}; "
                     f"{run['errors']} trajectory errors; container {box.get('duration_s', '?')} s"
                     f"{', cached' if run['cached'] else ''}; {len(run['findings'])} findings")
        for f in run["findings"][:10]:
            lines.append(f"  - [{f.get('severity')}] {harness_name(f.get('name'))} rate {float(f.get('rate', 0)):.2f}: "
                         f"{harness_quote(f.get('message', ''))} ({f.get('source', '')})")
    return "\n".join(lines) + "\n"


def write_report(report: dict, folder: Path) -> tuple[Path, Path]:
    """Write report.json and report.md atomically; returns both paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "report.json", folder / "report.md")
    for path, text in zip(paths, (json.dumps(report, indent=2), render_markdown(report))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return paths
