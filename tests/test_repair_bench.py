"""bench/repair_bench.py: the table's precision and recall on constructed records, and the bench end to end
on a tiny configuration (one flaw, one seed, one round, two arms per tier, real training and a real gate)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # bench/ scripts import each other so

from repair_bench import table  # noqa: E402

TINY = ["--seeds", "1", "--rounds", "1", "--heldout-size", "4", "--candidates", "2", "--knob", "steps_per_round=1",
        "--knob", "group_size=2", "--knob", "prompts_per_step=2"]


def _record(flaw: str, arm: str, seed: int, repaired: bool, tier: str = "offline", **more) -> dict:
    return {"tier": tier, "flaw": flaw, "arm": arm, "seed": seed, "status": "finished", "repaired": repaired,
            "named": ["truncation"], "addressed": repaired, "branches": [], **more}


def test_recall_counts_repaired_flaws_per_arm_and_precision_confirmed_merges() -> None:
    """By hand: recipe repairs 2 of 3 flaw cells (the control does not count), best-of-n 0 of 1; live, recipe
    made 4 merges of which 1 was confirmed against its control."""
    records = [_record("short-budget", "recipe", 0, True), _record("short-budget", "recipe", 1, False),
               _record("seed-reward", "recipe", 0, True), _record("control", "recipe", 0, True),
               _record("seed-reward", "best-of-n", 0, False),
               _record("seed-reward", "recipe", 0, True, tier="live", merges=3, confirmed=1, last_round={"0/a": 1.0}),
               _record("seed-reward", "recipe", 1, False, tier="live", merges=1, confirmed=0, last_round={"1/a": 0.0}),
               _record("seed-reward", "fixed", 0, False, tier="live", last_round={"0/a": 0.0})]
    incomplete = [{"tier": "offline", "flaw": "lr-too-high", "arm": "recipe", "seed": 0,
                   "status": "incomplete: round 0 failed to train: x"}]
    shown = table(records, incomplete)
    assert "| offline recipe | 2/3 (67%) | - |" in shown
    assert "| offline best-of-n | 0/1 (0%) | - |" in shown
    assert "| live recipe | 1/2 (50%) | 1/4 (25%) |" in shown
    assert "| offline | lr-too-high | recipe | 0/1 (incomplete: round 0 failed to train: x) |" in shown
    assert "| offline | control | recipe | 1/1 | 1/1 (100%) |" in shown


def _bench(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # the test's own arguments last: a --knob of the test wins over TINY's
    return subprocess.run([sys.executable, "bench/repair_bench.py", "--out", str(out), "--results",
                           str(out / "results.jsonl"), *TINY, *args], cwd=ROOT, capture_output=True, text=True, timeout=1800,
                          env=os.environ | {"COLUMNS": "1000", "PYTHONPATH": str(ROOT)} | (env or {}))


@pytest.mark.slow
@pytest.mark.docker
def test_one_flaw_one_seed_one_round_offline_then_live_then_nothing_is_redone(tmp_path: Path, docker_sandbox) -> None:
    from llm_server import ScriptedLLMServer

    out = tmp_path / "repair"
    with ScriptedLLMServer() as server:  # every call a 500: the llm arm's cell is incomplete, with the cause
        offline = _bench(out, "offline", "--flaws", "short-budget", "--arms", "recipe", "llm", "--model",
                         "openai/test-model", "--api-base", server.api_base, env={"OPENAI_API_KEY": "test"})
    assert offline.returncode == 0, offline.stderr[-3000:]
    assert "offline short-budget recipe seed 0: finished" in offline.stdout
    assert "offline short-budget llm seed 0: incomplete: the LLM endpoint failed" in offline.stdout
    [recipe] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert (recipe["arm"], recipe["flaw"], recipe["status"]) == ("recipe", "short-budget", "finished")
    assert "truncation" in recipe["named"]  # the digest of a policy cut off at 8 tokens names it
    assert all(b["decision"] in ("merge", "reject", "undecided") for b in recipe["branches"])
    # main's budget after the gate's merges: 8, or 12 where the truncation recipe (x 1.5) merged; 24 repairs it
    budget = int(recipe["repair_check"].removeprefix("max_completion_length "))
    merged = any(b["branch"].endswith("-truncation") and b["decision"] == "merge" for b in recipe["branches"])
    assert budget == (12 if merged else 8) and recipe["repaired"] is False
    row = next(line for line in offline.stdout.splitlines() if line.startswith("| offline | short-budget | llm |"))
    assert "0/1 (incomplete: the LLM endpoint failed" in row

    shared = out / "short-budget" / "shared" / "seed0" / "rounds" / "0" / "train" / "result.json"
    trained_at = shared.stat().st_mtime_ns
    live = _bench(out, "live", "--flaws", "short-budget", "--arms", "recipe")
    assert live.returncode == 0, live.stderr[-3000:]
    assert shared.stat().st_mtime_ns == trained_at  # the live tier goes on from the offline tier's round 0
    for arm in ("fixed", "recipe"):
        assert f"live short-budget {arm} seed 0: finished" in live.stdout
    assert "| live | short-budget | fixed | 1/1 |" in live.stdout
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["tier"], r["arm"]) for r in records) == [("live", "fixed"), ("live", "recipe"),
                                                              ("offline", "recipe")]
    done = out / "short-budget" / "recipe" / "seed0" / "result.json"
    finished_at = done.stat().st_mtime_ns

    again = _bench(out, "live", "--flaws", "short-budget", "--arms", "recipe")
    assert again.returncode == 0, again.stderr[-3000:]
    assert done.stat().st_mtime_ns == finished_at and shared.stat().st_mtime_ns == trained_at  # read back
    assert len((out / "results.jsonl").read_text().splitlines()) == 3  # nothing appended twice


@pytest.mark.docker
def test_a_flaw_whose_round_0_fails_is_reported_not_dropped(tmp_path: Path, docker_sandbox) -> None:
    """A group of one cannot train (GRPO compares completions of one prompt): the cell says round 0 failed,
    the table still prints it, and nothing is written to the results file."""
    proc = _bench(tmp_path / "r", "offline", "--flaws", "control", "--arms", "recipe", "--knob", "group_size=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "offline control recipe seed 0: incomplete: round 0 failed to train" in proc.stdout
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| offline | control | recipe |"))
    assert "0/1 (incomplete: round 0 failed to train" in row and "group_size" in row
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_an_unknown_flaw_is_refused_before_any_run(tmp_path: Path) -> None:
    proc = _bench(tmp_path / "r", "offline", "--flaws", "no-such-flaw")
    assert proc.returncode == 1 and "unknown flaw 'no-such-flaw'; the flaws: seed-reward, pays-wrong" in proc.stderr
    assert not (tmp_path / "r").exists()
