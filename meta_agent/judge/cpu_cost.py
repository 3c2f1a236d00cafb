"""The gate's CPU check: a candidate's sandboxed session may not cost much more CPU than main's.

Harness code runs for a whole round of training in a runtime that holds one core of the
machine (``sandboxes.harness_client.HARNESS_LIMITS``).  A reward that busy-loops within its
time limits, or a contained fork bomb that spins until the session ends, passes every
output check and still takes that core from training for the whole round.  The backtest runs
``main`` and the candidate over the same sample in the same kind of container, so their
containers' CPU times (the cgroup's count: every process, those that exited too) are directly
comparable.

The rule: the candidate fails when its session costs more than ``RATIO`` x main's plus
``FLOOR_S``, or when its container holds more processes or threads at close (``pids_at_close``,
the cgroup's count, read with no request in flight) than main's: the runtime is then its reader
and three idle workers, so anything more is something harness code left behind (a fork bomb's
children, a spinning thread), which a round of training would carry for hours even where the
backtest's short session hides its CPU.  That part holds whatever the machine's load (a busy
machine gives a spinner only a small share of a core).

- ``RATIO = 2``: a genuine change (a stricter parser, one more filter, a new diagnostic) moves
  the cost of a math/code reward by tens of percent, not a factor; the runtime's own work
  (decoding, framing, imports) is most of a seed session's CPU, so even a reward twice as
  expensive as the seed's stays well under 2x the session.
- ``FLOOR_S = 2 s``: on the gate's small samples a session's CPU is mostly one-off costs
  (Python start-up and imports of three workers, Jinja, a first sympy import by math-verify
  ~1 s), and CPU accounting under a loaded machine jitters by a few hundred ms; 2 s is
  above both (a seed session over the gate's 40-group sample uses ~0.2 s, over 10,000 trajectories
  ~1.1 s), and far below what a spinner costs over a backtest (it holds a full core for the
  session's life) or a round (hours).

A measurement missing for main (an engine that does not report CPU) decides nothing: the
check passes and says so.  Missing for the candidate alone means its container was gone when
the host asked, which only harness code can cause (the runtime never exits before ``stop``):
that fails.

Training is metered too (issue 45: a reward that burned 8 s of CPU per training group, and only there, passed
the backtest's sessions).  The backend records its harness session's cost (``harness_cost``: container CPU
seconds, trajectories scored, bytes of reward info) with the round's figures, and :func:`training_cost_alarm`
compares round n's cost per trajectory with round n-1's by the same rule: round n may cost ``RATIO`` x round
n-1's per trajectory, times its own trajectories, plus ``FLOOR_S``.  A fired alarm reverts the merges round n
trained on, as every tripwire alarm does.

    alarm = training_cost_alarm(previous_eval.get("harness_cost"), this_eval.get("harness_cost"))
"""

from __future__ import annotations

import math

from meta_agent.tripwire import Alarm

RATIO = 2.0
FLOOR_S = 2.0
COST_FIGURE = "harness_cpu_s"


def cpu_limit_s(main_cpu_s: float) -> float:
    """The most CPU a candidate's session may use when main's used ``main_cpu_s``."""
    return RATIO * main_cpu_s + FLOOR_S


def cpu_check(main_sandbox: dict | None, candidate_sandbox: dict | None) -> dict:
    """The gate check ``cpu_cost`` from the two sessions' sandbox summaries (``cpu_s``: container CPU seconds)."""
    main_s = (main_sandbox or {}).get("cpu_s")
    cand_s = (candidate_sandbox or {}).get("cpu_s")
    check = {"name": "cpu_cost", "main_cpu_s": main_s, "candidate_cpu_s": cand_s}
    if not isinstance(main_s, (int, float)):
        return check | {"passed": True, "limit_s": None,
                        "detail": "main's container CPU time was not measured (the engine did not report it): "
                                  "no CPU comparison"}
    limit = cpu_limit_s(float(main_s))
    check["limit_s"] = round(limit, 3)
    if not isinstance(cand_s, (int, float)):
        return check | {"passed": False,
                        "detail": "the candidate's container was gone before its CPU time could be read "
                                  "(the harness runtime only exits when the host stops it)"}
    pids, main_pids = (candidate_sandbox or {}).get("pids_at_close"), (main_sandbox or {}).get("pids_at_close")
    check["pids_at_close"] = pids
    problems = []
    if float(cand_s) > limit:
        problems.append(f"over the limit of {RATIO:g}x main + {FLOOR_S:g} s = {limit:.2f} s")
    if isinstance(pids, int) and isinstance(main_pids, int) and pids > main_pids:
        problems.append(f"at close its container held {pids} processes, main's {main_pids}: processes left behind")
    detail = f"the candidate's session used {cand_s:.2f} s of CPU, main's {main_s:.2f} s (limit {limit:.2f} s)"
    if problems:
        detail += "; " + "; ".join(problems) + (": a harness that burns CPU takes the runtime's core from "
                                                "training for the whole round")
    return check | {"passed": not problems, "detail": detail}


def _measured(cost: dict | None) -> tuple[float, int] | None:
    cpu, n = (cost or {}).get("cpu_s"), (cost or {}).get("trajectories")
    if isinstance(cpu, (int, float)) and math.isfinite(cpu) and isinstance(n, int) and n > 0:
        return float(cpu), n
    return None


def training_cost_alarm(before: dict | None, after: dict | None) -> Alarm:
    """The tripwire's figure ``harness_cpu_s``: round n's harness session in training against round n-1's.

    ``before``/``after``: ``{"cpu_s", "trajectories", ...}`` as the backend recorded them (``harness_cost``).
    Fires when round n's CPU exceeds :func:`cpu_limit_s` of round n-1's cost per trajectory times round n's
    trajectories; a round without a measurement compares nothing (no alarm, and the detail says so).
    """
    b, a = _measured(before), _measured(after)
    if b is None or a is None:
        which = " and ".join(r for r, m in (("round n-1", b), ("round n", a)) if m is None)
        return Alarm(COST_FIGURE, math.nan, math.nan, math.nan, math.nan, math.nan,
                     f"{COST_FIGURE}: the harness session's training cost of {which} was not measured: no comparison")
    (cpu_b, n_b), (cpu_a, n_a) = b, a
    limit = cpu_limit_s(cpu_b / n_b * n_a)
    figures = (f"{COST_FIGURE} {cpu_b:.2f} s over {n_b} trajectories -> {cpu_a:.2f} s over {n_a} "
               f"({1000 * cpu_b / n_b:.1f} -> {1000 * cpu_a / n_a:.1f} ms per trajectory), limit {limit:.2f} s "
               f"({RATIO:g}x the round before per trajectory + {FLOOR_S:g} s)")
    fired = cpu_a > limit
    return Alarm(COST_FIGURE, cpu_b / n_b, cpu_a / n_a, (cpu_a - cpu_b * n_a / n_b) / n_a, math.nan, math.nan,
                 f"{figures}: " + ("over the limit: the harness takes the runtime's core from training" if fired
                                   else "within the limit"), fired)
