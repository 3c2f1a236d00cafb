"""The train phase: train and evaluate the round's policy on main's harness, and what a failure leaves.

The backend streams the round's rows into the archive as one part, made visible only when the round has
finished (``RoundSpec.archive``); then ``rounds/<n>/train/result.json`` is written (metrics and evaluation, no
rows).  A resumed round re-uses a saved result, so rows are never re-drawn.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from harness_repo.failpoints import failpoint
from meta_agent.phases.parts import InfrastructureFailed, RoundFailed, round_seed
from meta_agent.phases.refused import RefusedRepair
from meta_agent.run_dir import write_json_atomic
from rl_backend.base import INFRASTRUCTURE, RoundSpec, TrainingFailed


class TrainPhase(RefusedRepair):
    def phase_train(self, n: int, rdir: Path, state: dict, info: dict) -> None:
        """Train round ``n`` (or read its saved result) and charge its compute; the state is saved by the
        archive phase that follows, in the same write that leaves the train phase."""
        result = self._train(n, rdir, state, info)
        # charged in the same state write that leaves the train phase: exactly once per round
        self.budget.charge_compute(result["train_seconds"], self.backend.compute,
                                   devices=result.get("devices", 1))
        failpoint("budget.charged")
        info.update(policy_ref=result["policy_ref"], eval=result["eval"], harness_commit=result["harness_commit"],
                    train_seconds=result["train_seconds"],
                    policy_from=state.get("policy_round", n - 1 if state["policy_ref"] else None))

    def phase_archive(self, n: int, result: dict, state: dict) -> None:
        """The trained policy becomes the one the next round starts from, and its harness the last good one.
        The rows are in the archive already, unless an older run saved them in result.json."""
        self._append_legacy_rows(n, result)
        state["policy_ref"] = result["policy_ref"]
        state["policy_round"], state["policy_commit"] = n, result["harness_commit"]
        state["last_good_commit"] = result["harness_commit"]

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
            # refused with nothing to restore: the agent repairs the measured limit first (meta_agent.phases.refused)
            if self._repair_refusal(n, rdir, commit, state, info, exc):
                return self._train(n, rdir, state, info)
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
