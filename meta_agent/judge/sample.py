"""The archive sample a backtest judges on: whole GRPO groups with a verifier outcome, in the shapes the harness
runtime and the gate need.

``draw_sample`` draws it (stratified by round and data source, the held-out split never shown to a harness);
``SampleData.of`` puts it in the order training scored it (batch by batch) with the views the runtime sends and the
tasks to render prompts over.  Nothing here runs harness code (``judge.harness_runs`` does) or judges
(``judge.decision`` does).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from meta_agent.config import BacktestSettings
from meta_agent.errors import UserError
from meta_agent.prompt_checks import template_item
from rl_backend.archive import Archive, sample_id
from sandboxes.harness_client import trajectory_view


class BacktestError(UserError):
    """Nothing to judge on, or a domain that does not match the harness; the message says what to do."""


@dataclass
class SampleData:
    """One drawn sample, in the shapes the harness runtime and the gate need."""

    table: pa.Table
    rows: list[dict]
    key: str
    views: list[dict]
    batches: list[list[int]]
    """Indices into ``views``, one list per generation batch (run, round, step), as training scored them."""
    render_items: list[dict]
    render_truths: list[dict]

    @classmethod
    def of(cls, table: pa.Table) -> SampleData:
        rows = table.to_pylist()
        views = [trajectory_view(r) for r in rows]
        by_batch: dict[tuple, list[int]] = {}
        for i, r in enumerate(rows):
            by_batch.setdefault((r["run_id"], r["round"], r["step"]), []).append(i)
        for members in by_batch.values():  # within a batch, the order training saw: group, then sample
            members.sort(key=lambda i: (_natural(rows[i]["group_id"]), rows[i]["sample_idx"]))
        items, truths, seen = [], [], set()
        for r, v in zip(rows, views):
            task = json.loads(r["task"]) if r.get("task") else None
            if task and r["task_id"] not in seen:
                seen.add(r["task_id"])
                items.append(template_item(task["question"], task["vars"]))
                truths.append(v["ground_truth"])
        return cls(table, rows, sample_id(table), views, [by_batch[k] for k in sorted(by_batch)], items, truths)


def _natural(text: str) -> tuple:
    """``s10-g2`` after ``s9-g2``: numbers compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def draw_sample(archive: Archive, settings: BacktestSettings, run_id: str | None = None,
                n_groups: int | None = None) -> pa.Table:
    """Whole groups with a known verifier outcome; the held-out split is never shown to a harness.

    The filters go into the Parquet scan and only the chosen groups' rows are read (``Archive.sample_groups``).
    """
    backtestable = pc.field("verified").is_valid() & (pc.field("split") != "heldout")
    sample = archive.sample_groups({"run_id": run_id, "where": backtestable},
                                   n_groups=n_groups or settings.sample_groups, seed=settings.seed,
                                   stratify=("round", "data_source"))
    if sample.num_rows == 0:
        raise BacktestError(f"the archive at {archive.root} has no trajectories with a verifier outcome to "
                            "backtest on; "
                         "train a round first or import a dump (python -m rl_backend.verl_import)")
    return sample
