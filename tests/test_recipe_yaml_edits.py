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
