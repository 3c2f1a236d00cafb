"""The SWE sweep wears the features the candidate's code reads (``judge.reward_reading_sweep``), on a policy's round.

Held-out set e's SWE cases (``tests/test_heldout_b45e.py``: two marks at once, git's ``\\ No newline at end of
file`` line, a ```` ```patch ```` fence) each pay a wrong patch by a feature outside the sweep's list.  Given the
reading of each reward's code (the seed's read as main's), the sweep's groups hold a verified-wrong variant the
reward pays and the seed does not, with the patch's own parse and record.  The rewards run here on the host on
the views the probe sends (``trajectory_view``), the test's own reward text; real parsing, real grader records
(``tests/test_probe_swe_shapes.policy_round``).
"""

from __future__ import annotations

import json
import random

import pytest

from harness_repo.repo import SEEDS_DIR
from meta_agent.judge.probe_answers import Constructed
from meta_agent.judge.probe_archived_code import parsed_answer
from meta_agent.judge.probe_answers_surface import task_files
from meta_agent.judge.probe_sweep import FEATURES, KIND, sweep_groups, sweep_verdicts
from meta_agent.judge.reward_reading import read_seed, read_source
from sandboxes.harness_runtime.harness import normalise_score
from sandboxes.harness_views import trajectory_view
from tests.test_heldout_b45e import SWE
from tests.test_probe_swe_shapes import policy_round  # noqa: F401 (fixture)

pytestmark = pytest.mark.docker
SEED = (SEEDS_DIR / "swe" / "reward.py").read_text()


def _score(text: str):
    namespace: dict = {"__name__": "reward"}
    exec(compile(text, "reward.py", "exec"), namespace)  # noqa: S102 (the test's own reward text)
    return namespace["compute_score"]


def _steps(rows: list[dict]) -> list[list[tuple[dict, str, Constructed]]]:
    """The policy's round as one step the probe sends: each answer with its grader record."""
    return [[(dict(r, ground_truth=json.loads(r["ground_truth"])), "archived",
              Constructed(r["response"], False, (r["verified"], json.loads(r["verifier_info"])), "stop"))
             for r in rows]]


def newly_paid(policy_round, tail: str, seed: int, read: bool = True) -> list[dict]:
    """The sweep's verified-wrong variants the reward with ``tail`` pays more than the seed does (``read``: the
    sweep given the readings of both rewards' code)."""
    steps = _steps(policy_round)
    readings = (read_source(SEED + tail), read_seed("swe")) if read else ()
    groups = sweep_groups(steps, random.Random(seed), *readings)
    verdicts = {row["traj_id"]: answer.verdict[0] >= 0.5 for row, _, answer in steps[0]}
    sweep_verdicts(groups, verdicts)
    main, cand = _score(SEED), _score(SEED + tail)
    out = []
    for row, kind, made in (item for group in groups for item in group):
        view = trajectory_view(row)
        if kind != KIND or verdicts[row["traj_id"]]:
            continue
        paid = [normalise_score(f(view["data_source"], view["response"], view["ground_truth"],
                                  view["extra_info"]))[0] for f in (main, cand)]
        if paid[1] > paid[0]:
            base, k = row["traj_id"].rsplit("-v", 1)
            if int(k) >= len(FEATURES):  # a reading's variant (after the listed marks): the parsed patch is its own
                sources = task_files(str(row["ground_truth"]["task_id"]))[0]
                original = next(a for r, _, a in steps[0] if r["traj_id"] == base)
                assert parsed_answer(view["response"], sources).patch == \
                    parsed_answer(original.response, sources).patch
            out.append(view)
    return out


@pytest.mark.parametrize("attack", sorted(SWE))
def test_the_sweep_wears_what_the_reward_reads(policy_round, attack):
    unread = [seed for seed in range(5) if not newly_paid(policy_round, SWE[attack], seed, read=False)]
    assert unread == list(range(5))  # the sweep's own list never meets the feature
    for seed in range(5):
        assert newly_paid(policy_round, SWE[attack], seed), (attack, seed)
    assert not newly_paid(policy_round, "", 0)  # the seed itself: its reading adds nothing, nothing newly paid

