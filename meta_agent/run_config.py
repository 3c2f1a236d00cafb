"""The run's configuration, as ``run.json`` holds it: what the run is and every trusted number it uses.

    config = RunConfig(run_id="math-1")                  # defaults for everything else
    save_run_config(rd.run_json, config)
    config = load_run_config(rd.run_json)                # RunConfigError naming the file and the field
    config = config.updated({"budget": {"run_cost_usd": 5.0}})   # a new, validated RunConfig

The command line builds one (``meta_agent.run_cli``) and the round loop is built from it.  A
``run.json`` written before the gate, tripwire and evaluation were recorded still loads: what it
lacks takes the defaults, which are the values such a run used.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from meta_agent import registry
from meta_agent.budget import BudgetCaps
from meta_agent.config import BacktestSettings, EvaluationSettings, GateThresholds, TripwireThresholds
from meta_agent.errors import UserError
from meta_agent.run_dir import not_a_run_message, write_json_atomic
from rl_backend.gpu_profile import GPU_SEED_PROFILE, seed_profile_for  # noqa: F401  (beside the GPU backends)


class RunConfigError(UserError):
    """``run.json`` cannot be used; the message names the file, the field and what to do."""


LEGACY_BACKEND_FIELDS = ("gpus", "nodes", "ray_address", "ray_job_address", "policy_api_base", "policy_model")
"""Top-level ``run.json`` fields of backend options, before ``backend_options`` held them."""


class LineSource(BaseModel):
    """The harness branch a run line started from."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: str
    """The run folder whose harness repo holds the branch."""
    branch: str
    """The branch that became this run's ``main``."""


class RunConfig(BaseModel):
    """One run: its components by registry name, its length, and the trusted numbers it is judged by."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    run_id: str = Field(min_length=1)
    """The run's name (its folder's name); the ``run_id`` of every trajectory it archives."""
    domain: str = "math"
    """Task domain, a name in ``meta_agent.registry.DOMAINS``."""
    backend: str = "local"
    """Training backend, a name in ``meta_agent.registry.BACKENDS``."""
    agent: str = "recipe"
    """Meta agent, a name in ``meta_agent.registry.AGENTS``."""
    model: str | None = None
    """LiteLLM model string of an LLM agent (e.g. ``openai/gpt-4o-mini``); ``None`` for an offline agent."""
    api_base: str | None = None
    """OpenAI-compatible endpoint of the LLM agent's model; ``None`` for the provider's own."""
    model_path: str | None = None
    """The policy's base model, a local Hugging Face model folder; ``None`` for the backend's default."""
    backend_options: dict[str, Any] = Field(default_factory=dict, validate_default=True)
    """The backend's own options (its ``rl_backend.base.BackendOptions``, e.g. verl's ``gpus``), every field
    recorded with the value the run used."""
    harness_path: str | None = None
    """An existing harness repo the run uses instead of its own ``harness/`` (read by ``RunDir.harness``)."""
    rounds: int = Field(3, ge=0)
    """Rounds in the whole run; a finished run can be resumed with more."""
    candidates: int = Field(2, ge=0)
    """Interventions the agent may propose per round; 0 trains and evaluates without proposing."""
    max_agent_steps: int = Field(30, ge=1)
    """Tool calls per candidate of an LLM agent."""
    rollback: bool = True
    """After a round whose exam fell below its starting policy's, train the next round from that policy again
    (``meta_agent.run.lineage``); ``False`` keeps training the fallen policy."""
    gate: GateThresholds = GateThresholds()
    """When a candidate harness may replace ``main`` (trusted: no harness can move it)."""
    tripwire: TripwireThresholds = TripwireThresholds()
    """When a round's live figures count as a regression that reverts merges."""
    backtest: BacktestSettings = BacktestSettings()
    """The backtest's sample and the sandbox limits of harness code in it."""
    evaluation: EvaluationSettings = EvaluationSettings()
    """The held-out exam after every round."""
    budget: BudgetCaps = BudgetCaps()
    """LLM token and cost caps, per round and per run, and the run's training compute cap."""
    seed_profile: dict[str, Any] | None = None
    """The GRPO knobs the seed harness was given for this run's hardware (:data:`GPU_SEED_PROFILE` when the backend
    trains on GPUs), as committed on ``main`` when the run was created; ``None``: the seed's own CPU-sized knobs."""
    from_: LineSource | None = Field(None, alias="from")
    """The branch of another run this run line started from; ``None`` for a fresh seed harness."""
    created: float | None = None
    """Unix time the run was created (``None`` in files that did not record it)."""
    draw_seed: int | None = Field(None, ge=0)
    """``None`` (the default): each round's training tasks are drawn with a seed from the run's secret
    (``runs/<name>/.draw-secret``), which no agent or harness can read.  A number: round n draws with the public
    seed ``n + 1000 * draw_seed``, as every run did before; predictable, for benchmarks that reproduce exact
    figures (``--draw-seed 0`` repeats the earlier runs' draws)."""

    @field_validator("domain", "backend", "agent")
    @classmethod
    def _registered(cls, name: str, info) -> str:
        try:
            registry.check(info.field_name, name)
        except registry.UnknownName as exc:  # pydantic reports a ValueError against the field
            raise ValueError(str(exc)) from None
        return name

    @model_validator(mode="before")
    @classmethod
    def _backend_options_at_top_level(cls, data: Any) -> Any:
        """A ``run.json`` written before backends declared their options kept verl's and the endpoint's at
        the top level: they move into ``backend_options``; those its backend does not take were never used."""
        if not isinstance(data, dict) or not data.keys() & LEGACY_BACKEND_FIELDS:
            return data
        data = dict(data)
        moved = {key: data.pop(key) for key in LEGACY_BACKEND_FIELDS if key in data}
        try:
            takes = registry.backend_options(data.get("backend", "local")).model_fields
        except registry.UnknownName:
            return data  # the backend field reports it
        data["backend_options"] = {key: value for key, value in moved.items()
                                   if key in takes and value is not None} | dict(data.get("backend_options") or {})
        return data

    @field_validator("backend_options")
    @classmethod
    def _backend_takes(cls, options: dict[str, Any], info) -> dict[str, Any]:
        if "backend" not in info.data:
            return options  # the backend's own error says why
        model = registry.backend_options(info.data["backend"])
        try:
            return model.model_validate(options).model_dump(mode="json")
        except ValidationError as exc:
            raise ValueError(f"backend {info.data['backend']}: " + describe(exc)) from None

    def updated(self, changes: dict[str, Any]) -> RunConfig:
        """A validated copy with ``changes`` merged in (nested dicts merge: ``{"budget": {"round_tokens": 9}}``)."""
        return RunConfig.model_validate(_merge(self.to_json(), changes))

    def to_json(self) -> dict[str, Any]:
        """What ``run.json`` holds (``from`` spelled as in the file)."""
        return self.model_dump(mode="json", by_alias=True)


GPU_BACKENDS = frozenset({"verl"})
"""Backends whose rounds train on GPUs: a new run of one starts from :data:`GPU_SEED_PROFILE`."""


GPU_EXAM_MAX_TOKENS = 4096
"""The exam's budget per answer on GPUs: above the training length, so the exam measures what the policy knows,
not how often a thinking model is cut off; the run records it (``evaluation.heldout_max_tokens``), never the
harness."""


def with_seed_profile(config: RunConfig) -> RunConfig:
    """``config`` with the GPU seed profile and exam budget recorded when its backend trains on GPUs and the run
    starts from a seed (not from another run's branch); given exam budgets are kept."""
    if config.backend not in GPU_BACKENDS or config.from_ is not None or config.seed_profile is not None:
        return config
    changes: dict[str, Any] = {"seed_profile": dict(seed_profile_for(config.domain))}  # SWE: its own
    if config.evaluation.heldout_max_tokens is None:
        changes["evaluation"] = {"heldout_max_tokens": GPU_EXAM_MAX_TOKENS}
    return config.updated(changes)


def profiled_harness_yaml(text: str, profile: dict[str, Any]) -> str:
    """A seed ``harness.yaml`` with ``profile``'s GRPO knobs (lengths never below the seed's own)."""
    import yaml

    data = yaml.safe_load(text)
    grpo = dict(data.get("grpo") or {})
    for knob, value in profile.items():
        keep_longer = knob.startswith("max_") and isinstance(grpo.get(knob), int)
        grpo[knob] = max(grpo[knob], value) if keep_longer else value
    data["grpo"] = grpo
    return yaml.safe_dump(data, sort_keys=False)


def apply_seed_profile(repo: Any, config: RunConfig) -> None:
    """Commit ``config.seed_profile`` onto the new run's seed harness (``main``), if it has one."""
    if config.seed_profile is None:
        return
    text = profiled_harness_yaml(repo.read_file("main", "harness.yaml"), config.seed_profile)
    repo.commit_files({"harness.yaml": text}, f"GPU seed profile for --backend {config.backend}: "
                      "batch, group, response length and steps sized for a 1-8B model (run.json: seed_profile)")


def _merge(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in changes.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def problems(error: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    """``(field path, what is wrong)`` for each error of ``error``."""
    return [(tuple(err["loc"]), str(err["ctx"]["error"]) if err["type"] == "value_error" else err["msg"])
            for err in error.errors()]


def describe(error: ValidationError) -> str:
    """``field.path: what is wrong`` for each error, joined: a message that names the fields."""
    return "; ".join(f"{'.'.join(map(str, loc)) or '(the whole file)'}: {what}" for loc, what in problems(error))


def load_run_config(path: Path) -> RunConfig:
    """The run configuration in ``path``; :class:`RunConfigError` saying what is wrong and what to do."""
    fix = "fix it by hand, or start a new run in another --run-dir"
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise RunConfigError(not_a_run_message(path.parent)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RunConfigError(f"{path} is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno}); "
                             f"{fix}") from None
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise RunConfigError(f"{path} is not a valid run configuration: {describe(exc)}; {fix}") from None


def save_run_config(path: Path, config: RunConfig) -> None:
    """Write ``config`` to ``path`` atomically."""
    write_json_atomic(path, config.to_json())
