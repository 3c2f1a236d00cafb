"""This round's optimizer settings after verl loads the previous round's optimizer state.

A round continues the previous round's AdamW moments (``rl_backend.verl.handoff``): verl 0.9.1 loads them
with ``FSDPCheckpointManager.load_checkpoint``, which calls ``optimizer.load_state_dict`` -- restoring the
*saved* ``param_groups`` (learning rate, betas, weight decay, ``initial_lr``) over the ones this round's
config built -- and ``lr_scheduler.load_state_dict``, restoring the saved ``base_lrs``.  Without this
module a round that lowers the learning rate trains at the old one, while verl logs the scheduler's value.

verl has no per-rank load hook (``trainer.checkpoint_callback_class`` is driver-side and save-only), so
the launcher names this module in ``actor_rollout_ref.model.external_lib``: verl imports it in every
process that builds the actor's ``HFModelConfig`` (the actor workers, before they load a checkpoint), and
importing it wraps ``FSDPCheckpointManager.load_checkpoint``.  The wrapper acts only on the handoff folder
(``<round>/handoff/global_step_0/actor``): it loads everything as verl does, then puts back this round's
hyperparameters of every param group and this round's fresh scheduler -- what the local backend's
``carry_optimizer_state`` keeps.  The moments and step counts (the optimizer's per-parameter ``state``),
the weights and the RNG state stay loaded.  A round resuming its own checkpoint is untouched.

    import_external_libs("rl_backend.verl.optim_carry")      # what verl does with model.external_lib
    manager.load_checkpoint(".../handoff/global_step_0/actor")
    optimizer.param_groups[0]["lr"] == this round's lr
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

HANDOFF_PARTS = ("handoff", "global_step_0", "actor")
"""The last parts of the folder a round's carried checkpoint is loaded from (``handoff.handoff_folder``)."""
MODULE = __name__


def is_handoff(local_path: Any) -> bool:
    """Whether verl is loading the previous round's checkpoint through this round's handoff folder."""
    return local_path is not None and Path(str(local_path)).parts[-3:] == HANDOFF_PARTS


def keep_this_rounds_settings(load: Callable) -> Callable:
    """``load_checkpoint`` that keeps the optimizer's hyperparameters and the scheduler it was built with when
    it loads a handoff folder."""

    @functools.wraps(load)
    def load_checkpoint(self: Any, local_path: Any, *args: Any, **kwargs: Any) -> Any:
        optimizer, scheduler = getattr(self, "optimizer", None), getattr(self, "lr_scheduler", None)
        if not is_handoff(local_path) or optimizer is None:
            return load(self, local_path, *args, **kwargs)
        settings = [{k: v for k, v in group.items() if k != "params"} for group in optimizer.param_groups]
        schedule = None if scheduler is None else scheduler.state_dict()
        out = load(self, local_path, *args, **kwargs)
        for group, mine in zip(optimizer.param_groups, settings, strict=True):
            group.update(mine)
        if schedule is not None:
            scheduler.load_state_dict(schedule)
        return out

    load_checkpoint.keeps_round_settings = True  # type: ignore[attr-defined]
    return load_checkpoint


def install() -> None:
    """Wrap verl's FSDP checkpoint loader once per process."""
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    if not getattr(FSDPCheckpointManager.load_checkpoint, "keeps_round_settings", False):
        FSDPCheckpointManager.load_checkpoint = keep_this_rounds_settings(FSDPCheckpointManager.load_checkpoint)


install()
