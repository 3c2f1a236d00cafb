"""Meta agents: read a round's digest, write harness interventions as git branches.

``base`` holds the seam (``Agent``, ``AgentContext``, ``Proposal``); ``recipe`` the
deterministic offline agent.  Agents never run harness code: they only write it.
"""

from meta_agent.agents.base import Agent, AgentContext, Proposal
from meta_agent.agents.recipe import RecipeAgent

__all__ = ["Agent", "AgentContext", "Proposal", "RecipeAgent"]
