"""bench/repair_bench.py: the table's precision and recall on constructed records, and the bench end to end
on a tiny configuration (one flaw, one seed, one round, two arms per tier, real training and a real gate)."""

from __future__ import annotations

import json
import os
import shutil
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
    made 4 merges of which 1 was confirmed against its control; one merge of each cell came in its last round
    (round 2 of 3), which no live check can reach, so 1 of the 2 checked merges held."""
    def merged(*rounds: int) -> list[dict]:
        return [{"branch": f"iv/r{r}-x{k}", "round": r, "decision": "merge", "probation": True}
                for k, r in enumerate(rounds)] + [{"branch": "iv/r1-no", "round": 1, "decision": "reject",
                                                   "probation": False}]

    records = [_record("short-budget", "recipe", 0, True), _record("short-budget", "recipe", 1, False),
               _record("seed-reward", "recipe", 0, True), _record("control", "recipe", 0, True),
               _record("seed-reward", "best-of-n", 0, False),
               _record("seed-reward", "recipe", 0, True, tier="live", merges=3, confirmed=1, last_round={"0/a": 1.0},
                       rounds=3, branches=merged(0, 1, 2)),
               _record("seed-reward", "recipe", 1, False, tier="live", merges=1, confirmed=0, last_round={"1/a": 0.0},
                       rounds=3, branches=merged(2)),
               _record("seed-reward", "fixed", 0, False, tier="live", last_round={"0/a": 0.0})]
    incomplete = [{"tier": "offline", "flaw": "lr-too-high", "arm": "recipe", "seed": 0,
                   "status": "incomplete: round 0 failed to train: x"}]
    shown = table(records, incomplete)
    assert "| offline recipe | 2/3 (67%) | - | - |" in shown
    assert "| offline best-of-n | 0/1 (0%) | - | - |" in shown
    assert "| live recipe | 1/2 (50%) | 1/4 (25%) | 1/2 (50%) |" in shown
    assert "| offline | lr-too-high | recipe | 0/1 (incomplete: round 0 failed to train: x) |" in shown
    assert "| offline | control | recipe | 1/1 | 1/1 (100%) |" in shown


def test_the_live_differences_pair_each_flaw_and_pool_them() -> None:
    """Two flaws, 4 tasks each.  Recipe gains 2 tasks on one flaw and 1 on the other over fixed; best-of-n 1 on
    the first.  Pooled, a task pairs with the same flaw's task (the same task ids recur in both flaws): the
    pooled recipe gains 3 of 8 over fixed."""
    def live(flaw: str, arm: str, wins: list[float]) -> dict:
        return _record(flaw, arm, 0, arm != "fixed", tier="live", merges=1, confirmed=1,
                       last_round={f"0/t{k}": w for k, w in enumerate(wins)})

    records = [live("short-budget", "fixed", [0, 0, 0, 0]), live("short-budget", "recipe", [1, 1, 0, 0]),
               live("short-budget", "best-of-n", [1, 0, 0, 0]), live("tiny-groups", "fixed", [1, 0, 0, 0]),
               live("tiny-groups", "recipe", [1, 1, 0, 0]),
               # the control is not a flaw: its -0.500 has a row of its own and stays out of the pooled figure
               live("control", "fixed", [1, 1, 0, 0]), live("control", "recipe", [0, 0, 0, 0])]
    shown = table(records, [])
    rows = {tuple(cell.strip() for cell in line.split("|")[1:3]): line for line in shown.splitlines()}
    pooled = rows[("all flaws (pooled)", "recipe")]
    assert pooled.startswith("| all flaws (pooled) | recipe | +0.375 [") and "] | +0.250 [" in pooled, pooled
    assert rows[("short-budget", "recipe")].startswith("| short-budget | recipe | +0.500 [")
    assert "] | +0.250 [" in rows[("short-budget", "recipe")]
    # best-of-n ran one flaw: tiny-groups has no best-of-n column, and the pooled difference pairs only
    # short-budget's tasks (+1 of 4)
    assert rows[("tiny-groups", "recipe")].startswith("| tiny-groups | recipe | +0.250 [")
    assert rows[("tiny-groups", "recipe")].endswith("] | - | - |")
    assert rows[("short-budget", "best-of-n")].startswith("| short-budget | best-of-n | +0.250 [")
    assert rows[("control", "recipe")].startswith("| control | recipe | -0.500 [")


def _bench(out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    # the test's own arguments last: a --knob of the test wins over TINY's
    return subprocess.run([sys.executable, "bench/repair_bench.py", "--out", str(out), "--results",
                           str(out / "results.jsonl"), *TINY, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=1800,
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
    head = subprocess.run(["git", "rev-parse", "--short=10", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert recipe["code"].split("+")[0] == head  # the commit that produced the cell
    assert "truncation" in recipe["named"]  # the digest of a policy cut off at 8 tokens names it
    # each branch's decision, as the gate gave it, is the one git recorded: merged, or tagged rejected
    from harness_repo.repo import HarnessRepo
    ivs = {iv.branch: iv for iv in HarnessRepo.open(out / "short-budget" / "offline" / "recipe" / "seed0" /
                                                    "harness").interventions()}
    assert recipe["branches"] and [b["decision"] for b in recipe["branches"]] == [
        "merge" if ivs[b["branch"]].merge_commit else "reject" if ivs[b["branch"]].status == "rejected" else "undecided"
        for b in recipe["branches"]]
    # truncation and groups of 2 are both root causes editing harness.yaml: the stronger signal takes the slot
    # (a tie keeps rule order, truncation first); truncation moves to what the archive's finished answers need
    # (recipe_evidence.needed_budget, never the seed's 32), which repairs it when it is past 8
    from meta_agent.agents.recipes import overshoot
    digest = json.loads((out / "short-budget" / "shared" / "seed0" / "rounds" / "0" / "digest.json").read_text())
    first = "iv/r0-truncation" if overshoot(digest["truncation_rate"], 0.25) >= \
        overshoot(digest["zero_variance_share"], 0.5) else "iv/r0-larger-groups"
    assert recipe["branches"][0]["branch"] == first, recipe["branches"]
    assert recipe["branches"][0]["addresses"] is (first == "iv/r0-truncation")  # larger groups leave it at 8
    merged = first == "iv/r0-truncation" and recipe["branches"][0]["decision"] == "merge"
    budget = int(recipe["repair_check"].removeprefix("max_completion_length "))
    from meta_agent.agents.recipe_evidence import gather, needed_budget
    from rl_backend.archive import Archive
    need = needed_budget(gather(Archive(out / "short-budget" / "shared" / "seed0" / "archive"), 0))
    assert need is not None and need[0] > 8, need
    assert budget == (need[0] if merged else 8) and recipe["repaired"] is merged
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
    # a finished cell's policies are deleted (they filled the disk of a 3-seed run), and the shared round 0's
    # once every arm of the run finished (the offline tier's llm cell had not, so the live tier found it)
    assert not list((out / "short-budget" / "recipe" / "seed0" / "rounds").glob("*/train/policy"))
    assert not (out / "short-budget" / "shared" / "seed0" / "rounds" / "0" / "train" / "policy").exists()
    assert shared.exists()  # its record, archive and digest stay
    # the recipe arm names the fixed arm as its round-1 control (judge.live_control); the fixed arm has none
    control = json.loads((out / "short-budget" / "recipe" / "seed0" / "live_control.json").read_text())
    assert control == {"run_dir": "../../fixed/seed0", "rounds": [1]}
    assert not (out / "short-budget" / "fixed" / "seed0" / "live_control.json").exists()
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["tier"], r["arm"]) for r in records) == [("live", "fixed"), ("live", "recipe"),
                                                              ("offline", "recipe")]
    # each live cell names the agent that proposed in it (compare_arms once ran the recipe agent for any arm)
    assert {r["arm"]: r["agent"] for r in records if r["tier"] == "live"} == {"fixed": None, "recipe": "recipe"}
    # the live cell keeps the gate's decision on every branch its run made, as git records them
    [live_recipe] = [r for r in records if (r["tier"], r["arm"]) == ("live", "recipe")]
    branches = subprocess.run(["git", "for-each-ref", "--format=%(refname:short)", "refs/heads/iv/"], text=True,
                              cwd=out / "short-budget" / "recipe" / "seed0" / "harness", capture_output=True,
                              check=True).stdout.split()
    assert branches and sorted(b["branch"] for b in live_recipe["branches"]) == sorted(branches)
    checks = {c["branch"]: c["outcome"] for p in (out / "short-budget" / "recipe" / "seed0" / "rounds").glob(
        "*/digest.json") for c in json.loads(p.read_text()).get("live_checks") or []}
    assert [b["live"] for b in live_recipe["branches"]] == [checks.get(b["branch"]) for b in live_recipe["branches"]]
    decided = [b["decision"] for b in live_recipe["branches"]]
    gate = (f"{sum(d == 'merge' and not b['probation'] for d, b in zip(decided, live_recipe['branches']))}/"
            f"{sum(b['probation'] for b in live_recipe['branches'])}/{decided.count('reject')}")
    assert f"| live | short-budget | recipe | 1/1 | - | - | {gate} |" in live.stdout
    done = out / "short-budget" / "recipe" / "seed0" / "result.json"
    finished_at = done.stat().st_mtime_ns

    again = _bench(out, "live", "--flaws", "short-budget", "--arms", "recipe")
    assert again.returncode == 0, again.stderr[-3000:]
    assert done.stat().st_mtime_ns == finished_at and shared.stat().st_mtime_ns == trained_at  # read back
    assert len((out / "results.jsonl").read_text().splitlines()) == 3  # nothing appended twice
    # a cell finished before the decisions were kept gets them from its harness repo on the next run
    old = json.loads(done.read_text())
    done.write_text(json.dumps({k: v for k, v in old.items() if k != "branches"}))
    upgraded = _bench(out, "live", "--flaws", "short-budget", "--arms", "recipe")
    assert upgraded.returncode == 0, upgraded.stderr[-3000:]
    lines = (out / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4 and json.loads(lines[-1])["branches"] == old["branches"] == live_recipe["branches"]

    # an arm run again (or added) after the fixed arm finished, whose shared round 0 lost its policy: round 0
    # trains again, and the recipe arm still gets its control (it was written only into a shared folder that
    # existed, so a rerun in a new folder measured round 0's merges against nothing)
    shutil.rmtree(out / "short-budget" / "recipe" / "seed0")
    rerun = _bench(out, "live", "--flaws", "short-budget", "--arms", "recipe")
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "shared round 0 of seed 0: its policy was deleted; training it again" in rerun.stdout
    assert "live short-budget recipe seed 0: finished" in rerun.stdout
    assert shared.stat().st_mtime_ns != trained_at
    assert json.loads((out / "short-budget" / "recipe" / "seed0" / "live_control.json").read_text()) == control


def test_the_shared_round_0_keeps_its_policy_while_an_arm_may_go_on_from_it(tmp_path: Path) -> None:
    from repair_live import prune_shared as _prune_shared

    policy = tmp_path / "shared" / "seed0" / "rounds" / "0" / "train" / "policy"
    policy.mkdir(parents=True)
    (policy / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "shared" / "seed0" / "compare.json").write_text('{"status": "finished"}')
    for arm, status in (("fixed", "finished"), ("best-of-n", "running")):  # best-of-n: killed in an earlier run
        (tmp_path / arm / "seed0").mkdir(parents=True)
        (tmp_path / arm / "seed0" / "compare.json").write_text(json.dumps({"status": status}))
    _prune_shared(tmp_path, 0)
    assert (policy / "model.safetensors").exists()  # best-of-n's round 1 would start from it
    _prune_shared(tmp_path, 1)  # another seed's arms say nothing about this one
    assert (policy / "model.safetensors").exists()
    (tmp_path / "best-of-n" / "seed0" / "compare.json").write_text('{"status": "finished"}')
    _prune_shared(tmp_path, 0)
    assert not policy.exists() and (tmp_path / "shared" / "seed0" / "compare.json").exists()


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
    assert proc.returncode == 2 and "unknown flaw 'no-such-flaw'; the flaws: seed-reward, pays-wrong" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr  # one line, no traceback
    assert not (tmp_path / "r").exists()


def test_a_missing_or_broken_flaws_module_is_refused_in_one_line(tmp_path: Path) -> None:
    missing = _bench(tmp_path / "r", "offline", "--flaws-from", str(tmp_path / "nope.py"))
    broken = tmp_path / "broken.py"
    broken.write_text("import no_such_module_anywhere\n")
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    broken_run = _bench(tmp_path / "r", "table", "--flaws-from", str(broken))
    for proc, said in ((missing, "nope.py: no such file"),
                       (broken_run, "the module failed to load: ModuleNotFoundError"),
                       (_bench(tmp_path / "r", "offline", "--flaws-from", str(empty)), "it registered no flaw")):
        assert proc.returncode == 2 and said in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "r").exists()


def test_held_out_flaws_load_from_a_module_and_count_apart_until_a_recipe_is_added(tmp_path: Path) -> None:
    """A flaw planted against today's recipe set is held-out; one planted against an older set is in-sample
    (a recipe was added after it); the table reports the two apart, each with the recipe versions."""
    from repair_flaws import FLAWS, HELD_OUT, IN_SAMPLE, load_flaws, sample

    from meta_agent.agents.recipes import RECIPES_VERSION

    module = tmp_path / "more_flaws.py"
    module.write_text(
        "from repair_flaws import FLAWS, Flaw, register\n"
        "base = FLAWS['short-budget']\n"
        "register(Flaw('mine-now', 'today', ('truncation',), base.edit, base.symptom, base.repaired),\n"
        f"         Flaw('mine-old', 'before', ('truncation',), base.edit, base.symptom, base.repaired,\n"
        f"              recipes_version={RECIPES_VERSION - 1}))\n")
    assert load_flaws(module) == ["mine-now", "mine-old"]
    assert FLAWS["mine-now"].recipes_version == RECIPES_VERSION  # unstated: planted against today's recipes
    assert (sample("mine-now"), sample("mine-old"), sample("short-budget")) == (HELD_OUT, IN_SAMPLE, IN_SAMPLE)
    results = tmp_path / "results.jsonl"
    results.write_text("\n".join(json.dumps(_record(f, "recipe", 0, f != "mine-old", sample=s, recipes_version=v))
                                 for f, s, v in (("short-budget", IN_SAMPLE, 1), ("mine-old", IN_SAMPLE, 1),
                                                 ("mine-now", HELD_OUT, 2))))
    proc = subprocess.run([sys.executable, "bench/repair_bench.py", "table", "--results", str(results)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=os.environ | {"PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    inside, _, held = proc.stdout.partition("## held-out flaws (recipes version 2)")
    assert inside.startswith("## in-sample flaws (recipes version 1)") and held
    assert "| offline recipe | 1/2 (50%) |" in inside and "| offline recipe | 1/1 (100%) |" in held
    assert "mine-now" in held and "mine-now" not in inside and "mine-old" in inside
