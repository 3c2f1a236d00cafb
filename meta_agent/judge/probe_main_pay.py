"""Main's pay on the probe's own failures: what the probe may count against a candidate.

The gate's rule for pay of a verified failure (DESIGN §3) is relative and has no margin: a candidate may not pay a
failure that ``main`` does not pay.  The probe answers fresh tasks, so its rows have no archived main reward; when
the candidate paid some verified failure, main's harness scores the very same rows in a session of its own, and a
failure main pays at least as much counts as main's flaw (``main_checks.probe_main`` names it in the digest), never
as the candidate's.  Without a paid failure nothing is scored again, so the probe's cost is unchanged.

    rewards = main_rewards(open_main_score, [row for row, *_ in scored], domain)   # None: main failed
"""

from __future__ import annotations

from collections.abc import Callable

from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view


def main_rewards(open_session: Callable[[], HarnessSession], rows: list[dict], domain) -> list[float | None] | None:
    """Main's reward for each of ``rows`` (scored as one round, in a fresh session), or None when main's session
    fails: then every paid failure stays the candidate's (the probe never credits what it could not measure)."""
    session = open_session()
    try:
        session.start()
        results = session.score([trajectory_view(r) for r in rows], reward_range=domain.reward_range)  # rewards only
    except HarnessFailed:
        return None
    finally:
        session.close()
    return [s.invalid_reward if s.invalid_reward is not None else s.reward for s in results]
