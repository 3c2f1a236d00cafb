"""bench/repair_bench.py's ``table`` command: cells run at different sizes are shown apart, never pooled.

A live cell's held-out outcomes are keyed ``seed/task``: a tiny run's seed 0 and a full-size run's seed 0 share
keys, so pooled together the paired difference against the fixed arm mixed two configurations."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))  # bench/ scripts import each other so

from repair_bench import main  # noqa: E402


def _live(arm: str, config: dict, rounds: int, outcomes: dict[str, float]) -> dict:
    return {"tier": "live", "flaw": "short-budget", "arm": arm, "seed": 0, "status": "finished",
            "config": json.dumps(config, sort_keys=True), "rounds": rounds, "repaired": arm != "fixed",
            "merges": 1, "confirmed": 1, "repair_merged_round": 0,
            "last_round": {f"0/{task}": v for task, v in outcomes.items()}}


def _table(results: Path, capsys: pytest.CaptureFixture) -> str:
    assert main(["table", "--results", str(results)]) == 0
    return capsys.readouterr().out


def test_the_table_command_shows_each_configuration_apart(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tiny = {"candidates": 2, "heldout": 4, "knobs": ["steps_per_round=1"]}
    full = {"candidates": 2, "heldout": 128, "knobs": []}
    tasks = [f"t{k}" for k in range(8)]
    records = [
        # tiny: the recipe arm loses every task the fixed arm solved (-1.0)
        _live("fixed", tiny, 2, {t: 1.0 for t in tasks}), _live("recipe", tiny, 2, {t: 0.0 for t in tasks}),
        # full size: the recipe arm wins every task (+1.0); the same seed, the same task keys
        _live("fixed", full, 3, {t: 0.0 for t in tasks}), _live("recipe", full, 3, {t: 1.0 for t in tasks}),
    ]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    shown = _table(results, capsys)
    sections = {s.splitlines()[0]: s for s in shown.split("### ")[1:]}
    assert sorted(sections) == [
        "live, 2 rounds; candidates 2, heldout 4, knobs steps_per_round=1 (2 cells)",
        "live, 3 rounds; candidates 2, heldout 128, knobs as the seed (2 cells)"]
    tiny_section, full_section = (sections[k] for k in sorted(sections))
    assert "| short-budget | recipe | -1.000" in tiny_section
    assert "| short-budget | recipe | +1.000" in full_section
    assert ("| live | short-budget | fixed | 1/1 |" in tiny_section
            and "| live | short-budget | fixed | 1/1 |" in full_section)


def test_an_empty_results_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text("")
    shown = _table(results, capsys)
    assert shown.strip() == "(no cell in the results file yet)"


def test_a_run_that_ends_rolled_back_is_scored_by_the_policy_it_keeps(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    """The fixed arm's last round collapsed (0 of 8) and the loop rolled back to round 0's policy (4 of 8): the
    run hands its user round 0's policy, so the recipe arm (6 of 8) is +0.25 against it, not +0.75."""
    full = {"candidates": 2, "heldout": 128, "knobs": []}
    tasks = [f"t{k}" for k in range(8)]
    fixed = _live("fixed", full, 3, {t: 0.0 for t in tasks}) | {
        "kept_policy": {f"0/{t}": float(k < 4) for k, t in enumerate(tasks)}, "kept_from": 0}
    recipe = _live("recipe", full, 3, {t: float(k < 6) for k, t in enumerate(tasks)})
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(fixed) + "\n" + json.dumps(recipe) + "\n")
    shown = _table(results, capsys)
    assert "| short-budget | recipe | +0.250" in shown and "the policy the run keeps" in shown


def test_precision_by_edit_counts_each_merge_a_later_round_checked(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture) -> None:
    """Per arm and edit: merged, checked by a later round, confirmed. A last-round merge is merged but unchecked;
    a cell whose record predates the outcomes is left out (and the heading says how many cells count)."""
    full = {"candidates": 2, "heldout": 128, "knobs": []}

    def branch(name: str, round: int, decision: str = "merge", live: str | None = None) -> dict:
        return {"branch": name, "round": round, "decision": decision, "probation": True, "live": live}

    seed0 = _live("recipe", full, 3, {"t": 1.0}) | {"branches": [
        branch("iv/r0-truncation", 0, live="confirmed"), branch("iv/r0-final-answer-prompt", 0, live="refuted"),
        branch("iv/r1-truncation", 1, live="refuted"), branch("iv/r2-larger-groups", 2),
        branch("iv/r1-kl-clip", 1, decision="reject")]}
    seed1 = _live("recipe", full, 3, {"t": 1.0}) | {"seed": 1, "branches": [
        branch("iv/r0-truncation", 0, live="confirmed")]}
    older = _live("recipe", full, 3, {"t": 1.0}) | {"seed": 2, "branches": [
        {k: v for k, v in branch("iv/r0-truncation", 0).items() if k != "live"}]}
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in (seed0, seed1, older)))
    shown = _table(results, capsys)
    assert "Live precision by edit (2 agent cells whose record keeps each merge's outcome)" in shown
    assert "| recipe | truncation | 3 | 3 | 2/3 (67%) |" in shown
    assert "| recipe | final-answer-prompt | 1 | 1 | 0/1 (0%) |" in shown
    assert "| recipe | larger-groups | 1 | 0 | - |" in shown
    assert "kl-clip" not in shown  # rejected: never merged


def test_the_table_says_which_code_its_cells_ran_at(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    full = {"candidates": 2, "heldout": 128, "knobs": []}
    old = _live("fixed", full, 3, {"t0": 0.0}) | {"date": "2026-11-26"}  # before records named their code
    a = _live("recipe", full, 3, {"t0": 1.0}) | {"date": "2026-11-27", "code": "a" * 40}
    b = [_live("best-of-n", full, 3, {"t0": 1.0}) | {"seed": s, "date": d, "code": "b" * 40 + "+changes"}
         for s, d in ((0, "2026-11-28"), (1, "2026-11-29"))]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in [old, a, *b]))
    shown = _table(results, capsys)
    assert ("Code the cells ran at: 2 at bbbbbbbbbb+changes, 2026-11-28 to 2026-11-29; 1 at aaaaaaaaaa, 2026-11-27; "
            "1 with no code recorded, 2026-11-26.") in shown.splitlines()


def test_the_table_of_some_flaws_pools_only_them(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    full = {"candidates": 2, "heldout": 128, "knobs": []}
    records = [_live("fixed", full, 3, {"t0": 0.0, "t1": 0.0}), _live("recipe", full, 3, {"t0": 1.0, "t1": 1.0}),
               *(_live(arm, full, 3, {"t0": 1.0, "t1": 1.0}) | {"flaw": "pays-wrong"} for arm in ("fixed", "recipe"))]
    results = tmp_path / "results.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records))
    both = _table(results, capsys)
    assert "| all flaws (pooled) | recipe | +0.500" in both  # +1 on short-budget's two tasks, 0 on pays-wrong's
    assert main(["table", "--results", str(results), "--flaws", "short-budget"]) == 0
    one = capsys.readouterr().out
    assert "| all flaws (pooled) | recipe | +1.000" in one and "pays-wrong" not in one


def test_cells_of_different_code_are_shown_apart_unless_pooling_is_asked(tmp_path: Path) -> None:
    from repair_table import tables_by_config

    full = {"candidates": 2, "heldout": 128, "knobs": []}
    old = [_live("fixed", full, 3, {f"t{k}": 0.0 for k in range(8)}),
           _live("recipe", full, 3, {f"t{k}": 1.0 for k in range(8)})]  # recipe +1.000 at code a
    new = [_live("fixed", full, 3, {f"u{k}": 1.0 for k in range(8)}),
           _live("recipe", full, 3, {f"u{k}": 1.0 for k in range(8)})]  # recipe +0.000 at code b
    records = [r | {"code": "a" * 40, "date": "2026-11-27"} for r in old] + [
        r | {"code": "b" * 40, "seed": 1, "date": "2026-11-28"} for r in new]
    apart = tables_by_config(records, by_code=True)
    headings = [line for line in apart.splitlines() if line.startswith("### ")]
    assert headings == ["### live, 3 rounds; candidates 2, heldout 128, knobs as the seed; code bbbbbbbbbb (2 cells)",
                        "### live, 3 rounds; candidates 2, heldout 128, knobs as the seed; code aaaaaaaaaa (2 cells)"]
    newest, folded = apart.split("<details><summary>1 older code versions</summary>")  # the newest code first
    assert "code bbbbbbbbbb" in newest and "code aaaaaaaaaa" in folded and folded.rstrip().endswith("</details>")
    assert "| short-budget | recipe | +1.000" in apart and "| short-budget | recipe | +0.000" in apart
    pooled = tables_by_config(records, by_code=False)
    assert pooled.count("### ") == 1 and "| short-budget | recipe | +0.500" in pooled
    assert "Code the cells ran at: 2 at bbbbbbbbbb, 2026-11-28; 2 at aaaaaaaaaa, 2026-11-27." in pooled


def test_a_held_out_set_keeps_its_held_out_recall_after_an_in_sample_rerun(tmp_path: Path) -> None:
    """The held-out table shows what each arm repaired while no recipe was written for the set, even when the
    same flaws were rerun in-sample later (at a later recipe set, and repaired then): that rerun shows apart."""
    from repair_table import flaw_sets, held_out_recall

    def cell(flaw: str, arm: str, sample: str, version: int, repaired: bool, tier: str = "offline") -> dict:
        return {"tier": tier, "flaw": flaw, "arm": arm, "seed": 0, "status": "finished", "sample": sample,
                "planted_against": 3, "recipes_version": version, "repaired": repaired}

    records = [cell("a", "recipe", "held-out", 3, True), cell("b", "recipe", "held-out", 3, False),
               cell("c", "recipe", "held-out", 3, False), cell("a", "search", "held-out", 3, False),
               cell("b", "search", "held-out", 3, False), cell("c", "search", "held-out", 3, True),
               cell("b", "fixed", "held-out", 3, False, tier="live"),
               cell("b", "recipe", "held-out", 3, True, tier="live"),
               # a rerun at the same recipe set (a fix in progress, before the version was raised): not the figure
               cell("b", "recipe", "held-out", 3, True),
               # later, in-sample: the recipe arm repairs all three, then one of them fails a rerun
               *(cell(f, "recipe", "in-sample", 4, True) for f in "abc"), cell("c", "recipe", "in-sample", 5, False)]
    (tmp_path / "heldout_flaws_x.py").write_text("PLANTED_AGAINST = 3\n")
    shown = held_out_recall(records, flaw_sets(tmp_path))
    row = next(line for line in shown.splitlines() if line.startswith("| x |"))
    assert row == "| x | 3 | 1/3 (33%) | 1/3 (33%) | - | 1/1 (100%) | 2/3 (67%) (set 4, 5) |"
    assert "| all sets | | 1/3 (33%) | 1/3 (33%) | - | | |" in shown
    assert held_out_recall([cell("a", "recipe", "in-sample", 4, True)], {}) == \
        "(no held-out cell in the results file yet)"
