"""What a round's folder holds across launches and rounds: the harness commit it trains under, and the optimizer
state it continues from.

    claim_round_folder(spec)                       # harness_commit.txt; another commit's folder is refused
    carry = find_carry(spec, world_size=8)         # the previous round's actor checkpoint, or None
    resume_from = prepare_handoff(carry, plan)     # <round>/handoff/global_step_0, for trainer.resume_from_path

**Optimizer carried across rounds.** Each round's job saves ``[model, optimizer, extra, hf_model]``
(``config.build_overrides``): FSDP's sharded weights, AdamW's moments (``optim_world_size_<W>_rank_<r>.pt``),
the LR scheduler and RNG state (``extra_state_...``), and the HF export the next round names as its
``model.path`` (``spec.policy_in`` = ``<round n>/ckpt/global_step_<N>/actor/huggingface``).  Round n+1
starts with ``trainer.resume_mode=resume_path`` and ``load_contents=[model, optimizer, extra]`` from a
folder of its own, ``handoff/global_step_0``, whose ``actor`` links to round n's actor checkpoint.  Why
this folder and not round n's own: verl 0.9.1 (``trainer/ppo/v1/trainer_base.py``, ``_load_checkpoint``)
sets its step counter from the folder name and restores the data position from ``data.pt`` beside
``actor``.  ``global_step_0`` and no ``data.pt`` make the job start at step 1 of its own data, exactly
as a fresh job, while the actor loads round n's weights *and* AdamW state: the local backend's
carried optimizer (``rl_backend.local``), on verl.  verl's loader would also restore round n's learning rate,
betas, weight decay and scheduler; the launch names ``rl_backend.verl.optim_carry`` as the actor's
``model.external_lib``, which puts this round's back after the load (only moments and step counts carry).
A round that already has a checkpoint of its own
resumes that one instead (``resume_mode=auto``).

A checkpoint is carried only when provably the policy the run recorded: its round folder's
``harness_commit.txt`` must be the commit the run trained that policy under (``spec.policy_commit``), and
its optimizer shards must fit this job's GPU count (FSDP shards per rank).  Anything else is refused,
never silently restarted.  A ``policy_in`` that is not a verl export (a base model, a policy from the
local backend) starts a fresh optimizer, as the first round does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from rl_backend.base import RoundSpec, TrainingFailed, infrastructure_failure
from rl_backend.verl.config import HARNESS_COMMIT_FILE, RoundPlan

CARRY_FILE = "carried_from.json"
"""In a round's train folder: the checkpoint its optimizer state came from and the commit that trained it."""
LOAD_CONTENTS = ("model", "optimizer", "extra")


@dataclass(frozen=True)
class Carry:
    """The previous round's actor checkpoint a round continues from."""

    actor: Path
    """``<round n>/ckpt/global_step_<N>/actor``: FSDP model and optimizer shards, extra state, ``huggingface/``."""
    harness_commit: str
    """The commit round n trained under (its folder's ``harness_commit.txt``)."""

    def record(self) -> dict:
        return {"actor": str(self.actor), "harness_commit": self.harness_commit}


def claim_round_folder(spec: RoundSpec) -> None:
    """Record the harness commit this round folder's data and checkpoints are made under; refuse a folder that
    holds another commit's (resuming it would train one round under two harnesses)."""
    marker = Path(spec.out_dir) / HARNESS_COMMIT_FILE
    recorded = marker.read_text().strip() if marker.exists() else None
    if recorded is None:
        if any((Path(spec.out_dir) / name).exists() for name in ("ckpt", "data")):
            raise infrastructure_failure(
                f"round {spec.round}: {spec.out_dir} holds data or checkpoints but no {HARNESS_COMMIT_FILE}, so "
                "which harness they were made under is unknown; move the folder aside to train the round afresh")
        marker.write_text(spec.harness_commit + "\n")
    elif recorded != spec.harness_commit:
        raise infrastructure_failure(
            f"round {spec.round}: {spec.out_dir} holds data and checkpoints made under harness {recorded[:12]}, not "
            f"{spec.harness_commit[:12]}; resuming them would mix two harnesses in one round. Move the folder "
            "aside to train the round afresh under the current harness")


def verl_actor(policy_in: str | Path | None) -> Path | None:
    """The actor checkpoint folder whose HF export ``policy_in`` is, or None when it is not a verl export."""
    if policy_in is None:
        return None
    hf = Path(policy_in)
    if hf.name == "huggingface" and hf.parent.name == "actor" and hf.parent.parent.name.startswith("global_step_"):
        return hf.parent
    return None


def find_carry(spec: RoundSpec, world_size: int) -> Carry | None:
    """The checkpoint ``spec``'s round continues from, checked; None starts a fresh optimizer (no verl policy in).
    Raises an infrastructure ``TrainingFailed`` naming the fix when the checkpoint cannot be carried honestly."""
    actor = verl_actor(spec.policy_in)
    if actor is None:
        return None
    refused = f"round {spec.round}: the previous round's checkpoint {actor}"
    round_folder = actor.parents[2]  # actor -> global_step_N -> ckpt -> the round's train folder
    try:
        trained_under = (round_folder / HARNESS_COMMIT_FILE).read_text().strip()
    except OSError:
        raise _refusal(f"{refused} has no {HARNESS_COMMIT_FILE} in {round_folder}, so which harness trained it is "
                       "unknown; its optimizer state is not carried blind. Retrain that round, or start the run "
                       "afresh from its HF weights (--model-path)") from None
    if spec.policy_commit is not None and trained_under != spec.policy_commit:
        raise _refusal(f"{refused} was trained under harness {trained_under[:12]}, but the run's policy came from "
                       f"harness {spec.policy_commit[:12]}: the folder was retrained under another commit. Restore "
                       "that round's folder, or start the run afresh from its HF weights (--model-path)")
    shards = sorted(actor.glob("optim_world_size_*_rank_0.pt"))
    if not shards:
        raise _refusal(f"{refused} holds no optimizer state (optim_world_size_*_rank_*.pt); the run saves "
                       "[model, optimizer, extra, hf_model] each round. Restore the folder, or start the run "
                       "afresh from its HF weights (--model-path)")
    if not (actor / f"optim_world_size_{world_size}_rank_0.pt").exists():
        sizes = ", ".join(s.name.split("_")[3] for s in shards)
        raise _refusal(f"{refused} holds optimizer shards for {sizes} GPUs, and this job has {world_size} "
                       "(FSDP saves one shard per GPU): give the previous round's --gpus and --nodes")
    return Carry(actor=actor, harness_commit=trained_under)


def handoff_folder(plan: RoundPlan) -> Path:
    """``trainer.resume_from_path`` of a round continuing the previous round's checkpoint (see the module doc)."""
    return plan.root / "handoff" / "global_step_0"


def prepare_handoff(spec: RoundSpec, carry: Carry, plan: RoundPlan) -> Path:
    """Link ``handoff/global_step_0/actor`` to ``carry.actor`` and record the carry (``carried_from.json``); a
    round that recorded another checkpoint before (the previous round changed since) is refused."""
    record = Path(spec.out_dir) / CARRY_FILE
    if record.exists():
        before = json.loads(record.read_text())
        if before != carry.record():
            raise _refusal(f"round {spec.round}: this round started from {before['actor']} (harness "
                           f"{before['harness_commit'][:12]}), and its previous round now offers {carry.actor} "
                           f"(harness {carry.harness_commit[:12]}); move {spec.out_dir} aside to train the round "
                           "afresh from the new checkpoint")
    folder = handoff_folder(plan)
    folder.mkdir(parents=True, exist_ok=True)
    link = folder / "actor"
    if not link.is_symlink() or Path(os.readlink(link)) != carry.actor:
        link.unlink(missing_ok=True)
        link.symlink_to(carry.actor, target_is_directory=True)
    record.write_text(json.dumps(carry.record(), indent=1) + "\n")
    return folder


def _refusal(message: str) -> TrainingFailed:
    # the run's state, not the harness code: main is kept and --resume retries once the folder is fixed
    return infrastructure_failure(message)
