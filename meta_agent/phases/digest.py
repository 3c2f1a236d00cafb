"""The digest phase: the round summarised for the agent and the review (``digest.json`` and ``digest.md``),
from what is on disk: the archive's rows, the findings, the audit, the probe of main and the exam."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from harness_repo.failpoints import failpoint
from meta_agent.constructed_checks import add_constructed_findings, run_constructed_checks
from meta_agent.digest import render_digest_markdown
from meta_agent.heldout_stats import add_heldout_regression, outcomes_by_task, round_figures
from meta_agent.judge.reward_audit import read_audit
from meta_agent.generation_preview import for_round
from meta_agent.main_checks import MAIN_PROBE_FILE, add_main_findings, task_kinds
from meta_agent.phases.live import LivePhase
from meta_agent.review.digest_columns import build_digest_from_table, read_round
from meta_agent.review.losses import archive_losses
from meta_agent.run.lineage import parent, rollback_plan
from meta_agent.run_dir import write_json_atomic
from meta_agent.slice_census import LINEAGE, census, census_size, lineage_rows, templates_of
from meta_agent.slice_checks import slice_figures
from meta_agent.stall_checks import stall_evidence


class DigestPhase(LivePhase):
    def phase_digest(self, n: int, rdir: Path, result: dict, rows: list[dict], state: dict, info: dict) -> None:
        """Write round ``n``'s digest, with the tripwire and live checks (``LivePhase``) in it, then roll back
        if the exam fell."""
        previous = [json.loads((self.run.round_dir(k) / "digest.json").read_text()) for k in range(n)
                    if (self.run.round_dir(k) / "digest.json").exists()]
        digest = build_digest_from_table(n, read_round(self.archive, self.run_id, n), metrics=result["metrics"],
                                         findings=json.loads((rdir / "findings.json").read_text()),
                                         eval=result["eval"], previous=previous, audit=read_audit(rdir))
        digest["domain"] = self.domain.name
        probe = rdir / MAIN_PROBE_FILE  # absent in a round diagnosed before the probe of main existed
        main_yaml = yaml.safe_load(self.repo.read_file("main", "harness.yaml")) or {}
        digest["slice_census"], slice_rows = self._slice_rows(n, rows, state["rounds"], main_yaml)
        add_main_findings(digest, rows, self.domain.reward_range,  # main judged like a candidate (issue 44)
                          slice_rows=slice_rows,  # a dead slice judged on enough groups (slice_census)
                          probe=json.loads(probe.read_text()) if probe.exists() else None,
                          train_tasks=main_yaml.get("tasks"), exam_specs=getattr(self.domain, "eval_specs", None),
                          update=result["eval"].get("update"),  # the trainer's policy shift (update_checks)
                          exam_max_tokens=self.evaluation.heldout_max_tokens or self.domain.exam_max_tokens,  # a3
                          **stall_evidence(self.archive, self.run_id, n, parent(state["rounds"], n),
                                           self._base_outcomes(), main_yaml.get("grpo") or {}, result["metrics"]))
        add_constructed_findings(digest, run_constructed_checks(  # filters and diagnostics on constructed batches
            self.repo, result["harness_commit"], rows, self.domain, self.sandbox, self.settings))
        digest["heldout"] = self._heldout_figures(n, state["rounds"])
        add_heldout_regression(digest)
        digest["archive_losses"] = archive_losses(self.archive.root, self.run_id)  # shown, and live checks say so
        digest["rollback"] = rollback_plan(state["rounds"], n, digest) if self.rollback else None
        self._tripwire(n, digest, previous)
        self._live_checks(n, digest, previous, rows, state)
        write_json_atomic(rdir / "digest.json", digest)
        (rdir / "digest.md").write_text(render_digest_markdown(digest))
        failpoint("digest.written")
        self._roll_back(digest, state, info)

    def _slice_rows(self, n: int, rows: list[dict], rounds: dict, main_yaml: dict) -> tuple[dict, list[dict]]:
        """The rows the dead-slice check judges: this round's, the lineage's earlier rounds under main's mix, and
        a census where a kind is still too thin to judge (its record; a census that failed is said, not blamed)."""
        history, k = [], parent(rounds, n)
        while k is not None and len(history) < LINEAGE:
            commit = (rounds.get(str(k)) or {}).get("harness_commit")
            if not commit:
                break
            config = yaml.safe_load(self.repo.read_file(commit, "harness.yaml")) or {}
            config["templates"] = templates_of(self.repo, commit)  # a prompt edit ends the pool too (x1)
            history.append((k, config, self.archive.rows(run_id=self.run_id, round=k, split="train")))
            k = parent(rounds, k)
        pooled, earlier = lineage_rows(rows, history, dict(main_yaml, templates=templates_of(self.repo, "main")))
        figures, level = slice_figures(pooled, main_yaml.get("tasks") or [], getattr(self.domain, "eval_specs", []),
                                       task_kinds(self.domain))
        record: dict = {"rounds": [n, *earlier]}
        if not census_size(figures, level):
            return record | {"groups": 0}, pooled
        preview = for_round(self, n)
        if preview is None:
            return record | {"groups": 0, "why": "no local policy to generate with"}, pooled
        try:
            more, done = census(preview, "main", figures, level, seed=n)
        except Exception as exc:  # noqa: BLE001 - the census is evidence; its failure names no flaw of main's
            return record | {"groups": 0, "error": f"{type(exc).__name__}: {exc}"[:300]}, pooled
        return record | done, pooled + more

    def _base_outcomes(self) -> dict | None:
        """The base policy's exam verdicts per task, as round 0's training recorded them (None before it)."""
        result0 = self.run.round_dir(0) / "train" / "result.json"
        return json.loads(result0.read_text())["eval"].get("base_outcomes") if result0.exists() else None

    def _heldout_figures(self, n: int, rounds: dict) -> dict:
        """This round's exam with intervals, paired against the base policy's exam, the exam of the round whose
        policy it trained from (round n-1's, unless a rollback restarted it from an earlier one) and round 0's."""
        def outcomes(k: int) -> dict[str, float]:
            return outcomes_by_task(self.archive.rows(run_id=self.run_id, round=k, split="heldout"))

        base = self._base_outcomes()
        if n == 0:
            return round_figures(outcomes(0), base, None) | {"trained_from": None}
        first = outcomes(0)  # read once: it is often also the round trained from
        start = parent(rounds, n)
        trained_from = None if start is None else first if start == 0 else outcomes(start)
        return round_figures(outcomes(n), base, trained_from, first) | {"trained_from": start}
