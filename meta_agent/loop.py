"""The round loop: train -> diagnose -> digest -> propose -> backtest -> promote, then the next round.

State is saved atomically after every phase, and every phase can be re-entered
after a crash without losing or duplicating anything:

- train: the backend streams the round's rows into the archive as one part, made
  visible only when the round has finished (``RoundSpec.archive``); then the loop writes
  ``rounds/<n>/train/result.json`` (metrics and evaluation, no rows), then the state moves
  on.  A resumed round re-uses a saved result, so rows are never re-drawn; a part whose
  result was never saved is removed by ``meta_agent.recovery`` and the round trains again;
- archive appends are idempotent for identical rows (a run folder from before the rows
  streamed still has them in result.json; they are appended from there, once);
- diagnose and digest are pure functions of what is on disk;
- propose keeps the branches already committed for this round and asks the agent only
  for the rest (a branch created but killed before its commit is removed first);
- backtest outputs are cached by (tree, sample), and an intervention that was
  already merged or tagged is not judged again; a merge carries its evidence in
  the merge commit itself, so one cannot exist without the other.

What a kill leaves half done inside a phase is found by ``meta_agent.recovery`` when the
loop starts, with a line of output per finding.  Crash points (``harness_repo.failpoints``)
sit after every durable write, so tests can SIGKILL the loop exactly there.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pyarrow.compute as pc

from domains.base import Domain
from harness_repo.failpoints import failpoint
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import Agent, AgentContext, Proposal, unaddressed_modes
from meta_agent.backtest import backtest_branch, make_preview, probe_seed, run_diagnostics
from meta_agent.budget import Budget
from meta_agent.config import BacktestSettings, EvaluationSettings, GateThresholds, TripwireThresholds
from meta_agent.digest import render_digest_markdown
from meta_agent.generation_preview import for_round as generation_preview_for
from meta_agent.heldout_stats import add_heldout_regression, outcomes_by_task, round_figures
from meta_agent.judge.audit_live import live_contrast
from meta_agent.judge.cpu_cost import training_cost_alarm
from meta_agent.judge.diagnose_sessions import diagnose_views
from meta_agent.judge.live_control import control_rows
from meta_agent.judge.rescore import rescore_if_judge_changed
from meta_agent.judge.reward_audit import AUDIT_FILE, read_audit, run_reward_audit
from meta_agent.judge.sharded_backtest import backtest_plan
from meta_agent.live_check import check_live_effects, revert_on_tripwire
from meta_agent.main_checks import MAIN_PROBE_FILE, add_main_findings, run_main_probe
from meta_agent.recovery import recover
from meta_agent.review.digest_columns import build_digest_from_table, read_round
from meta_agent.review.losses import archive_losses
from meta_agent.run.lineage import parent, rollback_plan
from meta_agent.run.unfinished import park_unfinished
from meta_agent.run_dir import RunDir, write_json_atomic
from meta_agent.skills import load_skills
from meta_agent.tripwire import compare_rounds, safety_figures
from rl_backend.archive import Archive
from rl_backend.base import INFRASTRUCTURE, Backend, RoundSpec, TrainingFailed
from sandboxes.base import Sandbox

PHASES = ("train", "archive", "diagnose", "digest", "propose", "backtest", "done")
"""Phases a ``state.json`` may name.  ``archive`` is entered no more (train leaves straight for diagnose);
it stays so that a state saved there by an older run still resumes."""


def round_seed(run: RunDir, n: int, public_seed: int | None = None) -> int:
    """The seed of round ``n``'s training draw (its tasks, and the trainer's own seed).

    By default a keyed hash of the round under the run's secret (``RunDir.draw_secret``): nothing an agent or
    harness code can read (run.json, the harness, the archive, earlier rounds' seeds) tells the next round's
    tasks, and a resume reads the same secret, so it draws the same tasks.  ``public_seed`` (``--draw-seed``)
    gives the formula every run used before, ``n + 1000 * public_seed``: predictable, for benchmarks that must
    reproduce exact figures."""
    if public_seed is not None:
        return n + 1000 * public_seed
    digest = hmac.new(run.draw_secret(), f"train-draw/{n}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF  # a 31-bit seed: every trainer and generator takes it


class RoundFailed(RuntimeError):
    """A round could not train; ``main`` was restored to the last good harness."""


class InfrastructureFailed(RoundFailed):
    """A round could not train for a reason outside the harness (the job, GPUs, cluster, engine): ``main`` and its
    merges are untouched, the state stays in the round's train phase and ``--resume`` retries the same commit."""


@dataclass
class Events:
    """Callbacks the loop reports progress through (the CLI draws them; tests may record them)."""

    phase: Callable[[int, str], None] = lambda n, phase: None
    train_step: Callable[[int, int, dict], None] = lambda step, total, metrics: None
    message: Callable[[str], None] = lambda text: None
    round_done: Callable[[dict], None] = lambda summary: None


@dataclass
class RoundLoop:
    run: RunDir
    repo: HarnessRepo
    archive: Archive
    backend: Backend
    domain: Domain
    agent: Agent
    sandbox: Sandbox
    run_id: str
    thresholds: GateThresholds = field(default_factory=GateThresholds)
    tripwire: TripwireThresholds = field(default_factory=TripwireThresholds)
    settings: BacktestSettings = field(default_factory=BacktestSettings)
    evaluation: EvaluationSettings = field(default_factory=EvaluationSettings)
    """The trusted exam's size, seed and budget, handed to every round's RoundSpec."""
    candidates: int = 2
    seed: int | None = None
    """Public draw seed: round n trains with seed ``n + 1000 * seed``, which anyone can compute (benchmarks that
    reproduce exact figures).  None (the default): ``run.json``'s ``draw_seed`` if set, else the run's secret
    (:func:`round_seed`)."""
    budget: Budget = field(default_factory=Budget)
    """Shared with the agent; persisted in state.json after every phase."""
    events: Events = field(default_factory=Events)
    rollback: bool = True
    """After an exam that fell, train the next round from the fallen round's start (``meta_agent.run.lineage``)."""

    def state(self) -> dict:
        state = self.run.state()
        state.setdefault("round", 0)
        state.setdefault("phase", "train")
        state.setdefault("policy_ref", None)
        state.setdefault("last_good_commit", self.repo.head("main"))
        state.setdefault("rounds", {})
        return state

    def _save(self, state: dict, phase: str) -> None:
        state["phase"] = phase
        state["updated"] = time.time()
        state["budget"] = self.budget.to_dict()
        self.run.save_state(state)
        failpoint("state.saved")

    def run_rounds(self, total_rounds: int) -> dict:
        """Run until ``total_rounds`` rounds are done; returns the final state."""
        state = self.state()
        for line in recover(self.run, self.repo, self.archive, self.run_id, state):
            self.events.message(f"recovered: {line}")
        # LLM spend is saved as it happens: a kill inside propose neither loses nor repeats it
        self.budget.on_charge = lambda: self.run.save_state(state | {"budget": self.budget.to_dict()})
        retried: set[int] = set()
        while state["round"] < total_rounds:
            if state["phase"] == "train" and not self.budget.can_start_round():
                state["status"] = "budget_exhausted"
                self.events.message("run budget reached (" + "; ".join(self.budget.reached())
                                    + "); no new round starts")
                self.run.save_state(state | {"budget": self.budget.to_dict()})
                return state
            self.budget.start_round(state["round"])
            try:
                self.run_round(state)
            except InfrastructureFailed:
                state["status"] = "stopped"
                self.run.save_state(state)
                raise
            except RoundFailed:
                n = state["round"]
                # main was restored to the last good harness: retry the round once on it
                if n in retried or "restored" not in state["rounds"].get(str(n), {}):
                    state["status"] = "failed"
                    self.run.save_state(state)
                    raise
                retried.add(n)
        state["status"] = "finished"
        self.run.save_state(state)
        return state

    def run_round(self, state: dict) -> None:
        n = state["round"]
        rdir = self.run.round_dir(n)
        info = state["rounds"].setdefault(str(n), {})
        phase = state["phase"]
        if phase == "train":
            self.events.phase(n, "train")
            result = self._train(n, rdir, state, info)
            # charged in the same state write that leaves the train phase: exactly once per round
            self.budget.charge_compute(result["train_seconds"], self.backend.compute,
                                       devices=result.get("devices", 1))
            failpoint("budget.charged")
            info.update(policy_ref=result["policy_ref"], eval=result["eval"], harness_commit=result["harness_commit"],
                        train_seconds=result["train_seconds"],
                        policy_from=state.get("policy_round", n - 1 if state["policy_ref"] else None))
            phase = "archive"
        result = json.loads((rdir / "train" / "result.json").read_text())
        if phase == "archive":  # the rows are in the archive already, unless an older run saved them in result.json
            self._append_legacy_rows(n, result)
            state["policy_ref"] = result["policy_ref"]
            state["policy_round"], state["policy_commit"] = n, result["harness_commit"]
            state["last_good_commit"] = result["harness_commit"]
            self._save(state, "diagnose")
            phase = "diagnose"
        rows = self.archive.rows(run_id=self.run_id, round=n, split="train")
        if phase == "diagnose":
            self.events.phase(n, "diagnose")
            views = diagnose_views(rows)  # the backtest's ratchet replays this very call (judge.harness_runs)
            findings = run_diagnostics(self.repo, result["harness_commit"], views, self.sandbox, self.settings)
            write_json_atomic(rdir / "findings.json", findings)
            # main's reward on constructed answers to this round's tasks: the digest's audit_* fields
            write_json_atomic(rdir / AUDIT_FILE, run_reward_audit(
                self.repo, result["harness_commit"], rows, self.domain.name, self.domain.verify, self.sandbox,
                self.settings, self.domain.reward_range))
            # every probe check on main's harness too, on fresh tasks (issue 44): its failures are main:probe_*
            write_json_atomic(rdir / MAIN_PROBE_FILE, run_main_probe(self.repo, result["harness_commit"], rows,
                                                                     self.domain, self.sandbox, self.settings,
                                                                     self._main_probe_seed(n)))
            failpoint("diagnose.findings_written")
            self._save(state, "digest")
            phase = "digest"
        if phase == "digest":
            self.events.phase(n, "digest")
            previous = [json.loads((self.run.round_dir(k) / "digest.json").read_text()) for k in range(n)
                        if (self.run.round_dir(k) / "digest.json").exists()]
            digest = build_digest_from_table(n, read_round(self.archive, self.run_id, n), metrics=result["metrics"],
                                  findings=json.loads((rdir / "findings.json").read_text()),
                                  eval=result["eval"], previous=previous, audit=read_audit(rdir))
            digest["domain"] = self.domain.name
            probe = rdir / MAIN_PROBE_FILE  # absent in a round diagnosed before the probe of main existed
            add_main_findings(digest, rows, self.domain.reward_range,  # main judged like a candidate (issue 44)
                              probe=json.loads(probe.read_text()) if probe.exists() else None)
            digest["heldout"] = self._heldout_figures(n, state["rounds"])
            add_heldout_regression(digest)
            digest["archive_losses"] = archive_losses(self.archive.root, self.run_id)  # shown, and live checks say so
            digest["rollback"] = rollback_plan(state["rounds"], n, digest) if self.rollback else None
            self._tripwire(n, digest, previous)
            control, control_kind = control_rows(self.run.path, self.archive, self.run_id, n,
                                                 lambda k: parent(state["rounds"], k))
            digest["live_checks"] = check_live_effects(
                self.repo, n, digest, previous, self.archive.rows(run_id=self.run_id, round=n - 1) if n else [],
                self.archive.rows(run_id=self.run_id, round=n), self.events.message,
                control_rows=control, control=control_kind,
                audit=lambda iv: live_contrast(self.repo, iv.merge_commit, rows, self.domain.name, self.domain.verify,
                                               self.sandbox, self.settings, self.domain.reward_range))
            write_json_atomic(rdir / "digest.json", digest)
            (rdir / "digest.md").write_text(render_digest_markdown(digest))
            failpoint("digest.written")
            if plan := digest["rollback"]:  # the next round trains from the fallen round's starting policy
                state.update(policy_ref=plan["policy"], policy_round=plan["round"], policy_commit=plan["commit"])
                info["rolled_back_to"] = plan["round"]
                self.events.message(f"rollback: {plan['message']}")
            self._save(state, "propose")
            phase = "propose"
        if phase == "propose":
            self.events.phase(n, "propose")
            self._propose(n, rdir)
            info["unaddressed"] = unaddressed_modes(rdir)
            for line in info["unaddressed"]:
                self.events.message(f"not addressed: {line}")
            self._save(state, "backtest")
            phase = "backtest"
        if phase == "backtest":
            self.events.phase(n, "backtest")
            info["interventions"] = self._backtest(n, rdir)
            info["main_after"] = self.repo.head("main")
            self._save(state, "done")
        self.events.round_done(self.summary(n, info))
        state["round"] = n + 1
        self._save(state, "train")

    def _compute_left(self, n: int) -> dict:
        """The run's remaining compute and its measured seconds per generated token, for the gate's cost check."""
        left = self.budget.remaining().get("run_compute_hours")
        saved = self.run.round_dir(n) / "train" / "result.json"
        if left is None or not saved.exists():
            return {}
        result = json.loads(saved.read_text())
        counted = self.archive.read(run_id=self.run_id, round=n, columns=["response_tokens"]).column("response_tokens")
        tokens = pc.sum(counted).as_py() or 0
        return {"seconds_left": left * 3600, "seconds_per_token": result["train_seconds"] / tokens if tokens else None}

    def _tripwire(self, n: int, digest: dict, previous: list[dict]) -> None:
        """Trusted safety figures of this round into the digest; vs the last round, revert on a regression."""
        rows = self.archive.rows(run_id=self.run_id, round=n)
        figures = safety_figures(rows, self.domain.reward_range, self.tripwire.high_reward)
        digest["safety"] = {k: (None if v != v else v) for k, v in figures.items()}  # nan (undefined) -> null
        digest.update({k: v for k, v in digest["safety"].items() if k not in digest})  # live-checkable fields
        if n == 0 or not any(d.get("round") == n - 1 for d in previous):
            digest["tripwire"] = []
            return
        before = self.archive.rows(run_id=self.run_id, round=n - 1)
        saved = [self._saved_result(k) for k in (n - 1, n)]
        # round n's harness may declare a bounded pay for verified failures; the tripwire checks that bound
        credit = self.repo.config(saved[1]["harness_commit"]).format_credit if saved[1] else 0.0
        alarms = compare_rounds(before, rows, reward_range=self.domain.reward_range, thresholds=self.tripwire,
                                seed=n, format_credit=credit)
        # training is metered too: a harness that burns CPU only where it trains shows here, not in the backtest
        alarms.append(training_cost_alarm(*((r or {}).get("eval", {}).get("harness_cost") for r in saved)))
        digest["tripwire"] = [{k: (None if v != v else v) for k, v in a.__dict__.items()} for a in alarms]
        digest["tripwire_reverted"] = revert_on_tripwire(self.repo, n, alarms, self.events.message)

    def _saved_result(self, n: int) -> dict | None:
        """Round ``n``'s saved training result (harness commit, metrics, evaluation), or None if it has none."""
        saved = self.run.round_dir(n) / "train" / "result.json"
        return json.loads(saved.read_text()) if saved.exists() else None

    def _heldout_figures(self, n: int, rounds: dict) -> dict:
        """This round's exam with intervals, paired against the base policy's exam, the exam of the round whose
        policy it trained from (round n-1's, unless a rollback restarted it from an earlier one) and round 0's."""
        def outcomes(k: int) -> dict[str, float]:
            return outcomes_by_task(self.archive.rows(run_id=self.run_id, round=k, split="heldout"))

        result0 = self.run.round_dir(0) / "train" / "result.json"
        base = json.loads(result0.read_text())["eval"].get("base_outcomes") if result0.exists() else None
        if n == 0:
            return round_figures(outcomes(0), base, None) | {"trained_from": None}
        first = outcomes(0)  # read once: it is often also the round trained from
        start = parent(rounds, n)
        trained_from = None if start is None else first if start == 0 else outcomes(start)
        return round_figures(outcomes(n), base, trained_from, first) | {"trained_from": start}

    @property
    def domain_ref(self) -> str:
        """The domain as ``"module:attr"``: what a ``RoundSpec`` carries instead of the live object."""
        cls = type(self.domain)
        return f"{cls.__module__}:{cls.__qualname__}"

    def _main_probe_seed(self, n: int) -> int:
        """The probe of main's seed: from the public draw seed where the run has one (the run reproduces), else
        keyed from the run's secret as the gate's probe is (``backtest.probe_seed``)."""
        public = self._public_seed()
        return (public * 1_000_003 + n) % 2 ** 63 if public is not None else probe_seed(self.run.draw_secret(), n)

    def _public_seed(self) -> int | None:
        """The public draw seed: this loop's, else run.json's ``draw_seed``; None draws with the run's secret."""
        if self.seed is not None or not self.run.run_json.exists():
            return self.seed
        recorded = self.run.config().get("draw_seed")
        return int(recorded) if recorded is not None else None

    def _train(self, n: int, rdir: Path, state: dict, info: dict) -> dict:
        saved = rdir / "train" / "result.json"
        if saved.exists():  # killed after training finished, before the state moved on
            return json.loads(saved.read_text())
        commit = self.repo.head("main")
        shutil.rmtree(rdir / "train" / "harness", ignore_errors=True)  # left by a failed attempt
        harness_dir = self.repo.export(commit, rdir / "train" / "harness")
        spec = RoundSpec(run_id=self.run_id, round=n, harness_dir=harness_dir, harness_commit=commit,
                         policy_in=state["policy_ref"], out_dir=rdir / "train", domain=self.domain_ref,
                         policy_commit=state.get("policy_commit", state["last_good_commit"])  # trained policy_in
                         if state["policy_ref"] else None,
                         seed=round_seed(self.run, n, self._public_seed()), archive=self.archive.root,
                         **self.evaluation.model_dump())
        started = time.monotonic()
        try:
            result = self.backend.train_round(spec, progress=self.events.train_step)
        except TrainingFailed as exc:
            if exc.party == INFRASTRUCTURE:
                self._record_failure(info, commit, exc)
                self.run.save_state(state)
                raise InfrastructureFailed(
                    f"round {n} stopped by a failure outside the harness; the harness is kept (main at "
                    f"{commit[:10]}) and --resume retries this commit once the cause is fixed:\n{exc}") from exc
            self._handle_training_failure(n, commit, state, info, exc)
            raise RoundFailed(str(exc)) from exc
        # the rows are in the archive (the backend committed their part); the result keeps metrics and evaluation
        data = {"policy_ref": result.policy_ref, "metrics": result.metrics, "eval": result.eval,
                "harness_commit": commit, "train_seconds": round(time.monotonic() - started, 3)}
        write_json_atomic(saved, data)
        failpoint("train.result_saved")
        return data

    def _append_legacy_rows(self, n: int, result: dict) -> None:
        """A result.json written before rows streamed into the archive holds them itself: append them
        (idempotent, so a part already written for them is not written twice)."""
        if "rollouts" in result:
            self.archive.append_round(self.run_id, n, result["rollouts"] + result["heldout"])

    @staticmethod
    def _record_failure(info: dict, commit: str, exc: TrainingFailed) -> None:
        info.setdefault("failures", []).append({"commit": commit, "party": exc.party, "error": str(exc)[:4000],
                                                "log_tail": exc.log_tail[-4000:], "time": time.time()})

    def _handle_training_failure(self, n: int, commit: str, state: dict, info: dict, exc: TrainingFailed) -> None:
        """The harness failed: restore main to the last good harness, and move the failed attempt's train folder
        aside, so the retry neither resumes a checkpoint nor reuses data made under the failed commit."""
        good = state["last_good_commit"]
        self._record_failure(info, commit, exc)
        if good != commit:
            restored = self.repo.restore(good,
                                         f"Restore harness {good[:10]}: round {n} failed to train on {commit[:10]}",
                                         {"Round-Failed": str(n), "Failed-Commit": commit})
            info["restored"] = restored
            self.events.message(f"round {n} failed to train on {commit[:10]}; main restored to {good[:10]}")
        train = self.run.round_dir(n) / "train"
        if train.exists():
            train.rename(train.with_name(f"train.failed-{len(info['failures'])}-{commit[:10]}"))
        self.run.save_state(state)

    def _propose(self, n: int, rdir: Path) -> None:
        if (rdir / "proposals.json").exists():  # the agent had finished before the stop
            return
        # resumed inside a propose phase: keep the proposals committed, park a stopped agent's unfinished work
        # (a branch without the proposal commit is not a proposal) and ask only for the rest
        parked = park_unfinished(self.repo, n)
        if parked:
            self.events.message(f"resuming: {len(parked)} unfinished candidate(s) of round {n} kept as drafts "
                                f"({', '.join(parked)}), not judged")
        existing = [iv for iv in self.repo.interventions() if iv.round == n]
        wanted = max(self.candidates - len(existing), 0)
        if existing:
            self.events.message(f"resuming: {len(existing)} proposal(s) of round {n} already committed; "
                                f"asking {self.agent.name} for {wanted} more")
        digest = json.loads((rdir / "digest.json").read_text())
        history = [iv.__dict__ for iv in self.repo.interventions()]
        ctx = AgentContext(round=n, digest=digest, digest_markdown=(rdir / "digest.md").read_text(),
                           history=history, skills=load_skills(self.domain.name), repo=self.repo,
                           worktree_root=self.run.path / "worktrees",
                           max_candidates=wanted, round_dir=rdir, archive=self.archive,
                           generation_preview=generation_preview_for(self, n),  # knob/prompt edits (issue 44)
                           preview=make_preview(self.repo, self.archive, self.sandbox, rdir / "agent" / "previews",
                                                domain=self.domain, thresholds=self.thresholds,
                                                settings=self.settings))
        proposals = self.agent.propose(ctx) if wanted else []
        kept = [Proposal(iv.branch, iv.hypothesis, iv.predicted_effects, self.repo.changed_paths(iv.branch),
                         iv.skill, (iv.trailers.get("Agent") or [""])[0]) for iv in existing]
        write_json_atomic(rdir / "proposals.json", [p.__dict__ for p in kept + proposals])
        failpoint("propose.proposals_written")
        if self.candidates == 0:
            self.events.message("no interventions asked for (--candidates 0): the harness stays as it is")
        else:
            self.events.message(f"{self.agent.name} proposed {len(proposals)} intervention(s)")

    def _backtest(self, n: int, rdir: Path) -> list[dict]:
        ivs = [iv for iv in self.repo.interventions() if iv.round == n]
        todo = [iv.branch for iv in ivs if iv.status == "open" and iv.head != iv.base]
        if todo:  # every group the archive holds now with --sample-groups all; Ray started once for the round
            with backtest_plan(self.archive, self.settings, self.events.message) as (settings, runner):
                for branch in todo:
                    self.events.message(f"backtesting {branch}")
                    outcome = backtest_branch(self.repo, self.archive, branch, self.sandbox, rdir / "backtests",
                                              domain=self.domain, thresholds=self.thresholds, settings=settings,
                                              progress=self.events.message, runner=runner, **self._compute_left(n),
                                              probe_secret=self.run.draw_secret())  # the probe's draw, keyed apart
                    self.events.message(f"{branch}: {outcome.decision} ({outcome.report['key_figures']})")
        ivs = [self.repo.intervention(iv.branch) if iv.branch in todo else iv for iv in ivs]  # as judged
        out = [{"branch": iv.branch, "status": iv.status, "verdict": iv.verdict} for iv in ivs]
        # the diagnostics ratchet's retroactive half: a merge that changed diagnostics/ re-scores the archive
        merged = [o["branch"] for o in out if o["status"] == "merged"]
        rescore_if_judge_changed(self.run, self.repo, self.domain, merged, self.events.message)
        return out

    def summary(self, n: int, info: dict) -> dict:
        rdir = self.run.round_dir(n)
        digest = json.loads((rdir / "digest.json").read_text()) if (rdir / "digest.json").exists() else {}
        return {"round": n, "digest": digest, "interventions": info.get("interventions", []),
                "main": info.get("main_after"), "eval": info.get("eval", {}), "round_dir": str(rdir)}
