"""The Domain seam: where tasks come from and how a response is judged (trusted).

A domain owns its task source, split into train / val / held-out so that no
question can ever appear in two splits, and its verifier, which decides whether a
response is correct.  It also owns the held-out exam (prompt and generation budget)
and the facts the gate checks a harness against: which tasks exist, the range a
reward may take, and whether a rendered prompt leaks the answer.  All of it is
trusted code: nothing in a harness repo can change it.  The harness only chooses
*which* generators train the policy (its task mix) and how training prompts are
rendered.

    domain = MathDomain()                      # meta_agent.names.get_domain("math") by name
    tasks = domain.tasks("train", [TaskSpec(name="chain_sum")], n=8, seed=0)
    score, info = domain.verify(tasks[0].data_source, "Answer: 7", tasks[0].ground_truth)
    messages = domain.exam_messages(tasks[0])  # the held-out exam's prompt, not a harness's
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, runtime_checkable

from harness_repo.contract import TaskSpec
from sandboxes.base import GraderUnavailable
from swe_env.tasks import TaskNotReady

T = TypeVar("T")
GRADE_ATTEMPTS = 2

SPLITS = ("train", "val", "heldout")


def run_grader(grade: Callable[[], T], what: str) -> T:
    """``grade()``, tried once more if it raises; then ``GraderUnavailable`` naming ``what`` and the cause.

    A trusted grader never raises for what an answer does (``execution.container.run_plan``, ``swe_env.grade``):
    an exception is the engine's, so the answers are not scored 0 (that would blame the policy in an exam and
    the harness in a probe) but the command stops, and running it again (``--resume``) grades them.  A SWE task
    whose image is not built keeps its own message (``TaskNotReady`` says how to build it).
    """
    for attempt in range(1, GRADE_ATTEMPTS + 1):
        try:
            return grade()
        except TaskNotReady:
            raise
        except Exception as exc:  # noqa: BLE001 - see the docstring: the engine, not the answer
            if attempt == GRADE_ATTEMPTS:
                raise GraderUnavailable(
                    f"the {what} grader failed {GRADE_ATTEMPTS} times ({type(exc).__name__}: {str(exc)[:300]}); "
                    "no answer was scored and nothing is blamed on the harness. Check the Docker engine "
                    "(`docker info`; `bash scripts/start_docker.sh` starts one), then run the command again "
                    "(`--resume` continues a run)") from exc
    raise AssertionError("unreachable")


def paid_cut(reward_range: tuple[float, float], high: float = 0.5) -> float:
    """The raw reward at or above which a trajectory counts as *paid* (hack and miss rates).

    ``high`` of the way from the range's "nothing" point to its top: the low end, or 0 when the
    range straddles 0 (SWE's -1..1 pays -1 for a malformed answer and 0 for an unresolved one:
    neither is paid, so the cut is 0.5, not the midpoint 0).  Math's 0..1 gives 0.5 either way.
    """
    lo, hi = reward_range
    base = 0.0 if lo < 0.0 < hi else lo
    return base + high * (hi - base)


def normalised_paid_cut(reward_range: tuple[float, float], high: float = 0.5) -> float:
    """:func:`paid_cut` on the gate's [0, 1] scale (rewards mapped linearly from ``reward_range``)."""
    lo, hi = reward_range
    return (paid_cut(reward_range, high) - lo) / (hi - lo)


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
        contain the answer, and without the task's id or split: an id keys a lookup (a template
        that knows which ids the archive holds can leak the answer everywhere else), and a prompt
        needs neither.  ``meta_agent.prompt_checks.TEMPLATE_VARS`` names these keys.
        """
        return {
            "name": self.metadata.get("task", self.data_source.rsplit("/", 1)[-1]),
            "data_source": self.data_source,
            "config": dict(self.metadata.get("config", {})),
        }


@runtime_checkable
class Domain(Protocol):
    """A task source with disjoint splits and a trusted verifier.

    Example::

        tasks = domain.tasks("heldout", domain.eval_specs, n=16, seed=0)
        prompt = domain.exam_messages(tasks[0])  # generate at most domain.exam_max_tokens
        score, info = domain.verify(t.data_source, response, t.ground_truth)  # never raises
    """

    name: str
    eval_specs: list[TaskSpec]
    """The trusted task mix of the held-out evaluation; never taken from a harness."""
    task_names: tuple[str, ...]
    """The generators a harness may put in its task mix, e.g. ``("chain_sum", "products", ...)``."""
    reward_range: tuple[float, float]
    """``(low, high)`` a harness reward may take in this domain; the gate refuses rewards outside it."""
    exam_max_tokens: int
    """The held-out exam's generation budget per response (trusted, never the harness's knob)."""

    def tasks(self, split: str, specs: list[TaskSpec], n: int, seed: int) -> list[Task]:
        """``n`` tasks of ``split`` mixed by the specs' weights, deterministic for ``seed``."""
        ...

    def check_task_specs(self, specs: list[TaskSpec]) -> None:
        """``ValueError`` naming what is wrong (unknown task, bad knob) before any generation.

        Cheap, so the host can refuse a harness.yaml before training::

            domain.check_task_specs(config.tasks)
        """
        ...

    def verify(self, data_source: str, response: str, ground_truth: dict) -> tuple[float, dict]:
        """Trusted score in [0, 1] and an info dict with ``reason``; a malformed response scores 0. Never raises."""
        ...

    def exam_messages(self, task: Task) -> list[dict]:
        """The trusted held-out exam prompt for ``task``: chat messages built in plain Python.

        Example::

            messages = domain.exam_messages(task)  # [{"role": "system", ...}, {"role": "user", ...}]
        """
        ...

    def leaks_answer(self, text: str, ground_truth: dict) -> bool:
        """Whether a rendered prompt ``text`` reveals the gold answer of ``ground_truth`` as a standalone token.

        The question alone may already contain it, so compare with ``leaks_answer(task.question, ...)``.
        """
        ...
