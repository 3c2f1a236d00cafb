"""Domains: task sources with disjoint train / val / held-out splits and trusted verifiers.

Trusted code.  A harness picks which generators train the policy and how prompts
look; it can never change a verifier, a split or the held-out evaluation mix.
"""

from domains.base import SPLITS, Domain, Task

__all__ = ["SPLITS", "Domain", "Task"]
