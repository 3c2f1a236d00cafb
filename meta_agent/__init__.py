"""meta_agent: the controller that co-evolves an RL policy and its training harness.

Owns the CLI (``python -m meta_agent``), the round loop and its persisted state,
digests, the gate's decision logic, skills, budgets, agents and domains.  It is
trusted code: it must never import or execute harness code in-process, except
inside a training job for a harness commit that already passed the gate.
"""
