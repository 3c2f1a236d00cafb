"""The Domain seam: where tasks come from and how a response is judged (trusted).

A domain owns its task source, split into train / val / held-out so that no
question can ever appear in two splits, and its verifier, which decides whether a
response is correct.  Both are trusted code: nothing in a harness repo can change
them.  The harness only chooses *which* generators train the policy (its task mix)
and how prompts are rendered.

    domain = get_domain("math")
    tasks = domain.tasks("train", [TaskSpec(name="chain_sum")], n=8, seed=0)
    score, info = domain.verify(tasks[0].data_source, "Answer: 7", tasks[0].ground_truth)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from harness_repo.contract import TaskSpec

SPLITS = ("train", "val", "heldout")


@dataclass(frozen=True)
class Task:
    """One problem of a domain.

    ``ground_truth`` is what reward functions receive (for math ``{"answer": str}``);
    ``metadata`` keeps the generator's own record (difficulty, expression, ...) for
    digests and scorers.
    """

    task_id: str
    data_source: str
    question: str
    ground_truth: dict
    split: str
    metadata: dict = field(default_factory=dict)

    def template_vars(self) -> dict:
        """The ``task`` variable policy prompt templates see.

        Deliberately without ``ground_truth`` and the generator's metadata, which can
        contain the answer: harness prompts must not be able to leak it to the policy.
        """
        return {
            "id": self.task_id,
            "name": self.metadata.get("task", self.data_source.rsplit("/", 1)[-1]),
            "data_source": self.data_source,
            "split": self.split,
            "config": dict(self.metadata.get("config", {})),
        }


@runtime_checkable
class Domain(Protocol):
    """A task source with disjoint splits and a trusted verifier.

    Example::

        tasks = domain.tasks("heldout", domain.eval_specs, n=16, seed=0)
        score, info = domain.verify(t.data_source, response, t.ground_truth)  # never raises
    """

    name: str
    eval_specs: list[TaskSpec]
    """The trusted task mix of the held-out evaluation; never taken from a harness."""

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split`` mixed by the specs' weights, deterministic for ``seed``."""
        ...

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """Trusted score in [0, 1] and an info dict; a malformed response scores 0 with the reason in info."""
        ...


def get_domain(name: str) -> Domain:
    """The domain called ``name``; ``ValueError`` naming the known domains otherwise."""
    if name == "math":
        from meta_agent.domains.math import MathDomain

        return MathDomain()
    raise ValueError(f"Unknown domain {name!r}; known domains: {', '.join(known_domains())}.")


def known_domains() -> list[str]:
    """Names :func:`get_domain` accepts."""
    return ["math"]
