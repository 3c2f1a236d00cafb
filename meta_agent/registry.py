"""Every domain, backend and agent by name: the one place where a new one is added, in one line (a domain's in
``meta_agent.names.DOMAINS``).

    domain = make_domain("math")
    backend = make_backend(config.backend, config, sandbox)        # config: RunConfig
    backend_options("verl").model_fields                           # {"gpus": ..., "nodes": ..., ...}
    agent = make_agent(config.agent, config, budget, sandbox)
    check("backend", "verl")    # UnknownName: "backend 'verl' is not available yet; available: local"

A value is ``"module:attr"``, imported only when the thing is made, so importing this module or
checking a name pulls in no torch.  A name mapped to ``None`` is planned but not built: asking for
it is an error listing what is available, never a silent fallback.  Building one means replacing
its ``None`` with the ``"module:attr"`` of an implementation that follows its kind's constructor:

- a domain takes no arguments;
- a backend takes ``base_model`` (a model folder, ``None`` for its default), ``sandbox``, and its own
  options as keywords.  A backend with options is registered as ``BackendEntry("module:Class",
  "module:Options")``: the second names its ``rl_backend.base.BackendOptions`` model, which the command
  line turns into options and ``run.json`` records (``backend_options``), so adding a backend touches
  neither;
- an agent takes whichever of ``model``, ``api_base``, ``max_steps``, ``budget`` and ``sandbox``
  its ``__init__`` names (the recipe agent none, the LLM agent all).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from meta_agent.names import DOMAINS, UnknownName, built, import_target, lookup, planned_in

if TYPE_CHECKING:
    from meta_agent.budget import Budget
    from rl_backend.base import BackendOptions
    from sandboxes.base import Sandbox

__all__ = ["AGENTS", "BACKENDS", "DOMAINS", "KINDS", "BackendEntry", "UnknownName", "RunOptions", "agent_options",
           "available", "backend_options", "check", "load", "make_agent", "make_backend", "make_domain", "planned"]


class BackendEntry(NamedTuple):
    """A backend that takes options of its own."""

    target: str
    """``"module:Class"`` of the backend."""
    options: str
    """``"module:Model"`` of its ``BackendOptions``, in a module that imports no torch (``--help`` reads it)."""


BACKENDS: dict[str, str | BackendEntry | None] = {
    "local": "rl_backend.local:LocalBackend",
    "verl": BackendEntry("rl_backend.verl.backend:VerlBackend", "rl_backend.verl.config:LaunchOptions"),
    "endpoint": BackendEntry("rl_backend.endpoint:EndpointBackend", "rl_backend.endpoint:EndpointOptions"),
}
AGENTS: dict[str, str | None] = {
    "recipe": "meta_agent.agents.recipe:RecipeAgent",
    "llm": "meta_agent.agents.llm:LLMAgent",
}
KINDS = {"domain": DOMAINS, "backend": BACKENDS, "agent": AGENTS}

AGENT_OPTIONS = {"model": "model", "api_base": "api_base", "max_steps": "max_agent_steps"}
"""Agent constructor keyword -> the ``RunConfig`` field (and ``--option``) that fills it."""


class RunOptions(Protocol):
    """What the makers read of a run's configuration (``meta_agent.run_config.RunConfig`` is one; declared here
    because ``run_config`` validates its names against this registry)."""

    model_path: str | None
    backend_options: dict[str, Any]
    model: str | None
    api_base: str | None
    max_agent_steps: int


def available(kind: str) -> list[str]:
    """The built names of ``kind`` ("domain", "backend" or "agent")."""
    return built(KINDS[kind])


def planned(kind: str) -> list[str]:
    """The names of ``kind`` that are planned but not built yet."""
    return planned_in(KINDS[kind])


def check(kind: str, name: str) -> str:
    """The ``"module:attr"`` registered for ``name``; :class:`UnknownName` otherwise.  Imports nothing."""
    target = lookup(kind, KINDS[kind], name)
    return target.target if isinstance(target, BackendEntry) else target


def load(kind: str, name: str) -> Any:
    """The class (or factory) registered for ``name``, imported now."""
    return import_target(check(kind, name))


def backend_options(name: str) -> type[BackendOptions]:
    """The options model of backend ``name`` (the field-less ``BackendOptions`` for one that takes none)."""
    check("backend", name)
    entry = BACKENDS[name]
    if isinstance(entry, BackendEntry):
        return import_target(entry.options)
    from rl_backend.base import BackendOptions

    return BackendOptions


def make_domain(name: str) -> Any:
    """A fresh instance of the domain ``name`` (a ``domains.base.Domain``)."""
    return load("domain", name)()


def make_backend(name: str, config: RunOptions, sandbox: Sandbox | None) -> Any:
    """The training backend ``name`` on the run's base model; harness code runs in ``sandbox``."""
    return load("backend", name)(base_model=config.model_path, sandbox=sandbox, **config.backend_options)


def agent_options(name: str) -> dict[str, bool]:
    """The ``RunConfig`` fields agent ``name`` takes (see :data:`AGENT_OPTIONS`), each with whether it is required.

    Lets the CLI refuse ``--model`` for an agent that takes none, and ask for it where it is needed.
    """
    params = inspect.signature(load("agent", name)).parameters
    return {field: params[keyword].default is inspect.Parameter.empty
            for keyword, field in AGENT_OPTIONS.items() if keyword in params}


def make_agent(name: str, config: RunOptions, budget: Budget, sandbox: Sandbox | None) -> Any:
    """The agent ``name`` with those of the run's options it takes, sharing the run's ``budget`` and ``sandbox``."""
    cls = load("agent", name)
    params = inspect.signature(cls).parameters
    offered = {keyword: getattr(config, field) for keyword, field in AGENT_OPTIONS.items()}
    offered |= {"budget": budget, "sandbox": sandbox}
    return cls(**{keyword: value for keyword, value in offered.items() if keyword in params})
