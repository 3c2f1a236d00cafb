"""The Backend seam: train one round of GRPO from a gated harness commit and a policy.

A backend applies the harness it is given exactly (prompts, reward, filters,
knobs), archives every rollout as a trajectory row (``trajectory.schema``), and
evaluates the new policy on the domain's held-out tasks with the domain's trusted
verifier only.  It never decides what is merged.

    backend = LocalBackend()
    result = backend.train_round(RoundSpec(run_id="r1", round=0, harness_dir=exported, harness_commit=sha,
                                           policy_in=None, out_dir=run / "rounds/0/train",
                                           domain="domains.math:MathDomain"))
    result.policy_ref        # checkpoint folder for the next round's ``policy_in``
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import importlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Protocol, runtime_checkable

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from harness_repo.contract import HarnessConfig, TaskSpec

Progress = Callable[[int, int, dict], None]
"""``progress(step, total_steps, metrics_of_that_step)``, called after every optimizer step."""

STEP_METRICS = {
    "loss": "the policy loss",
    "reward": "the mean harness reward of the step's trajectories",
    "kl": "the KL penalty against the reference policy",
    "harness/kept_trajectories": "trajectories the harness kept, which the step trained on",
    "harness/judged_trajectories": "trajectories the harness judged, where more were judged than the archive holds "
                                   "for the step (verl's sampler)",
}
"""The names under which every backend reports a step's figures (in ``RoundResult.metrics`` and to
``Progress``); the digest and the display read these, so a backend translates its trainer's own names.
A backend may add others (verl's ``critic/score/mean`` ...): they are shown, never interpreted."""


class TaskLike(Protocol):
    """What a backend uses of one task (``domains.base.Task`` is one)."""

    task_id: str
    data_source: str
    question: str
    ground_truth: dict

    def template_vars(self) -> dict:
        """The ``task`` variable the harness's prompt templates see (never the answer)."""
        ...


class DomainLike(Protocol):
    """What a backend needs from a domain (``domains`` implements it; declared here so
    that this layer never imports the one above it)."""

    name: str
    eval_specs: list[TaskSpec]
    reward_range: tuple[float, float]
    exam_max_tokens: int

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Any]:
        """``n`` tasks (``TaskLike``) of ``split``."""
        ...

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """The trusted verifier: 0.0 or 1.0 and why; never raises."""
        ...

    def exam_messages(self, task: Any) -> list[dict]:
        """The trusted held-out exam prompt for a task."""
        ...


@dataclass
class RoundSpec:
    """What one training round needs."""

    run_id: str
    round: int
    harness_dir: Path
    """Exported files of the harness commit (already gated)."""
    harness_commit: str
    policy_in: str | None
    """Previous round's checkpoint folder; ``None`` starts from the base model."""
    out_dir: Path
    """``rounds/<n>/train/``: the new policy, ``train.log`` and ``metrics.jsonl`` go here."""
    domain: str
    """Import reference ``"module:attr"`` of the domain class (``meta_agent.registry.check("domain", name)``):
    a name, not a live object, so a spec can cross a process or a Ray cluster (:meth:`to_json`)."""
    seed: int = 0
    """Seeds sampling, the training-task draw and torch; the same spec trains the same way."""
    heldout_size: int = 16
    heldout_seed: int = 0
    """Seed of the held-out draw: keep it fixed across rounds so their accuracies are comparable."""
    heldout_max_tokens: int | None = None
    """Generation budget of the held-out exam; ``None`` uses ``domain.exam_max_tokens``.  Trusted code
    fixes it, never harness.yaml: a harness raising ``max_completion_length`` cannot move the exam."""
    heldout_specs: list[TaskSpec] | None = None
    """Held-out task mix; ``None`` uses ``domain.eval_specs`` (never the harness's own mix)."""
    archive: Path | None = None
    """Root of the trajectory archive (a path, so a spec still crosses processes).  When set, the backend
    streams the round's rows into it through ``Archive.round_writer``: one part, visible only once the
    round has finished (a crash mid-round leaves nothing readable), and ``RoundResult.rollouts`` and
    ``heldout`` come back empty.  ``None``: the rows come back in the result."""
    policy_commit: str | None = None
    """The harness commit ``policy_in`` was trained under (the run's record), so a backend carrying the previous
    round's optimizer state can prove the checkpoint is that policy's; ``None`` when unknown."""


    def load_domain(self) -> DomainLike:
        """The domain :attr:`domain` names, imported and made once per process."""
        return load_domain(self.domain)

    def to_json(self) -> dict:
        """Plain data (paths as text, task specs as dicts): what another process needs to train this round."""
        data = dataclasses.asdict(self)
        data["harness_dir"], data["out_dir"] = str(self.harness_dir), str(self.out_dir)
        data["archive"] = None if self.archive is None else str(self.archive)
        if self.heldout_specs is not None:
            data["heldout_specs"] = [s.model_dump() for s in self.heldout_specs]
        return data

    @classmethod
    def from_json(cls, data: dict) -> RoundSpec:
        """Inverse of :meth:`to_json`."""
        data = dict(data, harness_dir=Path(data["harness_dir"]), out_dir=Path(data["out_dir"]))
        if data.get("archive") is not None:
            data["archive"] = Path(data["archive"])
        if data.get("heldout_specs") is not None:
            data["heldout_specs"] = [TaskSpec.model_validate(s) for s in data["heldout_specs"]]
        return cls(**data)


MAX_HARNESS_YAML_BYTES = 64 << 10


def parse_harness_yaml(harness_dir: Path) -> HarnessConfig:
    """``harness.yaml`` of an exported harness, read on the host as bounded data (never executed).

    Raises ``ValueError`` (or pydantic's, a ``ValueError`` too) saying what is wrong; each backend reports it
    as the harness's failure in its own terms."""
    path = harness_dir / "harness.yaml"
    if path.is_symlink() or path.stat().st_size > MAX_HARNESS_YAML_BYTES:
        raise ValueError(f"must be a regular file of at most {MAX_HARNESS_YAML_BYTES} bytes")
    return HarnessConfig.model_validate(yaml.safe_load(path.read_text()))


@functools.cache
def load_domain(ref: str) -> DomainLike:
    """Import ``"module:attr"`` and make the domain (domains take no arguments).  Importing by name keeps
    this layer free of imports from the one above it."""
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"domain reference {ref!r} is not 'module:attr' (e.g. 'domains.math:MathDomain')")
    return getattr(importlib.import_module(module), attr)()


@dataclass
class RoundResult:
    """What a round produced."""

    policy_ref: str
    """Checkpoint folder written this round."""
    metrics: list[dict]
    """One dict per optimizer step, with the :data:`STEP_METRICS` the backend has and any of its own."""
    rollouts: list[dict]
    """Trajectory rows (``schema.TRAJECTORY_SCHEMA`` fields) of split ``train``; empty when the spec named
    an archive (the rows are there)."""
    heldout: list[dict]
    """Trajectory rows of the held-out evaluation, split ``heldout``, ``reward`` None; empty likewise."""
    eval: dict = field(default_factory=dict)
    """``{"heldout_accuracy": float, "n": int, ...}``, scored by the domain's verifier only."""


def deliver_rows(spec: RoundSpec, rollouts: list[dict], heldout: list[dict]) -> tuple[list[dict], list[dict]]:
    """The round's rows for its ``RoundResult``: written to ``spec.archive`` as one part (and none returned)
    when the spec names an archive, else returned as they are."""
    if spec.archive is None:
        return rollouts, heldout
    from rl_backend.archive import Archive

    with Archive(spec.archive).round_writer(spec.run_id, spec.round) as writer:
        writer.write(rollouts)
        writer.write(heldout)
    return [], []


HARNESS, INFRASTRUCTURE = "harness", "infrastructure"
"""Whose failure a ``TrainingFailed`` is: the round loop restores ``main`` only for the harness's."""


class TrainingFailed(Exception):
    """A round could not train; the message names the log to read, ``party`` whose failure it was.

    ``HARNESS``: harness files or code, as the sandboxed runtime proved (it raised, timed out, judged
    nothing, or ``harness.yaml`` did not parse) -- the loop restores ``main`` to the last good harness.
    ``INFRASTRUCTURE``: the job, the GPUs, the cluster, the engine or the launch configuration -- the loop
    stops the round and keeps the harness; ``--resume`` retries the same commit.  A backend that cannot
    prove the harness failed says ``INFRASTRUCTURE``: an infrastructure fault must never revert good merges.
    """

    def __init__(self, message: str, party: str = HARNESS, log_tail: str = "", measured: dict | None = None) -> None:
        if party not in (HARNESS, INFRASTRUCTURE):
            raise ValueError(f"party must be {HARNESS!r} or {INFRASTRUCTURE!r}, not {party!r}")
        super().__init__(message)
        self.party, self.log_tail = party, log_tail
        # what the trainer measured when it refused the harness (HarnessCodeError.measured), for the loop's finding
        self.measured = measured


def infrastructure_failure(message: str, log_tail: str = "") -> TrainingFailed:
    """A ``TrainingFailed`` of the job, GPUs, cluster or engine: the harness is kept."""
    return TrainingFailed(message, party=INFRASTRUCTURE, log_tail=log_tail)


LOW_DISK_BYTES = 2 * 1024**3
"""Below this much free space, an error while a round writes is taken for a full disk: a round of the local
backend writes about 1.5 GB (the policy's weights and its optimizer state)."""


def out_of_space(exc: BaseException, folder: Path) -> TrainingFailed | None:
    """The infrastructure failure to raise when ``exc`` came from a full disk, else None: an ``OSError``
    ENOSPC in its chain, or any error while ``folder``'s filesystem has under :data:`LOW_DISK_BYTES` free
    (torch's checkpoint writer reports a full disk as a bare ``RuntimeError``)."""
    chain, seen = exc, set()
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if isinstance(chain, OSError) and chain.errno == errno.ENOSPC:
            break
        chain = chain.__cause__ or chain.__context__
    try:
        free = shutil.disk_usage(folder if Path(folder).exists() else Path(folder).parent).free
    except OSError:
        free = None
    if chain is None and (free is None or free >= LOW_DISK_BYTES):
        return None
    left = f"{free / 1024**3:.1f} GiB free" if free is not None else "free space unknown"
    return infrastructure_failure(f"the disk holding {folder} is full ({left}; {type(exc).__name__}: {exc}). "
                                  "Free space there (older rounds' policy folders are the largest files), then "
                                  "--resume: the harness is not at fault and is kept")


class HarnessCodeError(Exception):
    """Harness code or files failed during a round; ``where`` names the part."""

    def __init__(self, where: str, detail: str, measured: dict | None = None) -> None:
        self.where, self.detail = where, detail
        # a limit the trainer enforces, and what it measured against it: ``{"check": "prompt_length", "knob":
        # "max_prompt_length", "limit": 24, "lengths": [...], "needed": 8}`` (rendered prompts, real tokenizer)
        self.measured = measured
        super().__init__(f"{where}: {detail}")


class BackendOptionError(ValueError):
    """A backend was given options it cannot run with (a user error, listed in ``meta_agent.errors``); the
    message names the option and what to give instead."""


class BackendOptions(BaseModel):
    """A backend's own run options, declared by the backend: each field is a command-line option
    (``--ray-job-address`` for ``ray_job_address``) whose help is the field's docstring, a key of
    ``run.json``'s ``backend_options``, and a keyword argument of the backend's constructor.

        class LaunchOptions(BackendOptions):
            title: ClassVar[str] = "GPU training (--backend verl)"
            gpus: int = Field(1, ge=1)
            '''GPUs per node.'''

    The backend's registry line names its model; keep the model in a module that imports no torch,
    since the command line reads every backend's options to build ``--help``.  Fields are ``int``,
    ``float``, ``str`` (optionally ``None``) or a ``Literal`` of choices.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
    title: ClassVar[str] = ""
    """The heading of the options in ``--help``."""

    @classmethod
    def given(cls, backend: str, options: dict[str, Any]) -> BackendOptions:
        """``options`` as a backend's constructor got them, checked: :class:`BackendOptionError` otherwise."""
        try:
            return cls(**options)
        except ValidationError as exc:
            raise BackendOptionError(f"--backend {backend}: {exc}") from None


@runtime_checkable
class Backend(Protocol):
    """Trains one GRPO round.

    Example::

        result = backend.train_round(spec, progress=lambda step, total, m: print(step, total, m["reward"]))
    """

    name: str
    compute: str
    """What a round's training seconds are charged as against the run's compute cap: ``"cpu"`` or ``"gpu"``."""

    def train_round(self, spec: RoundSpec, progress: Progress | None = None) -> RoundResult:
        """Train ``spec``'s round and return its checkpoint, metrics, rollouts and held-out eval."""
        ...
