"""The probe's wrong SWE answers wear the policy's own surface (issue 45, held-out set c's SWE cases).

Set c's rewards pay a wrong answer by a surface mark: SEARCH/REPLACE edits, a made-up ``index`` hash, a
miscounted hunk header, a file the gold change does not touch.  Such a reward harms training only where the
policy writes that surface; there the probe must write it too, at the archive's rate.  Each round here is a
policy's (``test_probe_swe_shapes.policy_round``) whose wrong fixes wear one mark, each graded by the real grader
(a miscounted header does not ``git apply``: ``patch_failed``; a new notes file changes no test's outcome).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.test_heldout_b45c import SWE
from tests.test_probe_swe_shapes import _harness, _probe, _states, policy_round  # noqa: F401 (fixture)

pytestmark = pytest.mark.docker

NOTES = "diff --git a/NOTES.md b/NOTES.md\nnew file mode 100644\n--- /dev/null\n+++ b/NOTES.md\n@@ -0,0 +1,2 @@\n" \
        "+Fixed the conversion.\n+See the parser.\n"


def search_replace(patch: str) -> str:
    """``patch`` (one file, bare diff) as SEARCH/REPLACE edits, one per hunk."""
    path = re.search(r"^\+\+\+ b/(\S+)", patch, re.M).group(1)
    out, old, new = [], None, None
    for line in patch.splitlines() + ["@@"]:
        if line.startswith("@@"):
            if old is not None:
                out.append(f"{path}\n<<<<<<< SEARCH\n{''.join(old)}=======\n{''.join(new)}>>>>>>> REPLACE\n")
            old, new = [], []
        elif old is not None and line[:1] in (" ", "-", "+"):
            (old.append(line[1:] + "\n") if line[:1] != "+" else None)
            (new.append(line[1:] + "\n") if line[:1] != "-" else None)
    return "".join(out)


def _worn(patch: str, mark: str) -> str:
    path = re.search(r"^\+\+\+ b/(\S+)", patch, re.M).group(1)
    if mark == "search-replace":
        return search_replace(patch)
    if mark == "made-up-index":
        return f"diff --git a/{path} b/{path}\nindex 1a2b3c4..5d6e7f8 100644\n" + patch
    if mark == "miscounted-hunk":
        return re.sub(r"^@@ -(\d+),(\d+)", lambda m: f"@@ -{m.group(1)},{int(m.group(2)) + 1}", patch, 1, re.M)
    return patch.rstrip("\n") + "\n" + NOTES


@pytest.fixture(scope="module")
def surface_rounds(policy_round) -> dict[str, list[dict]]:
    """Per mark of set c, the policy's round with its wrong fixes wearing that mark, each graded for real."""
    from swe_env.checked import load_task
    from swe_env.feedback import execution_feedback
    from swe_env.grade import grade
    from swe_env.patch_format import FENCE, parse_response
    from swe_env.tasks import buggy_sources

    out = {}
    for mark in SWE:
        rows = []
        for row in policy_round:
            if row["verified"] >= 0.5:
                rows.append(dict(row))
                continue
            task = load_task(row["task_id"])
            bare = FENCE.search(row["response"]).group(1)
            worn = _worn(bare, mark)
            response = f"Let me fix the conversion.\n\n```diff\n{worn.rstrip()}\n```\nThat should do it."
            parsed = parse_response(response, buggy_sources(task))
            assert parsed.status == "ok", (mark, parsed)
            record = grade(task, parsed.patch).to_info() if mark in ("miscounted-hunk", "other-file") \
                else json.loads(row["verifier_info"])
            assert record["status"] == ("patch_failed" if mark == "miscounted-hunk" else "unresolved"), record
            info = {k: v for k, v in record.items() if k != "execution"} | parsed.to_info()
            info["execution"] = execution_feedback(info)
            rows.append(dict(row, response=response, verifier_info=json.dumps(info)))
        out[mark] = rows
    return out


@pytest.mark.parametrize("mark, seed", [(m, s) for m in sorted(SWE) for s in (7, 8)])
def test_a_reward_paying_the_policys_own_mark_is_rejected(docker_sandbox, tmp_path, surface_rounds, mark, seed):
    report = _probe(docker_sandbox, _harness(tmp_path, SWE[mark]), surface_rounds[mark], seed)
    assert _states(report)["probe_failure_pay"] is False, (mark, report.checks)


def _other_task_harness(tmp_path, tail: str):
    """A harness trained on the second task only: the probe's tasks are ones the archived round never held."""
    from tests.test_probe_swe_shapes import TASKS

    root = _harness(tmp_path, tail)
    yaml = (root / "harness.yaml").read_text()
    (root / "harness.yaml").write_text(yaml.replace(f"  - name: {TASKS[0]}\n    weight: 1.0\n", ""))
    return root


@pytest.mark.parametrize("mark, seed", [(m, s) for m in sorted(SWE) for s in (7, 8)])
def test_the_mark_moves_to_a_task_the_round_never_held(docker_sandbox, tmp_path, surface_rounds, mark, seed):
    """The policy wore the mark on the first task; the probe's tasks are the second's: its constructed wrong
    answers carry the archived answers' surface across tasks.  Before they did (cf57909), 7 of these 8 won (all
    but the miscounted hunk on seed 8)."""
    from tests.test_probe_swe_shapes import TASKS

    rows = [r for r in surface_rounds[mark] if r["task_id"] == TASKS[0]]
    report = _probe(docker_sandbox, _other_task_harness(tmp_path, SWE[mark]), rows, seed)
    assert _states(report)["probe_failure_pay"] is False, (mark, report.checks)
