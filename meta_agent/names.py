"""The domain table and the lookup of registered names: the part of the registry its own entries use.

    domain = get_domain("math")                      # a fresh domains.math.MathDomain
    known_domains()                                  # ["math", "code", "swe"]
    lookup("domain", DOMAINS, "chess")               # UnknownName: "unknown domain 'chess'; available: ..."

``meta_agent.registry`` names the agents, and the recipe agent makes a domain by the name a harness gives, so
the domain half of the registry sits here, below both (an agent importing the registry would import, through
the registry's names, itself).  ``meta_agent.registry`` adds the backends and agents and makes them.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from meta_agent.errors import UserError

if TYPE_CHECKING:
    from domains.base import Domain

DOMAINS: dict[str, str | None] = {
    "math": "domains.math:MathDomain",
    "code": "domains.code:CodeDomain",
    "swe": "domains.swe:SweDomain",
}


class UnknownName(UserError):
    """A name that is not registered, or planned and not built yet; the message lists the available ones."""


def built(table: Mapping[str, object]) -> list[str]:
    """The names of ``table`` that are built (mapped to a target, not ``None``)."""
    return [name for name, target in table.items() if target is not None]


def planned_in(table: Mapping[str, object]) -> list[str]:
    """The names of ``table`` that are planned but not built yet."""
    return [name for name, target in table.items() if target is None]


def lookup(kind: str, table: Mapping[str, Any], name: str) -> Any:
    """``table[name]`` for a built ``name`` of ``kind``; :class:`UnknownName` otherwise.  Imports nothing."""
    offer = f"available: {', '.join(built(table))}"
    if name not in table:
        offer += f" (planned: {', '.join(planned_in(table))})" if planned_in(table) else ""
        raise UnknownName(f"unknown {kind} {name!r}; {offer}")
    target = table[name]
    if target is None:
        raise UnknownName(f"{kind} {name!r} is not available yet; {offer}")
    return target


def import_target(target: str) -> Any:
    """The attribute a ``"module:attr"`` target names, its module imported now."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def get_domain(name: str) -> Domain:
    """The domain called ``name`` (:data:`DOMAINS`), a fresh instance; ``UnknownName``, a user error
    listing the available domains, otherwise."""
    return import_target(lookup("domain", DOMAINS, name))()


def known_domains() -> list[str]:
    """Names :func:`get_domain` accepts."""
    return built(DOMAINS)
