"""Validate a round's overrides before paying for GPUs: verl's own Hydra config and validators, then our checks.

    result = validate_overrides(overrides)
    result.ok, result.problems        # (False, ["rollout.name='foo' is not one of sglang, trtllm, vllm", ...])

Runs on a CPU machine with ``pip install .[verl]`` (verl 0.9.1 and ``verl[verl-core]``): the
overrides are composed with ``verl/trainer/config/ppo_trainer.yaml`` exactly as
``verl.trainer.main_ppo`` would, mandatory ``???`` keys are reported, the config is resolved,
and ``verl.utils.config.validate_config`` runs as ``main_ppo.main`` runs it.  Then what verl
only finds out after Ray has started, or never (reference §9 and §13): rollout engine, loggers,
advantage estimator, agent loop names, tensor parallelism dividing the GPUs, batch divisibility,
the legacy reward keys verl 0.9 silently ignores, a group-filter metric the reward never returns,
a custom sampler that would silently drop ``algorithm.filter_groups``, the metrics file's folder,
the reward file loading through verl's own loader, and a multi-node job without a Ray cluster.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REWARD_KEYS = ("score", "verified", "keep", "harness_error")
"""What ``reward_entry.compute_score`` returns, hence the reward extra info a filter metric may name."""
LEGACY_KEYS = ("custom_reward_function", "reward_model", "sandbox_fusion")


@dataclass
class Validation:
    """The outcome of :func:`validate_overrides`; ``problems`` say what is wrong and what to set."""

    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        if self.ok:
            return f"VALID (verl's validators and ours, {self.seconds:.1f}s)"
        return "INVALID:\n" + "\n".join(f"  - {p}" for p in self.problems)


def compose(overrides: list[str]) -> Any:
    """verl's ``ppo_trainer`` config with ``overrides`` applied (Hydra's ``hydra.*`` keys left out)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    import verl.trainer.main_ppo

    config_dir = str(Path(verl.trainer.main_ppo.__file__).parent / "config")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer",
                             overrides=[o for o in overrides if not o.startswith("hydra.")])


def validate_overrides(overrides: list[str], ray_address: str | None = None,
                       creates: tuple[Path, ...] = ()) -> Validation:
    """Compose and check ``overrides`` for a job joining ``ray_address`` (else ``RAY_ADDRESS``), whose launcher
    makes the folders ``creates`` first; a bad configuration is reported, never raised."""
    started = time.monotonic()
    result = Validation()
    try:
        import verl  # noqa: F401  (installed or not is the question)
    except ImportError:
        result.problems.append("verl is not installed in this environment: `pip install .[verl]` (verl 0.9.1), "
                               "or run this from .venv-verl")
        return result
    try:
        cfg = compose(overrides)
    except Exception as exc:  # noqa: BLE001 - Hydra's composition errors are the report
        result.problems.append(f"compose: {type(exc).__name__}: {exc}")
        result.seconds = time.monotonic() - started
        return result
    from omegaconf import OmegaConf

    missing = sorted(OmegaConf.missing_keys(cfg))
    if missing:
        result.problems.append(f"mandatory keys not set: {missing}")
    else:
        result.problems += _verl_checks(cfg)
        result.problems += _our_checks(cfg, overrides, ray_address or os.environ.get("RAY_ADDRESS"), creates)
    result.seconds = time.monotonic() - started
    return result


def _verl_checks(cfg: Any) -> list[str]:
    """What ``main_ppo.main`` runs before Ray starts, plus the dataclass conversions verl does later."""
    from omegaconf import OmegaConf

    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    problems = []
    try:
        OmegaConf.resolve(cfg)
        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
        omega_conf_to_dataclass(cfg.algorithm)
    except Exception as exc:  # noqa: BLE001
        problems.append(f"validate_config: {type(exc).__name__}: {exc}")
    try:
        from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER

        name = cfg.reward.reward_manager.name
        if cfg.reward.reward_manager.get("source", "register") == "register" and name not in REWARD_MANAGER:
            problems.append(f"unknown reward manager {name!r}; verl 0.9.1 has {', '.join(sorted(REWARD_MANAGER))}")
        if get_custom_reward_fn(cfg) is None:
            problems.append("reward.custom_reward_function.path is not set: verl would use its rule-based default")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"reward function: {type(exc).__name__}: {exc}")
    return problems


def _registries() -> dict[str, set[str]]:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY
    from verl.utils.tracking import Tracking
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    return {"engine": set(RolloutReplicaRegistry._registry), "logger": set(Tracking.supported_backend),
            "adv": set(ADV_ESTIMATOR_REGISTRY), "agent": set(_agent_loop_registry)}


def _our_checks(cfg: Any, overrides: list[str], ray_address: str | None, creates: tuple[Path, ...]) -> list[str]:
    """What verl does not check before Ray starts (reference §9, §13)."""
    import yaml

    reg, problems = _registries(), []
    rollout, trainer, data = cfg.actor_rollout_ref.rollout, cfg.trainer, cfg.data
    if rollout.name not in reg["engine"]:
        problems.append(f"rollout.name={rollout.name!r} is not one of {', '.join(sorted(reg['engine']))}")
    loggers = [trainer.logger] if isinstance(trainer.logger, str) else list(trainer.logger)
    if unknown := [x for x in loggers if x not in reg["logger"]]:
        problems.append(f"unknown trainer.logger {unknown}; verl has {', '.join(sorted(reg['logger']))}")
    if cfg.algorithm.adv_estimator not in reg["adv"]:
        problems.append(f"unknown algorithm.adv_estimator {cfg.algorithm.adv_estimator!r}")
    n_gpus = trainer.n_gpus_per_node * trainer.nnodes
    tp = rollout.tensor_model_parallel_size * rollout.get("data_parallel_size", 1) * rollout.get(
        "pipeline_model_parallel_size", 1)
    if n_gpus % tp:
        problems.append(f"rollout TP*DP*PP={tp} does not divide the {n_gpus} GPUs")
    if (data.train_batch_size * rollout.n) % n_gpus:
        problems.append(f"data.train_batch_size*rollout.n = {data.train_batch_size}*{rollout.n} trajectories per step "
                        f"is not divisible by the {n_gpus} GPUs; change prompts_per_step or group_size, or --gpus")
    mini = cfg.actor_rollout_ref.actor.ppo_mini_batch_size
    if mini > data.train_batch_size:
        problems.append(f"data.train_batch_size ({data.train_batch_size}) must be >= "
                        f"actor.ppo_mini_batch_size ({mini})")
    if legacy := [k for k in LEGACY_KEYS if any(o.lstrip("+").startswith(k + ".") for o in overrides)]:
        problems.append(f"legacy key(s) {', '.join(k + '.*' for k in legacy)} are set but ignored by verl 0.9.x; "
                        "use reward.custom_reward_function.* / reward.*")
    problems += _filter_checks(cfg)
    agents = set(reg["agent"])
    config_path = rollout.agent.get("agent_loop_config_path")
    if config_path:
        try:
            agents |= {entry["name"] for entry in yaml.safe_load(Path(config_path).read_text())}
        except (OSError, TypeError, KeyError, yaml.YAMLError) as exc:
            problems.append(f"agent_loop_config_path {config_path}: unreadable ({exc})")
    if rollout.agent.default_agent_loop not in agents:
        problems.append(f"unknown rollout.agent.default_agent_loop {rollout.agent.default_agent_loop!r}; "
                        f"registered: {', '.join(sorted(agents))}")
    env = cfg.get("ray_kwargs", {}).get("ray_init", {}).get("runtime_env", {}).get("env_vars", {})
    metrics = env.get("VERL_FILE_LOGGER_PATH")
    folder = Path(metrics).parent if metrics else None
    if "file" in loggers and folder and not folder.is_dir() and folder not in creates:
        problems.append(f"the metrics file's folder {folder} does not exist (verl's file logger "
                        "does not create it)")
    if trainer.nnodes > 1 and not ray_address:
        problems.append(f"trainer.nnodes={trainer.nnodes} needs a Ray cluster: set RAY_ADDRESS (--ray-address)")
    train = Path(str(data.train_files))
    if train.is_file():
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(train).metadata.num_rows
        if rows < data.train_batch_size:
            problems.append(f"{train} has {rows} rows, fewer than data.train_batch_size={data.train_batch_size}")
    return problems


def _filter_checks(cfg: Any) -> list[str]:
    """The group filter names a metric the reward returns, and reaches the sampler that owns filtering."""
    problems = []
    groups = cfg.algorithm.get("filter_groups") or {}
    if not groups.get("enable"):
        return problems
    metric = groups.get("metric")
    if metric != "reward" and metric not in REWARD_KEYS:
        problems.append(f"algorithm.filter_groups.metric={metric!r} is never returned by the reward entry "
                        f"(it returns {', '.join(REWARD_KEYS)}; 'reward' is the summed score): verl would fail at "
                        "sampling time")
    sampler = cfg.trainer.v1.sampler
    if sampler.custom_sampler.get("path") and sampler.get("sampler_kwargs", {}).get("filter_groups_metric") != metric:
        problems.append("algorithm.filter_groups is enabled but a custom sampler is set: verl hands the filter only "
                        "to its built-in sampler, so set +trainer.v1.sampler.sampler_kwargs.filter_groups_metric="
                        f"{metric} or the groups would train unfiltered")
    return problems
