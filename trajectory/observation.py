"""A tool environment's step and what it returned: the seam of multi-turn episodes (SWE agent mode).

``swe_env`` implements it (``swe_env.agent_env.BashEnvironment``), a domain hands one out
(``environment(task, limits)``) and the backends that drive agents (verl's agent loop, the endpoint backend)
use it; it sits in the bottom layer so that all three can import it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass
class Observation:
    """What one action in a tool environment returned."""

    output: str
    """Combined stdout and stderr, already truncated to the environment's limit."""
    returncode: int
    truncated: bool = False
    done: bool = False
    """The episode ended with this action (the policy submitted, or a step, time or output limit was hit)."""


class ToolEnvironment(Protocol):
    """A multi-turn episode in a task's own sandbox (SWE agent mode): one instance per trajectory.

    Single-turn domains (math, code, SWE patch mode) need none: the backend generates one response
    per prompt and the domain's verifier judges it.  Backends that drive agents (verl's agent loop)
    use it like this::

        env = domain.environment(task, limits)     # nothing started yet
        try:
            first = env.start()                     # starts the container; the task statement
            while not obs.done: obs = env.step(action_from_policy)
            outcome = env.result()                  # submitted patch, exit status, trusted grading
        finally:
            env.close()                             # always removes the container
    """

    def start(self) -> str:
        """Start the sandbox; the first observation shown to the policy."""
        ...

    def step(self, action: str) -> Observation:
        """Run one action (for SWE: one bash command) and return what it printed."""
        ...

    def result(self) -> dict:
        """The episode's outcome: at least ``exit_status``, ``patch``, ``verified`` and ``verifier_info``."""
        ...

    def close(self) -> None:
        """Remove everything the episode started; safe to call twice."""
        ...
