"""``python -m meta_agent report``, its Markdown half: training curves across rounds, merges and reverts marked.

Writes ``<run>/report/curves.png`` and ``<run>/report/report.md`` (for terminals; the HTML site beside
them is :mod:`meta_agent.review.html_report`) from what the run
recorded (per-step metrics, digests, the harness repo's interventions).
"""

from __future__ import annotations

import json
from pathlib import Path

from harness_repo.repo import HarnessRepo
from meta_agent.live_check import live_lines
from meta_agent.review.learned import exam_rows, markdown_lines
from meta_agent.review.precision import checked_precision, describe
from meta_agent.run_dir import RunDir


def _rounds(rd: RunDir) -> list[int]:
    folder = rd.path / "rounds"
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


def _metrics(rd: RunDir, n: int) -> list[dict]:
    path = rd.round_dir(n) / "train" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def _digest(rd: RunDir, n: int) -> dict:
    path = rd.round_dir(n) / "digest.json"
    return json.loads(path.read_text()) if path.exists() else {}


def plot_curves(rd: RunDir, repo: HarnessRepo, dest: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    offset = 0
    boundaries = []
    heldout_x, heldout_y = [], []
    for n in _rounds(rd):
        steps = _metrics(rd, n)
        xs = [offset + i + 1 for i in range(len(steps))]
        ax.plot(xs, [s.get("reward", float("nan")) for s in steps], color="tab:blue",
                label="harness reward" if n == 0 else None)
        ax.plot(xs, [s.get("verified", float("nan")) for s in steps], color="tab:orange",
                label="verified accuracy (train)" if n == 0 else None)
        offset += max(len(steps), 1)
        boundaries.append((n, offset))
        acc = _digest(rd, n).get("heldout_accuracy")
        if isinstance(acc, (int, float)):
            heldout_x.append(offset)
            heldout_y.append(acc)
    ax.plot(heldout_x, heldout_y, "s--", color="tab:green", label="held-out accuracy (verifier)")
    ivs = repo.interventions()
    for n, x in boundaries:
        ax.axvline(x, color="grey", lw=0.5, ls=":")
        merged = [iv for iv in ivs if iv.round == n and iv.status in ("merged", "reverted")]
        for k, iv in enumerate(merged):
            ax.annotate(f"merge {iv.slug}", (x, 1.0 - 0.07 * k), fontsize=7, color="green", rotation=0,
                        xytext=(3, 0), textcoords="offset points")
            ax.plot([x], [1.0 - 0.07 * k], "^", color="green")
        for k, iv in enumerate(i for i in ivs if i.round == n - 1 and i.status == "reverted"):
            ax.plot([x], [0.05 + 0.07 * k], "v", color="red")
            ax.annotate(f"revert {iv.slug}", (x, 0.05 + 0.07 * k), fontsize=7, color="red",
                        xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel("optimizer step (all rounds)")
    ax.set_ylim(-0.05, 1.1)
    ax.set_title(f"run {rd.path.name}: training curves; ▲ merges after a round, ▼ reverts")
    ax.legend(loc="center left", fontsize=8)
    fig.tight_layout()
    dest.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(dest, dpi=110)
    plt.close(fig)
    return dest


def write_report(run_dir: Path, out: Path | None = None) -> Path:
    """curves.png and report.md, in ``out`` (``report --out``) or else the run's report folder; returns the
    curves' path."""
    rd = RunDir(run_dir.resolve()).require()  # the one message for a folder that holds no run
    repo = HarnessRepo.open(rd.harness)
    folder = out if out is not None else rd.path / "report"
    png = plot_curves(rd, repo, folder / "curves.png")
    digests = [d for d in (_digest(rd, n) for n in _rounds(rd)) if d]
    lines = [f"# Run {rd.path.name}", "", "## Did it learn?", "", *markdown_lines(exam_rows(digests)), "",
             "![training curves](curves.png)", "",
             "| round | reward | verified | held-out | zero-var groups | truncated | hack | miss |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n in _rounds(rd):
        d = _digest(rd, n)
        cells = [d.get(k) for k in ("reward_mean", "verified_mean", "heldout_accuracy", "zero_variance_share",
                                    "truncation_rate", "hack_rate", "miss_rate")]
        lines.append(f"| {n} | " + " | ".join(f"{c:.3f}" if isinstance(c, (int, float)) else "-" for c in cells) + " |")
    ivs = repo.interventions()
    from meta_agent.review.losses import loss_lines

    from meta_agent.review.losses import alarm_lines

    lost = loss_lines(rd.archive) + alarm_lines(digests)
    if lost:
        lines += ["", "## Archive losses", "", *[f"- {line}" for line in lost]]
    lines += ["", "## Interventions", "", describe(checked_precision(ivs, digests)), ""]
    for iv in ivs:
        lines.append(f"- **{iv.branch}** ({iv.status}): {iv.hypothesis}")
        for effect in iv.predicted_effects:
            lines.append(f"  - predicts {effect}")
        if iv.verdict:
            lines.append(f"  - verdict: {iv.verdict}")
        lines += [f"  - {line}" for line in live_lines(digests).get(iv.branch, [])]
    (folder / "report.md").write_text("\n".join(lines) + "\n")
    return png
