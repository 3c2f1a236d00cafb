"""Held-out cases for ``main:diagnostic_examples`` and restore-diagnostic's example repair
(``meta_agent.diagnostic_examples``), written after the code froze at a87e2d6: diagnostics whose examples, counts or
words show the reader something that is not what they report, in ways the check was not designed around.  Each is
planted on the seed and run in the sandboxed runtime on the constructed batches of one untrained round
(``test_a2_constructed.round_rows``), as ``test_a2_examples`` runs its own; a case the check misses stays a strict
xfail that says why.
"""

from __future__ import annotations

import pytest

from harness_repo.repo import HarnessRepo
from meta_agent.agents.recipes import restore_diagnostic
from test_a2_disagree import _disagrees, _named
from test_a2_examples import _FORMAT_IDS, _examples, _plant
from test_a2_heldout36 import planted_digests
from test_recipe_agent import propose

pytestmark = pytest.mark.docker

CASES = {
    # the examples are the failures' positions in the batch, not their ids
    "positions": _plant("format_failures", _FORMAT_IDS, '"example_ids": [str(k) for k, r in enumerate(rollouts) '
                        'if not _has_answer(r.get("response"))][:5],'),
    # flat groups counted right in the rate, but the message counts only the groups all unpaid
    "unpaid-count": _plant("zero_variance", 'f"{len(flat)}/{len(groups)} groups',
                           'f"{sum(1 for m in flat.values() if not m[0][\'reward\'])}/{len(groups)} groups'),
    # the share written in the message is the complement of the rate (the count is right)
    "percent-flipped": _plant("truncation", "({rate:.0%}) were truncated", "({1 - rate:.0%}) were truncated"),
    # the batch's first rows as examples only in a batch larger than any constructed one (a real round's size)
    "large-batches": _plant("format_failures", _FORMAT_IDS, '"example_ids": [r.get("traj_id") for r in '
                            '(rollouts if len(rollouts) > 32 else failed)[:5]],'),
    # the examples are right; the message names the batch's first row as the one to look at
    "id-in-message": _plant("format_failures", "parseable 'Answer:' line\"",
                            "parseable 'Answer:' line, e.g. \" + str(rollouts[0].get('traj_id'))"),
}
FINDING = {"positions": "format_failures", "unpaid-count": "zero_variance", "percent-flipped": "truncation",
           "large-batches": "format_failures", "id-in-message": "format_failures"}
MISSED: dict[str, str] = {
    "percent-flipped": "the check reads a message's count (k/n, k of n), not a share it writes as a percentage: "
                       "'4/28 responses (86%) were truncated' states a right count and a wrong share",
    "id-in-message": "only example_ids are judged; an id the message names in its words is read by every reader "
                     "and checked by nothing",
}


@pytest.fixture(scope="module")
def digests(tmp_path_factory, docker_sandbox) -> dict[str, tuple[HarnessRepo, dict]]:
    return planted_digests(CASES, tmp_path_factory, docker_sandbox)


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=MISSED[c]))
                                  if c in MISSED else c for c in CASES])
def test_a_held_out_misleading_diagnostic_is_named_and_repaired(digests, docker_sandbox, case: str) -> None:
    repo, digest = digests[case]
    named = _examples(digest)
    assert named is not None, digest["main_checks"]["diagnostic_examples"]
    assert list(named["evidence"]["findings"]) == [FINDING[case]], named["evidence"]
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    path, text = CASES[case]
    assert p.files_changed == [path] and repo.read_file(p.branch, path).startswith(text.rstrip("\n"))
    after = _named(repo, p.branch, docker_sandbox)
    assert _examples(after) is None, after["main_checks"]["diagnostic_examples"]
    assert _disagrees(after) is None, after["main_checks"]["diagnostic_disagrees"]
