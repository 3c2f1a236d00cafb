"""Domains: task sources with disjoint train / val / held-out splits and trusted verifiers.

Trusted code.  A harness picks which generators train the policy and how prompts
look; it can never change a verifier, a split or the held-out evaluation mix.
"""

from meta_agent.domains.base import SPLITS, Domain, Task, get_domain, known_domains

__all__ = ["SPLITS", "Domain", "Task", "get_domain", "known_domains"]
