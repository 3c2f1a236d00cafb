"""The slice census for real: the project's SmolLM2 answers fresh val tasks of 12j's mix under main's templates in
the sandboxed harness runtime, main's reward scores them in the same session and the domain verifies them (one
group per entry of the mix here, to stay cheap; ``bench/repair_bench.py`` runs it at its size)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_k38_slice import LEGS, SEED_TASKS, rows_of

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.generation_preview import GenerationPreview
from meta_agent.slice_census import census
from meta_agent.slice_checks import slice_check, slice_figures
from rl_backend.model import resolve_model
from sandboxes.harness_views import trajectory_view

pytestmark = pytest.mark.docker


def test_the_census_generates_scores_and_verifies_groups_of_every_kind_as_evidence_only(tmp_path: Path,
                                                                                          docker_sandbox) -> None:
    repo = HarnessRepo.create(tmp_path / "harness", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["tasks"] = [*SEED_TASKS, LEGS]
    repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)}, "12j's mix")
    preview = GenerationPreview(repo, MathDomain(), docker_sandbox, resolve_model(None), tmp_path / "gp", seed=0)
    rows = rows_of([("chain_sum", 0, 0), ("leg_counting", 0, 0)])  # the bench's round 0: one flat group of each
    figures, level = slice_figures(rows, config["tasks"], MathDomain().eval_specs)
    assert figures["leg_counting"]["thin"], figures
    more, record = census(preview, "main", figures, level, seed=3, max_groups=3)
    size = config["grpo"]["group_size"]
    assert (record["groups"], record["completions"], len(more)) == (3, 3 * size, 3 * size), record
    assert record["kinds"] == ["chain_sum", "leg_counting", "products"] and record["seconds"] > 0, record
    assert {r["split"] for r in more} == {"census"} and len({r["group_id"] for r in more}) == 3, more[0]
    assert {trajectory_view(r)["extra_info"]["split"] for r in more} == {"census"}  # harness code never sees train
    # each completion scored by main's reward and graded by the verifier (``more`` holds 12, asserted above)
    assert [r for r in more if not (isinstance(r["reward"], float) and 0.0 <= r["reward"] <= 1.0)] == [], more[0]
    assert [r for r in more if not r["response"]] == [], more[0]
    truths = [json.loads(r["ground_truth"]) if isinstance(r["ground_truth"], str) else r["ground_truth"] for r in more]
    assert [r["verified"] for r in more] == [float(MathDomain().verify(r["data_source"], r["response"], t)[0])
                                             for r, t in zip(more, truths)], more[0]  # the verifier's own verdict
    after, _ = slice_figures(rows + more, config["tasks"], MathDomain().eval_specs)
    assert [after[k]["groups"] for k in ("chain_sum", "leg_counting", "products")] == [2, 2, 1], after
    check, _ = slice_check(rows + more, config["tasks"], MathDomain().eval_specs)
    assert "products: " in check["detail"], check  # the census's kind the round drew no group of is judged too
