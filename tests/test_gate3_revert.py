"""Issue 45, Deliver 6: a tripwire revert that conflicts with a later merge reverts that merge first.

Two interventions merged in round 0, the second on top of the first (the same line of ``reward.py``); the
round-1 tripwire fires and reverts every merge round 1 trained on, in branch order, so the first one's
revert meets the second's change.  Real git; the alarm is the tripwire's own record of a fired figure.

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_gate3_revert.py
"""

from __future__ import annotations

from pathlib import Path

from harness_repo.repo import HarnessRepo
from meta_agent.tripwire_revert import revert_on_tripwire
from meta_agent.tripwire import Alarm

SEED_LINE = '    return {"score": 1.0 if correct else 0.0, "pred": pred, "format_ok": True}'
FIRED = Alarm("failure_pay", 0.0, 0.2, 0.2, 0.15, 0.25, "failure_pay 0.000 -> 0.200: regression", fired=True)


def _merge(repo: HarnessRepo, tmp: Path, slug: str, line: str) -> str:
    wt = repo.start_intervention(0, slug, worktree_root=tmp / "wt")
    reward = wt.path / "reward.py"
    text = reward.read_text()
    current = next(ln for ln in text.splitlines() if ln.startswith('    return {"score": 1.0 if correct'))
    reward.write_text(text.replace(current, line))
    repo.commit(wt, f"test: {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": ["miss_rate decrease"]})
    repo.remove_worktree(wt)
    return repo.merge(wt.branch, {"Backtest": "test", "Verdict": "merged"}, f"Merge {slug}")


def test_a_tripwire_revert_in_conflict_reverts_the_later_merge_first_and_says_why(tmp_path):
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    seed = (repo.path / "reward.py").read_text()
    assert SEED_LINE in seed
    _merge(repo, tmp_path, "a-first", SEED_LINE.replace("else 0.0", "else 0.1"))
    _merge(repo, tmp_path, "b-second", SEED_LINE.replace("else 0.0", "else 0.2"))
    said: list[str] = []

    reverted = revert_on_tripwire(repo, 1, [FIRED], said.append)

    assert reverted == ["iv/r0-a-first", "iv/r0-b-second"]
    assert (repo.path / "reward.py").read_text() == seed  # both undone: main is the seed again
    assert {iv.branch: iv.status for iv in repo.interventions()} == {"iv/r0-a-first": "reverted",
                                                                      "iv/r0-b-second": "reverted"}
    log = repo.log("main", 2)  # newest first: a's own revert, made after b's
    assert log[0]["trailers"]["Reverts-Intervention"] == ["iv/r0-a-first"] and "Reverted-For" not in log[0]["trailers"]
    assert log[1]["trailers"]["Reverts-Intervention"] == ["iv/r0-b-second"]
    assert log[1]["trailers"]["Reverted-For"] == ["iv/r0-a-first"] and "Tripwire" in log[1]["trailers"]
    assert "stand in the way of reverting iv/r0-a-first" in repo.message(log[1]["sha"])
    assert any("reverted iv/r0-b-second first" in s and "reward.py" in s for s in said), said
    # run again (a resumed phase): nothing is reverted twice, both are still named
    head = repo.head("main")
    assert revert_on_tripwire(repo, 1, [FIRED], said.append) == reverted
    assert repo.head("main") == head
