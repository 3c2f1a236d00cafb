"""A round that carries the previous round's optimizer state trains at its own learning rate.

verl 0.9.1's own pieces, on CPU: round n's optimizer is verl's ``build_optimizer`` (AdamW) with the scheduler verl's
FSDP engine builds (``FSDPEngine._build_lr_scheduler``), saved by verl's ``FSDPCheckpointManager.save_checkpoint``;
round n+1's are built from the config the launcher composes for it (``build_overrides`` through Hydra, the knob
``learning_rate`` ten times lower), loaded by ``FSDPCheckpointManager.load_checkpoint`` from the handoff folder
``prepare_handoff`` made, after importing ``model.external_lib`` as verl's ``HFModelConfig`` does in the actor
worker.  The model is a two-layer Llama; a one-process gloo group stands in for the FSDP ranks (verl's loader only
asks for the rank and the world size).  The first step must run at this round's lr, betas and weight decay, log
that lr (verl's ``actor/lr`` is the scheduler's last lr), and start from round n's moments and step count.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

import torch  # noqa: E402

from harness_repo.contract import GRPOKnobs  # noqa: E402
from rl_backend.base import RoundSpec  # noqa: E402
from rl_backend.model import ensure_base_model  # noqa: E402
from rl_backend.verl.config import HARNESS_COMMIT_FILE, LaunchOptions, RoundPlan, build_overrides  # noqa: E402
from rl_backend.verl.handoff import find_carry, prepare_handoff  # noqa: E402
from rl_backend.verl.validate import compose  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OLD_LR, NEW_LR = 2e-4, 2e-5
OLD_BETAS, OLD_DECAY = (0.8, 0.95), 0.1
TRAINED = "a" * 40


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{tmp_path_factory.mktemp('pg')}/store", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def tiny_model(seed: int):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=2))


def train_step(model, optimizer, scheduler) -> tuple[float, float]:
    """One step as verl's engine takes it (optimizer, then scheduler): the lr the step ran at, and the lr verl
    logs as ``actor/lr`` (``lr_scheduler_step``: the scheduler's last lr after it stepped)."""
    ran_at = optimizer.param_groups[0]["lr"]
    ids = torch.arange(12).reshape(2, 6) % 64
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    scheduler.step()
    return ran_at, scheduler.get_last_lr()[0]


def verl_optimizer(model, optim_cfg):
    """verl's optimizer and the FSDP engine's scheduler for ``optim_cfg`` (an ``FSDPOptimizerConfig``)."""
    from verl.workers.config.optimizer import build_optimizer
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    optimizer = build_optimizer(model.parameters(), optim_cfg)
    return optimizer, FSDPEngine._build_lr_scheduler(SimpleNamespace(optimizer_config=optim_cfg, rank=0), optimizer)


def round_config(tmp_path: Path, knobs: GRPOKnobs, carry_from: Path | None):
    plan = RoundPlan.for_round(tmp_path / "rounds" / "3" / "train", 1)
    return compose(build_overrides(knobs, LaunchOptions(), plan, model_path=str(ensure_base_model()),
                                   harness_dir=tmp_path / "harness", domain_ref="domains.math:MathDomain",
                                   run_id="h1", round=3, carry_from=carry_from))


def test_the_first_step_after_the_carry_runs_at_this_rounds_learning_rate(tmp_path, one_rank):
    from omegaconf import OmegaConf
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    from verl.utils.config import omega_conf_to_dataclass
    from verl.utils.import_utils import import_external_libs

    shutil.copytree(REPO / "harness_repo" / "seeds" / "math", tmp_path / "harness")
    # round 2: trained one step at its own settings, checkpointed as a verl job leaves it
    cfg = round_config(tmp_path, GRPOKnobs(learning_rate=OLD_LR), None)
    old_cfg = omega_conf_to_dataclass(OmegaConf.merge(cfg.actor_rollout_ref.actor.optim, {
        "betas": list(OLD_BETAS), "weight_decay": OLD_DECAY, "total_training_steps": 4}))
    old_model = tiny_model(0)
    old_opt, old_sched = verl_optimizer(old_model, old_cfg)
    assert train_step(old_model, old_opt, old_sched)[0] == OLD_LR
    folder = tmp_path / "rounds" / "2" / "train"
    actor = folder / "ckpt" / "global_step_1" / "actor"
    FSDPCheckpointManager(old_model, old_opt, old_sched, checkpoint_config=OmegaConf.create(
        {"save_contents": ["model", "optimizer", "extra"]})).save_checkpoint(str(actor), global_step=1)
    assert (actor / "huggingface").is_dir()  # verl writes the model's config there: what policy_in names
    (folder / HARNESS_COMMIT_FILE).write_text(TRAINED + "\n")
    saved_moments = {name: old_opt.state[p]["exp_avg"].clone() for name, p in old_model.named_parameters()}

    # round 3: the harness lowered the learning rate; the launcher carries round 2's optimizer state
    spec = RoundSpec(run_id="h1", round=3, harness_dir=tmp_path / "harness", harness_commit="c" * 40,
                     policy_in=str(actor / "huggingface"), policy_commit=TRAINED,
                     out_dir=tmp_path / "rounds" / "3" / "train", domain="domains.math:MathDomain")
    spec.out_dir.mkdir(parents=True)
    plan = RoundPlan.for_round(spec.out_dir, 1)
    handoff = prepare_handoff(spec, find_carry(spec, 1), plan)
    cfg = round_config(tmp_path, GRPOKnobs(learning_rate=NEW_LR), handoff)
    assert cfg.trainer.resume_from_path == str(handoff)
    import_external_libs(cfg.actor_rollout_ref.model.external_lib)  # HFModelConfig.__post_init__, in the worker
    new_cfg = omega_conf_to_dataclass(OmegaConf.merge(cfg.actor_rollout_ref.actor.optim, {"total_training_steps": 4}))
    model = tiny_model(1)
    optimizer, scheduler = verl_optimizer(model, new_cfg)
    manager = FSDPCheckpointManager(model, optimizer, scheduler,
                                    checkpoint_config=cfg.actor_rollout_ref.actor.checkpoint)
    assert list(manager.checkpoint_load_contents) == ["model", "optimizer", "extra"]
    manager.load_checkpoint(str(handoff / "actor"))  # verl's _load_checkpoint: <resume_from_path>/actor

    # carried: round 2's weights, moments and step counts
    for name, p in model.named_parameters():
        assert torch.equal(p.detach(), dict(old_model.named_parameters())[name].detach()), name
        assert torch.equal(optimizer.state[p]["exp_avg"], saved_moments[name]), name
        assert float(optimizer.state[p]["step"]) == 1.0
    # this round's: every group's lr, betas and weight decay, and the scheduler's base rates
    groups = optimizer.param_groups
    assert [(g["lr"], tuple(g["betas"]), g["weight_decay"]) for g in groups] == [
        (NEW_LR, tuple(new_cfg.betas), new_cfg.weight_decay)] * len(groups)
    assert tuple(new_cfg.betas) != OLD_BETAS and new_cfg.weight_decay != OLD_DECAY
    assert scheduler.base_lrs == [NEW_LR] * len(groups)
    ran_at, logged = train_step(model, optimizer, scheduler)
    assert ran_at == logged == NEW_LR  # the step ran at the harness's knob, and verl logs what it ran at
    assert float(optimizer.state[next(model.parameters())]["step"]) == 2.0


def test_a_round_resuming_its_own_checkpoint_keeps_its_schedule(tmp_path, one_rank):
    """The carry applies to the handoff folder only: a round relaunched after a crash resumes its own checkpoint
    (``resume_mode=auto``) with the optimizer and scheduler state it saved."""
    from omegaconf import OmegaConf
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager
    from verl.utils.config import omega_conf_to_dataclass

    import rl_backend.verl.optim_carry  # noqa: F401 - installed, as in a worker of a carrying round

    shutil.copytree(REPO / "harness_repo" / "seeds" / "math", tmp_path / "harness")
    cfg = round_config(tmp_path, GRPOKnobs(learning_rate=OLD_LR), None)
    optim_cfg = omega_conf_to_dataclass(OmegaConf.merge(cfg.actor_rollout_ref.actor.optim, {
        "total_training_steps": 4, "lr_warmup_steps": 3}))
    model = tiny_model(0)
    optimizer, scheduler = verl_optimizer(model, optim_cfg)
    train_step(model, optimizer, scheduler)
    own = tmp_path / "rounds" / "3" / "train" / "ckpt" / "global_step_1" / "actor"
    FSDPCheckpointManager(model, optimizer, scheduler).save_checkpoint(str(own), global_step=1)
    again = tiny_model(1)
    optimizer2, scheduler2 = verl_optimizer(again, optim_cfg)
    FSDPCheckpointManager(again, optimizer2, scheduler2).load_checkpoint(str(own))
    # the warmup goes on from step 1 of 3, as saved (a fresh scheduler would start at lr 0)
    assert scheduler2.state_dict()["last_epoch"] == 1
    assert optimizer2.param_groups[0]["lr"] == pytest.approx(OLD_LR / 3) == scheduler.get_last_lr()[0]
