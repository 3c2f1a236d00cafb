"""The dead-slice pool ends at a prompt edit (x1, issue 44): a round before an edit to main's templates drew the
same mix but rendered other prompts, so its flat groups say nothing of this round's.  Real git; no model."""

from __future__ import annotations

from pathlib import Path

from test_k2_slice_pool import KNOBS, judge
from test_k38_slice import LEGS, SEED_LIVE, SEED_TASKS, dead, planted, rows_of

from meta_agent.slice_census import lineage_rows, templates_of


def test_the_pool_stops_at_a_template_edit_and_not_at_a_reward_edit(tmp_path: Path) -> None:
    repo = planted(tmp_path, [*SEED_TASKS, LEGS])
    before = repo.head("main")
    user = repo.read_file("main", "prompts/user.j2")
    reward_edit = repo.commit_files({"reward.py": repo.read_file("main", "reward.py") + "\n# scaled later\n"}, "r")
    prompt_edit = repo.commit_files({"prompts/user.j2": user + "\nCount every animal's legs.\n"}, "p")
    rounds = [[dict(r, run_id="run", round=n) for r in rows_of(SEED_LIVE[:2] + SEED_LIVE[4:6] +
                                                               [("leg_counting", 10 * n + g, 0) for g in range(2)])]
              for n in range(3)]

    def config(ref: str) -> dict:
        return {"tasks": [*SEED_TASKS, LEGS], "grpo": KNOBS, "templates": templates_of(repo, ref)}

    assert set(templates_of(repo, before)) == {"prompts/system.j2", "prompts/user.j2"}
    now = config(reward_edit)  # main before its prompt edit: a reward edit renders the same prompts
    pooled, kept = lineage_rows(rounds[2], [(1, config(before), rounds[1]), (0, config(before), rounds[0])], now)
    assert kept == [1, 0] and dead(judge(rounds[2], pooled)) != [], kept
    now = config(prompt_edit)
    pooled, kept = lineage_rows(rounds[2], [(1, config(reward_edit), rounds[1]), (0, config(before), rounds[0])], now)
    assert kept == [] and pooled == rounds[2] and dead(judge(rounds[2], pooled)) == [], kept
