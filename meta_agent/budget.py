"""Run budgets: caps on LLM tokens and cost per round and per run, and on training compute per run.

Trusted code (DESIGN §3): the harness repo cannot see or change a budget.  One
:class:`Budget` lives for a whole run; the loop persists it in ``state.json``::

    budget = Budget(BudgetCaps(run_cost_usd=5.0, round_tokens=200_000, run_compute_hours=2.0))
    while budget.can_start_round():               # every run-level cap still open
        budget.start_round(n)                     # round counters restart (not on a resumed round)
        seconds = train_round(...)
        budget.charge_compute(seconds, "gpu", devices=8)   # GPU-hours; "cpu" on the local backend
        agent.propose(ctx)                        # the LLM agent calls charge_llm / llm_allowed
    state["budget"] = budget.to_dict()            # ... and Budget.from_dict(state["budget"]) on resume

Every cap is optional; ``None`` means unlimited.  A cap is *reached* when the
spend is at or above it: the call that crosses a cap is counted in full (its cost
is known only after it returned), and nothing new starts afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

ComputeKind = Literal["cpu", "gpu"]


class BudgetExceeded(RuntimeError):
    """A cap is reached; the message names the cap, the spend and the limit."""


class BudgetCaps(BaseModel):
    """Limits for one run (all optional: ``None`` is unlimited)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_tokens: int | None = Field(None, ge=0)
    """LLM tokens (prompt + completion) over the whole run, all agents and candidates together."""
    run_cost_usd: float | None = Field(None, ge=0)
    """LLM cost in US dollars over the whole run, as LiteLLM's cost accounting reports it."""
    round_tokens: int | None = Field(None, ge=0)
    """LLM tokens in one round; at the cap the round goes on without new proposals."""
    round_cost_usd: float | None = Field(None, ge=0)
    """LLM cost in US dollars in one round."""
    run_compute_hours: float | None = Field(None, ge=0)
    """Training compute over the run: GPU-hours on a GPU backend, CPU-hours on the local backend
    (wall seconds x devices / 3600).  At the cap no new round starts."""


@dataclass
class Budget:
    """What a run has spent against its :class:`BudgetCaps`."""

    caps: BudgetCaps = field(default_factory=BudgetCaps)
    round: int | None = None
    """The round whose counters ``round_tokens`` / ``round_cost_usd`` hold."""
    run_tokens: int = 0
    run_cost_usd: float = 0.0
    round_tokens: int = 0
    round_cost_usd: float = 0.0
    compute_hours: dict[str, float] = field(default_factory=lambda: {"cpu": 0.0, "gpu": 0.0})
    """Training compute per kind; the ``run_compute_hours`` cap counts their sum."""
    on_charge: Callable[[], None] | None = field(default=None, repr=False, compare=False)
    """Called after every LLM charge; the loop saves the budget there, so a kill loses no spend."""

    # -- spending --------------------------------------------------------------------

    def start_round(self, n: int) -> None:
        """Begin round ``n``: its token and cost counters start at zero.

        Calling it again for the round already begun (a resumed run) keeps the counters.
        """
        if n != self.round:
            self.round, self.round_tokens, self.round_cost_usd = n, 0, 0.0

    def charge_llm(self, tokens: int, cost_usd: float) -> None:
        """Count one LLM call against the round and the run."""
        if tokens < 0 or cost_usd < 0:
            raise ValueError(f"cannot charge negative usage (tokens={tokens}, cost={cost_usd})")
        self.run_tokens += int(tokens)
        self.round_tokens += int(tokens)
        self.run_cost_usd += float(cost_usd)
        self.round_cost_usd += float(cost_usd)
        if self.on_charge is not None:
            self.on_charge()

    def charge_compute(self, seconds: float, kind: ComputeKind, devices: int = 1) -> None:
        """Count ``seconds`` of training wall time on ``devices`` GPUs (or CPU processes)."""
        if kind not in ("cpu", "gpu"):
            raise ValueError(f"compute kind must be 'cpu' or 'gpu', got {kind!r}")
        if seconds < 0 or devices < 1:
            raise ValueError(f"cannot charge {seconds} s on {devices} device(s)")
        self.compute_hours[kind] = self.compute_hours.get(kind, 0.0) + seconds * devices / 3600

    # -- checking --------------------------------------------------------------------

    def _spent(self) -> dict[str, float]:
        return {
            "run_tokens": self.run_tokens, "run_cost_usd": self.run_cost_usd,
            "round_tokens": self.round_tokens, "round_cost_usd": self.round_cost_usd,
            "run_compute_hours": sum(self.compute_hours.values()),
        }

    def reached(self, names: tuple[str, ...] | None = None) -> list[str]:
        """``"<cap>: spent <x> of <limit>"`` for each cap (of ``names``, default all) that is reached."""
        spent, caps = self._spent(), self.caps.model_dump()
        out = []
        for name in names or tuple(spent):
            limit = caps[name]
            if limit is not None and spent[name] >= limit:
                out.append(f"{name}: spent {spent[name]:.6g} of {limit:.6g}")
        return out

    def llm_allowed(self) -> bool:
        """True while no token or cost cap (round or run) is reached: the next LLM call may start."""
        return not self.reached(("run_tokens", "run_cost_usd", "round_tokens", "round_cost_usd"))

    def can_start_round(self) -> bool:
        """True while no run-level cap (tokens, cost, compute) is reached: the loop may start a round."""
        return not self.reached(("run_tokens", "run_cost_usd", "run_compute_hours"))

    def check_llm(self) -> None:
        """Raise :class:`BudgetExceeded` naming the cap when no further LLM call is allowed."""
        hit = self.reached(("run_tokens", "run_cost_usd", "round_tokens", "round_cost_usd"))
        if hit:
            raise BudgetExceeded("LLM budget reached (" + "; ".join(hit) + "); raise the cap in the run config")

    def remaining(self) -> dict[str, float | None]:
        """What is left under each cap (``None`` for an unlimited one; never below 0)."""
        spent, caps = self._spent(), self.caps.model_dump()
        return {k: None if caps[k] is None else max(caps[k] - spent[k], 0) for k in spent}

    # -- persistence -----------------------------------------------------------------

    def to_dict(self) -> dict:
        """JSON-serialisable state (caps included) for ``state.json``."""
        return {
            "caps": self.caps.model_dump(), "round": self.round,
            "run_tokens": self.run_tokens, "run_cost_usd": self.run_cost_usd,
            "round_tokens": self.round_tokens, "round_cost_usd": self.round_cost_usd,
            "compute_hours": dict(self.compute_hours),
        }

    @classmethod
    def from_dict(cls, data: dict, caps: BudgetCaps | None = None) -> Budget:
        """Rebuild from :meth:`to_dict`; ``caps`` (e.g. raised by the user on resume) replaces the saved ones."""
        return cls(
            caps=caps or BudgetCaps.model_validate(data.get("caps") or {}),
            round=data.get("round"),
            run_tokens=int(data.get("run_tokens", 0)), run_cost_usd=float(data.get("run_cost_usd", 0.0)),
            round_tokens=int(data.get("round_tokens", 0)), round_cost_usd=float(data.get("round_cost_usd", 0.0)),
            compute_hours={"cpu": 0.0, "gpu": 0.0}
            | {k: float(v) for k, v in (data.get("compute_hours") or {}).items()},
        )
