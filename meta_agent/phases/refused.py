"""A harness training refuses is a finding, not a stopped run: the agent repairs it before the round trains.

Training refuses a harness that breaks a limit the trainer enforces (rendered prompts longer than
``max_prompt_length``, by the real tokenizer).  Where a later round has a good harness to restore, the train
phase restores it; where it has none (round 0, or every merge since the last good harness was already undone),
the run used to stop.  Instead, the refusal is written as a ``main:<check>`` finding (``refusal_finding``: rate,
examples, the measured distribution) into ``rounds/<n>/pretrain/digest.json``, the round's agent proposes from
that digest alone, and a trusted admission check merges the first proposal that

- changes nothing but ``harness.yaml``, and in it nothing but the knob the trainer measured against,
- is a harness the contract and the trusted round limits accept, and
- would admit what training measured: the trainer's own rule (enough of the measured prompts fit), and at least
  :data:`MIN_FIT` of them (a budget that trains only the shortest tasks biases the mix).

The templates are unchanged, so the measured lengths are the candidate's lengths: no harness code runs for this.
The merge records why (``Pretrain-Repair`` trailers; ``info["pretrain_repair"]``), then the round trains once more.
Nothing else is admitted this way: any other change waits for the gate after a round has trained.

Crash-exact: a run killed after the agent committed a repair and before the check judged it leaves that branch
open; the resumed round judges every open proposal of the round first (``left_open``: before the round trains,
no other proposal of it can exist), recorded with ``"resumed": true``, and asks the agent only if none merged.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from harness_repo.contract import HarnessConfig
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.cost import RoundLimits, cost_check, predict
from meta_agent.main_checks import refusal_finding
from meta_agent.phases.parts import RoundParts
from meta_agent.run.unfinished import is_proposal
from meta_agent.run_dir import write_json_atomic
from rl_backend.base import TrainingFailed

MIN_FIT = 0.9
"""Share of the measured prompts a repaired limit must admit."""
PRETRAIN_DIR = "pretrain"


def admit(main_yaml: str, branch_yaml: str, changed: list[str], measured: dict) -> tuple[bool, str]:
    """Whether a pre-train repair may merge without a trained round (the module's three conditions), and why."""
    if changed != ["harness.yaml"]:
        return False, f"changes {changed}: a repair before training may change harness.yaml alone"
    knob = str(measured["knob"])
    try:
        old, new = yaml.safe_load(main_yaml), yaml.safe_load(branch_yaml)
        config = HarnessConfig.model_validate(new)
    except (yaml.YAMLError, ValueError) as exc:
        return False, f"harness.yaml would be refused: {str(exc)[:200]}"
    old_grpo, new_grpo = dict(old.get("grpo") or {}), dict(new.get("grpo") or {})
    old_grpo.pop(knob, None), new_grpo.pop(knob, None)
    if {k: v for k, v in old.items() if k != "grpo"} != {k: v for k, v in new.items() if k != "grpo"} \
            or old_grpo != new_grpo:
        return False, f"changes more than grpo.{knob}: a repair before training moves the refused limit alone"
    cost = cost_check(predict(config.grpo), RoundLimits())
    if not cost["passed"]:
        return False, f"the round's limits refuse it: {cost['detail']}"
    limit = getattr(config.grpo, knob)
    lengths = [int(x) for x in measured.get("lengths") or []]
    fit = sum(1 for x in lengths if x <= limit)
    needed = int(measured.get("needed") or 0)
    if not lengths or fit < needed or fit < MIN_FIT * len(lengths):
        return False, (f"{knob}={limit} admits {fit} of {len(lengths)} measured prompts (the trainer needs {needed}, "
                       f"this check {MIN_FIT:.0%})")
    return True, f"{knob} {measured['limit']} -> {limit}: admits {fit} of {len(lengths)} measured prompts"


class RefusedRepair(RoundParts):
    def _repair_refusal(self, n: int, rdir: Path, commit: str, state: dict, info: dict, exc: TrainingFailed) -> bool:
        """Round ``n``'s training refused main at ``commit`` with nothing to restore: ask the agent for a repair of
        the measured limit and merge the first the admission check passes.  True when main moved (train again)."""
        measured = getattr(exc, "measured", None)
        if not measured or state["last_good_commit"] != commit or self.candidates <= 0 \
                or "pretrain_repair" in info:  # once a round: a second refusal stops as before
            if measured:
                info["refused"] = refusal_finding(measured) | {"commit": commit}
            return False
        finding = refusal_finding(measured)
        out = rdir / PRETRAIN_DIR
        out.mkdir(parents=True, exist_ok=True)
        digest = {"round": n, "pretrain": True, "failure_modes": [finding], "domain": self.domain.name,
                  "main_checks": {finding["name"].removeprefix("main:"): {"passed": False,
                                                                          "detail": finding["message"]}}}
        markdown = (f"# Round {n}, before training\n\nTraining refused main ({commit[:10]}).\n\n"
                    f"- **{finding['name']}** (error, rate {finding['rate']:.3f}): {finding['message']}\n")
        write_json_atomic(out / "digest.json", digest)
        (out / "digest.md").write_text(markdown)
        self.events.message(f"round {n}: training refused main; {finding['message']}; asking {self.agent.name} "
                            "to repair it before the round trains")
        record: dict = {"finding": {k: v for k, v in finding.items() if k != "examples"}, "branches": [],
                        "merged": None}
        info["pretrain_repair"] = record
        # a run killed after the agent committed a repair, before it was judged, left that branch open: the round
        # has not trained, so no gate proposal of it exists yet and every open proposal of round n is such a
        # repair.  Judge it first, as if the agent had just proposed it (asking again would be declined while
        # it is open, and the run would stop on a refusal it has a repair for)
        for branch in left_open(self.repo, n):
            self._judge_repair(n, branch, measured, finding, state, record, resumed=True)
        if record["merged"] is None:
            ctx = AgentContext(round=n, digest=digest, digest_markdown=markdown,
                               history=[iv.__dict__ for iv in self.repo.interventions()], skills=[], repo=self.repo,
                               worktree_root=self.run.path / "worktrees", round_dir=out,
                               max_candidates=self.candidates, archive=self.archive)
            for p in self.agent.propose(ctx):
                self._judge_repair(n, p.branch, measured, finding, state, record)
        write_json_atomic(out / "repair.json", record)
        self.run.save_state(state)
        if record["merged"]:
            self.events.message(f"round {n}: merged {record['merged_branch']} before training; training again")
            return True
        why = "; ".join(f"{b['branch']}: {b['why']}" for b in record["branches"]) or "no proposal"
        self.events.message(f"round {n}: no repair of the refusal could be admitted ({why})")
        return False

    def _judge_repair(self, n: int, branch: str, measured: dict, finding: dict, state: dict, record: dict,
                      resumed: bool = False) -> None:
        """Merge ``branch`` if the admission check passes it and nothing was merged yet, else reject it: judged
        here, never left open for the round's gate.  ``resumed``: a branch a killed run had left open."""
        ok, why = admit(self.repo.read_file("main", "harness.yaml"), self.repo.read_file(branch, "harness.yaml"),
                        self.repo.changed_paths(branch), measured)
        record["branches"].append({"branch": branch, "admitted": ok, "why": why} | ({"resumed": True} if resumed
                                                                                   else {}))
        if not ok or record["merged"] is not None:
            self.repo.reject(branch, f"not admitted before training: {why}" if not ok else
                             "another repair of the refusal was merged first", {"Pretrain-Repair": f"round {n}"})
            return
        record["merged_branch"] = branch
        record["merged"] = self.repo.merge(branch, {
            "Pretrain-Repair": f"round {n}: {finding['name']} rate {finding['rate']:.3f}",
            "Admission": why}, f"Merge {branch} before round {n} trains: training refused main ({finding['name']})")
        state["last_good_commit"] = record["merged"]  # main's harness from here on; a failure restores it


def left_open(repo: HarnessRepo, n: int) -> list[str]:
    """Round ``n``'s open proposal branches (their head is the proposal commit; recovery parks any other)."""
    return [iv.branch for iv in repo.interventions() if iv.round == n and iv.status == "open"
            and is_proposal(repo, iv.branch)]


def pretrain_branches(info: dict) -> list[str]:
    """Branches the round's pre-train repair proposed: not among the round's proposals to the gate."""
    return [b["branch"] for b in (info.get("pretrain_repair") or {}).get("branches", [])]


def read_repair(rdir: Path) -> dict | None:
    path = rdir / PRETRAIN_DIR / "repair.json"
    return json.loads(path.read_text()) if path.exists() else None
