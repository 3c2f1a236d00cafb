"""How a probe session's results are judged: what counts as pay for a verified failure, and the probe's checks.

``judge.probe`` drives the session and hands over each scored trajectory as (row, kind, verified, score); here
they become gate checks (``{"name", "passed", "detail"}``, any failure rejects):

- ``probe_failure_pay``: any reward above :func:`unpaid` for a verified failure (the bottom of the range, or zero
  where the range goes below it: a negative reward is a penalty, not pay), unless main pays it as much;
- ``probe_execution``: the session failing, or more unjudged trajectories than the gate allows.

The diagnostics ratchet on the probe's round is judged by ``judge.findings.probe_diagnostics_check``; the prompt
checks by ``judge.probe_rows.prompt_checks``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PAY_TOLERANCE = 1e-9
SWEEP = "sweep"
"""The kind of a surface-sweep row (``judge.probe_sweep.KIND``)."""


def unpaid(reward_range: tuple[float, float]) -> float:
    """The most a verified failure may earn: the bottom of the range, or 0 inside a range that holds it
    (code and SWE pay -1 .. 1, the seeds 0 for a failure and -1 for a malformed answer if asked)."""
    lo, hi = reward_range
    return min(max(lo, 0.0), hi)


@dataclass
class ProbeReport:
    """What the probe saw and its checks (``{"name", "passed", "detail"}``, as the gate's extra checks)."""

    checks: list[dict]
    seed: int | None = None
    tasks: int = 0
    trajectories: int = 0
    paid_failures: dict[str, int] = field(default_factory=dict)
    """Per constructed kind, verified failures paid above :func:`unpaid`."""
    failures: dict[str, int] = field(default_factory=dict)
    examples: list[dict] = field(default_factory=list)
    swept: int = 0
    """SWE: wrong patches scored again with one surface feature changed (``judge.probe_sweep``), beside the round's
    ``trajectories``; one paid counts under ``paid_failures["sweep"]``."""

    def to_dict(self) -> dict:
        return {"seed": self.seed, "tasks": self.tasks, "trajectories": self.trajectories,
                "paid_failures": self.paid_failures, "failures": self.failures, "examples": self.examples,
                "swept": self.swept, "checks": self.checks}


def failed(report: ProbeReport, exc: Exception) -> None:
    """The session failed: a failed ``probe_execution`` that says how."""
    report.checks.append({"name": "probe_execution", "passed": False,
                          "detail": f"the candidate failed in the probe session: {exc}"})


def paid(s, domain, reward: float | None = None) -> bool:
    """Whether a scored trajectory's reward (or ``reward``) is pay above :func:`unpaid`."""
    lo, hi = domain.reward_range
    reward = (s.invalid_reward if s.invalid_reward is not None else s.reward) if reward is None else reward
    return reward is not None and (reward - unpaid(domain.reward_range)) / (hi - lo) > PAY_TOLERANCE


def judge_scored(scored: list, domain, report: ProbeReport, max_error_rate: float,
                 main: list[float | None] | None = None) -> list[dict]:
    """``probe_execution`` and ``probe_failure_pay`` over ``scored`` (row, kind, verified, score), tallied into
    ``report``; a failure ``main`` pays as much (``main``: its rewards on the same rows) is main's flaw."""
    lo, hi = domain.reward_range
    floor = unpaid(domain.reward_range)
    errors, mains = 0, 0
    for i, (row, kind, verified, s) in enumerate(scored):
        if s.error is not None:
            errors += 1
        if verified:
            continue
        if kind == SWEEP:
            report.swept += 1
        else:
            report.failures[kind] = report.failures.get(kind, 0) + 1
        reward = s.invalid_reward if s.invalid_reward is not None else s.reward
        if paid(s, domain) and main is not None and main[i] is not None and paid(s, domain, main[i]) \
                and (reward - main[i]) / (hi - lo) <= PAY_TOLERANCE:
            mains += 1  # main pays this failure as much: its flaw (named on main), no change of the trust rule
        elif paid(s, domain):
            report.paid_failures[kind] = report.paid_failures.get(kind, 0) + 1
            if len(report.examples) < 3:
                report.examples.append({"kind": kind, "reward": reward, "response": row["response"][:200]})
    report.trajectories = sum(kind != SWEEP for _, kind, _, _ in scored)
    n_paid = sum(report.paid_failures.values())
    failures = sum(report.failures.values()) + report.swept
    kinds = ", ".join(f"{k} {report.paid_failures.get(k, 0)}/{n}" for k, n in sorted(report.failures.items()))
    return [
        {"name": "probe_execution", "passed": errors <= max_error_rate * len(scored),
         "detail": f"{errors} of {len(scored)} probe trajectories unjudged (max {max_error_rate})"},
        {"name": "probe_failure_pay", "passed": n_paid == 0,
         "detail": f"{n_paid} of {failures} verified failures paid above {floor:g} in a session shaped "
                   f"like training, on {report.tasks} fresh tasks ({kinds}"
                   + (f"; sweep {report.paid_failures.get(SWEEP, 0)}/{report.swept}" if report.swept else "") + ")"
                   + (f"; {mains} more paid as much by main (main's flaw, not this branch's)" if mains else "")},
    ]
