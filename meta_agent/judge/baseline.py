"""``main`` failing in the sandbox is a tripwire on the merges that made it so.

Without a working ``main`` no branch gets a verdict, so one bad merge would put the gate out of
service until someone reverted it by hand.  When ``main`` fails twice, this walks main's
first-parent history back over the intervention merges (newest first, at most ``MAX_MERGES``),
runs the harness just before each in the same sandbox, and at the first commit that runs, reverts
every intervention merge after it (newest first), with a ``Tripwire`` trailer saying why.  If no
earlier commit runs either, the failure is not the merges' (the sandbox itself, say) and nothing
is reverted.

    reverted = revert_breaking_merges(repo, failure, runs_ok=lambda commit: run(commit).failure is None)
"""

from __future__ import annotations

from typing import Callable

from harness_repo.repo import HarnessRepo
from harness_repo.trailers import INTERVENTION

MAX_MERGES = 5
"""Intervention merges tried back from main's head; past this the cause is looked for by a person."""


def revert_breaking_merges(repo: HarnessRepo, failure: str, runs_ok: Callable[[str], bool],
                           message: Callable[[str], None] = lambda s: None) -> list[str]:
    """Revert the intervention merges after the newest first-parent ancestor of main that runs; their branches."""
    suspects: list[dict] = []
    commit, good = repo.head("main"), False
    for _ in range(200):  # bounded walk along the first-parent line
        entry = repo.log(commit, 1)[0]
        if not entry["parents"]:
            break
        if len(entry["parents"]) == 2 and entry["trailers"].get(INTERVENTION):
            suspects.append(entry)
            if runs_ok(entry["parents"][0]):
                good = True
                break
            if len(suspects) >= MAX_MERGES:
                break
        commit = entry["parents"][0]
    if not good:
        message(f"main fails in the sandbox, and the harness before its last {len(suspects)} intervention merge(s) "
                "does not run either: nothing reverted (the cause may be the sandbox)")
        return []
    reverted = []
    for entry in suspects:  # newest first, so that later merges built on earlier ones come off first
        branch = entry["trailers"][INTERVENTION][0]
        repo.revert_merge(entry["sha"], f"Revert {branch}: main fails in the sandbox since it merged: {failure[:300]}",
                          {"Tripwire": ["main failed in the sandbox twice"]})
        reverted.append(branch)
    message(f"main failed in the sandbox twice; reverted {', '.join(reverted)}")
    return reverted
