"""A recipe's harness.yaml keeps its comments when only knob values change, so a branch's diff shows the change."""

from __future__ import annotations

from pathlib import Path

import yaml

from meta_agent.agents.recipe_edits import dump_config, load_config

SEEDS = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds"


def changed_lines(before: str, after: str) -> list[tuple[str, str]]:
    return [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]


def test_a_knob_change_edits_its_line_and_keeps_every_comment() -> None:
    original = (SEEDS / "code" / "harness.yaml").read_text()
    data = load_config(original)
    data["grpo"]["max_completion_length"] = 192
    data["grpo"]["dynamic_sampling"] = True  # a knob the seed does not set: added at the end of grpo
    data["notes"] = "longer answers"
    text = dump_config(data, original)
    assert yaml.safe_load(text) == data
    comments = [line for line in original.splitlines() if line.lstrip().startswith("#")]
    assert comments and [line for line in text.splitlines() if line.lstrip().startswith("#")] == comments
    assert len(text.splitlines()) == len(original.splitlines()) + 1
    grpo = text.split("grpo:")[1].split("\nnotes:")[0].splitlines()
    assert grpo[-1] == "  dynamic_sampling: true"
    assert changed_lines(original, text)[0] == ("  max_completion_length: 128",
                                                "  max_completion_length: 192")


def test_a_change_of_another_kind_is_written_whole_with_the_leading_comment() -> None:
    original = (SEEDS / "math" / "harness.yaml").read_text()
    data = load_config(original)
    data["tasks"] = [*data["tasks"], {"name": data["tasks"][0]["name"], "weight": 0.5,
                                      "config": dict(data["tasks"][0].get("config") or {})}]
    text = dump_config(data, original)
    assert yaml.safe_load(text) == data
    assert text.splitlines()[0] == original.splitlines()[0] and original.splitlines()[0].startswith("#")


def diff_lines(before: str, after: str) -> list[str]:
    """The changed lines of a unified diff (``-old``/``+new``), as ``git show`` lists them."""
    import difflib

    return [line for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_a_curriculum_step_is_a_one_line_diff_with_every_comment_and_number_kept() -> None:
    """The issue's `show iv/r2-curriculum-step`: `products.max_terms 2 -> 3` re-dumped the whole file, turned
    `2.0e-5` into `2.0e-05` and deleted the seed's comments (why 4x4 groups, why 2e-5, why 0.7)."""
    original = (SEEDS / "math" / "harness.yaml").read_text()
    data = load_config(original)
    products = next(t for t in data["tasks"] if t["name"] == "products")
    products["config"] = dict(products["config"], max_terms=3)  # as recipe_batch.curriculum_step assigns it
    text = dump_config(data, original)
    assert yaml.safe_load(text) == data
    assert diff_lines(original, text) == [
        "-    config: {min_terms: 2, max_terms: 2, min_digits: 1, max_digits: 1}",
        "+    config: {min_terms: 2, max_terms: 3, min_digits: 1, max_digits: 1}"]
    assert "  learning_rate: 2.0e-5" in text.splitlines()
    comments = [line for line in original.splitlines() if line.lstrip().startswith("#")]
    assert len(comments) >= 8 and [line for line in text.splitlines() if line.lstrip().startswith("#")] == comments


def test_a_learning_rate_edit_changes_its_line_alone() -> None:
    original = (SEEDS / "math" / "harness.yaml").read_text()
    data = load_config(original)
    data["grpo"]["learning_rate"] = 1.0e-5
    text = dump_config(data, original)
    assert yaml.safe_load(text)["grpo"]["learning_rate"] == 1.0e-5
    diff = diff_lines(original, text)
    assert len(diff) == 2 and diff[0] == "-  learning_rate: 2.0e-5" and diff[1].startswith("+  learning_rate: 1")
