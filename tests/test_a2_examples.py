"""A diagnostic whose examples are not instances of what it reports is named and repaired from evidence (issue 44;
held-out set 12i's first-rollouts-as-examples: the format diagnostic's rate is right, its examples are the batch's
first five rollouts).

The flaws planted here are this file's own, unlike 12i's: a format diagnostic whose examples are drawn from the rows
that HAVE their final line, one whose examples are the batch's last five rows, a truncation diagnostic whose
examples are the longest answers that were not cut, a zero-variance diagnostic whose examples are shifted by one
group (the member of the group after each flat one), and a truncation diagnostic whose message counts the answers
that were not cut.  Each rate stays right, so ``main:diagnostic_disagrees`` sees nothing.  Each runs in the
sandboxed runtime on the constructed batches (``meta_agent.constructed_checks``), where each example is judged on
the host against the trusted definition of its finding's mode; the seed is named for nothing.
"""

from __future__ import annotations

import pytest

from harness_repo.repo import SEEDS_DIR, HarnessRepo
from meta_agent.agents.recipes import restore_diagnostic
from test_a2_disagree import _disagrees, _named
from test_recipe_agent import propose

pytestmark = pytest.mark.docker

_SEED = SEEDS_DIR / "math" / "diagnostics"
NAME = "main:diagnostic_examples"


def _plant(stem: str, old: str, new: str) -> tuple[str, str]:
    text = (_SEED / f"{stem}.py").read_text()
    assert old in text, f"the seed's {stem}.py changed: {old!r} is not in it"
    return f"diagnostics/{stem}.py", text.replace(old, new)


_FORMAT_IDS = '"example_ids": [r.get("traj_id") for r in failed[:5]],'
_CUT_IDS = '"example_ids": [r.get("traj_id") for r in cut[:5]],'
PLANTED = {
    "passing-rows": _plant("format_failures", _FORMAT_IDS, '"example_ids": [r.get("traj_id") for r in rollouts '
                           'if _has_answer(r.get("response"))][:5],'),
    "last-five": _plant("format_failures", _FORMAT_IDS, '"example_ids": [r.get("traj_id") for r in rollouts[-5:]],'),
    "longest-uncut": _plant("truncation", _CUT_IDS, '"example_ids": [r.get("traj_id") for r in sorted('
                            '(r for r in rollouts if r not in cut), key=lambda r: -len(r.get("response") or ""))'
                            '[:5]],'),
    "next-group": _plant("zero_variance", '"example_ids": [members[0].get("traj_id") for members in '
                         'list(flat.values())[:5]],',
                         '"example_ids": [list(groups.values())[(list(groups).index(g) + 1) % len(groups)][0]'
                         '.get("traj_id") for g in list(flat)[:5]],'),
    "uncut-count": _plant("truncation", 'f"{len(cut)}/{len(rollouts)} responses',
                          'f"{len(rollouts) - len(cut)}/{len(rollouts)} responses'),
}
LATER = {  # written after the first fix: a warning that shows no row at all, a count stated as "k of n"
    "no-examples": _plant("format_failures", _FORMAT_IDS, '"example_ids": [],'),
    "of-count": _plant("truncation", 'f"{len(cut)}/{len(rollouts)} responses',
                       'f"{len(rollouts) - len(cut)} of {len(rollouts)} responses'),
}
PLANTED |= LATER
FINDING = {"passing-rows": "format_failures", "last-five": "format_failures", "longest-uncut": "truncation",
           "next-group": "zero_variance", "uncut-count": "truncation",
           "no-examples": "format_failures", "of-count": "truncation"}


def _examples(digest: dict) -> dict | None:
    return next((m for m in digest["failure_modes"] if m["name"] == NAME), None)


@pytest.fixture(scope="module")
def digests(tmp_path_factory, docker_sandbox) -> dict[str, tuple[HarnessRepo, dict]]:
    out = {}
    for name, (path, text) in {"seed": (None, None), **PLANTED}.items():
        repo = HarnessRepo.create(tmp_path_factory.mktemp(name) / "harness", "math")
        if path:
            repo.commit_files({path: text}, name)
        out[name] = repo, _named(repo, "main", docker_sandbox)
    return out

SEVERITY = {"next-group": "warning", "of-count": "warning", "uncut-count": "warning"}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_examples_that_are_not_the_mode_are_named_and_repaired_from_main_s_own_code(digests, docker_sandbox,
                                                                                   planted) -> None:
    repo, digest = digests[planted]
    assert _disagrees(digest) is None, digest["main_checks"]["diagnostic_disagrees"]  # every rate is right
    named = _examples(digest)
    assert named is not None, digest["main_checks"]
    assert list(named["evidence"]["findings"]) == [FINDING[planted]], named["evidence"]
    # an error where a warning shows the reader no example of its mode; a wrong count or shifted ids: a warning
    assert named["severity"] == SEVERITY.get(planted, "error") and 0 < named["rate"] <= 1, named
    assert not digest["main_checks"]["diagnostic_examples"]["passed"]
    assert named["examples"] and named["examples"][0]["finding"] == FINDING[planted], named["examples"]
    [p] = propose(repo, digest, rules=(restore_diagnostic,))
    path, text = PLANTED[planted]
    assert repo.changed_paths(p.branch) == [path] == p.files_changed
    assert repo.read_file(p.branch, path).startswith(text.rstrip("\n"))
    mode = named["evidence"]["findings"][FINDING[planted]]["mode"]
    assert p.predicted_effects == [f"finding {FINDING[planted]} calibrated: its examples (and any count it states) "
                                   f"are rows of {mode}"]
    after = _named(repo, p.branch, docker_sandbox)
    assert _examples(after) is None, after["main_checks"]["diagnostic_examples"]
    assert after["main_checks"]["diagnostic_examples"]["passed"] and _disagrees(after) is None


def test_the_seed_s_examples_are_its_modes(digests) -> None:
    _, digest = digests["seed"]
    check = digest["main_checks"]["diagnostic_examples"]
    assert check["passed"] and _examples(digest) is None, check
    judged = int(check["detail"].rsplit("(", 1)[1].split()[0])
    assert judged >= 3 * 4, check  # each seed diagnostic on the batches where it names an example
