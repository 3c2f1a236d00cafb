"""The repair benchmark's live tier (``bench/repair_bench.py live``): one flaw x seed x arm is compare_arms' run of
``--rounds`` rounds on the flawed harness, then scored: repaired on main, the round the repair merged, the live
check's precision, the last (or kept) policy's exam; the shared round 0's policy is pruned once no arm needs it."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import compare_arms
from repair_cells import RESULT, agent_for, append, check, stamp

from harness_repo.repo import HarnessRepo
from meta_agent.judge.live_control import CONTROL_FILE
from meta_agent.live_check import backtest_precision
from meta_agent.run_dir import RunDir, write_json_atomic
from sandboxes.docker import DockerSandbox


def live_cell(flaw: str, seed: int, arm: str, args: argparse.Namespace, sandbox: DockerSandbox) -> dict:
    """One flaw x seed x arm of the live tier: compare_arms' run of ``args.rounds`` rounds, then scored."""
    rd = RunDir(args.out / flaw / arm / f"seed{seed}")  # compare_arms' layout: its shared round 0 is OUT/<flaw>/shared
    done = rd.path / RESULT
    if done.exists():
        record = json.loads(done.read_text())
        if record.get("status") == "finished" and ("kept_policy" not in record or any(
                "live" not in b for b in record.get("branches", [{}]))):  # a cell finished before they were kept
            record["branches"] = _decisions(HarnessRepo.open(rd.harness), rd.path)
            record |= _kept_policy(rd, seed, args.rounds)
            write_json_atomic(done, record)
            append(args.results, record)
        return record
    # round 1 confirms round 0's merges against the fixed arm's round 1 (judge.live_control).  Written into the
    # arm's own folder once it exists: the shared round 0 may not exist yet (a fixed arm finished in an earlier
    # run whose shared folder is gone), and a control written only there was then never made.
    control = {CONTROL_FILE: json.dumps({"run_dir": f"../../fixed/seed{seed}", "rounds": [1]})} if arm != "fixed" \
        else None
    # the arm's own agent: compare_arms alone knows only recipe and random-edit, and ran the recipe agent for any
    # other arm (every live search cell before the record named its agent)
    agent = None if arm == "fixed" else agent_for(arm, flaw, seed, args, sandbox, rd.path.name)
    run = compare_arms.run_arm(rd, arm, seed, args, sandbox, files=control, agent=agent)
    record = {"tier": "live", "flaw": flaw, "seed": seed, "arm": arm, "config": args.config_key,
              "rounds": args.rounds, "status": run.get("status", "not run"), "agent": run.get("agent")}
    if record["status"] != "finished":
        if str(record["status"]).startswith("incomplete: shared round 0"):
            record["status"] = "incomplete: round 0 failed to train: " + record["status"]
        return record
    repo = HarnessRepo.open(rd.harness)
    merged_round = None
    for iv in sorted(repo.interventions(), key=lambda iv: iv.round):
        if iv.merge_commit and not iv.revert_commit and \
                check(flaw, repo, iv.branch, rd.path / "exports" / "b", sandbox)[0]:
            merged_round = iv.round
            break
    digests = [json.loads(p.read_text()) for p in sorted(rd.path.glob("rounds/*/digest.json"))]
    precision = backtest_precision(repo.interventions(), digests)
    outcomes = compare_arms._outcomes(rd, args.rounds)[1].get(args.rounds - 1, {})
    record |= {"repaired": check(flaw, repo, "main", rd.path / "exports" / "main", sandbox)[0], "repair_merged_round":
               merged_round, "merges": precision["merges"], "confirmed": precision["confirmed"],
               "last_round": {f"{seed}/{t}": v for t, v in outcomes.items()}, "branches": _decisions(repo, rd.path),
               **stamp(flaw)} | _kept_policy(rd, seed, args.rounds)
    write_json_atomic(done, record)
    append(args.results, record)
    if not args.keep_policies:
        _prune_policies(rd)
    return record


def prune_shared(root: Path, seed: int) -> None:
    """Delete the policy of ``root``'s shared round 0 of ``seed`` once no arm can still go on from it: every live
    arm folder that copied it has finished (the offline tier reads only its archive and digest).  An arm run
    later trains round 0 again (``compare_arms.shared_round0``).  Without this the offline tier over every flaw
    kept 1.6 GB per flaw and seed, and filled this machine's disk beside four live cells."""
    arms = [p for p in root.glob(f"*/seed{seed}/{compare_arms.RECORD}") if p.parent.parent.name != compare_arms.SHARED]
    if all(json.loads(p.read_text()).get("status") == "finished" for p in arms):
        _prune_policies(RunDir(root / compare_arms.SHARED / f"seed{seed}"))


def _prune_policies(rd: RunDir) -> None:
    """Delete a run's policy folders (weights and optimizer state, about 1.6 GB a round at full size): its
    record, archive, digests and harness repo stay.  A 3-seed flaw without this filled the disk mid-run."""
    for policy in sorted(rd.path.glob("rounds/*/train/policy")):
        shutil.rmtree(policy)


def _kept_policy(rd: RunDir, seed: int, rounds: int) -> dict:
    """The exam of the policy the run ends with, by ``seed/task``: the last round's, unless that round's exam fell
    and the loop rolled back (``meta_agent.run.lineage``), when the run keeps the policy the rollback returned to
    (an earlier round's, or the untrained base policy).  ``kept_from``: that round, ``"base"``, or None."""
    digest = rd.round_dir(rounds - 1) / "digest.json"
    plan = json.loads(digest.read_text()).get("rollback") if digest.exists() else None
    base, by_round = compare_arms._outcomes(rd, rounds)
    if not plan:
        return {"kept_policy": {f"{seed}/{t}": v for t, v in by_round.get(rounds - 1, {}).items()}, "kept_from": None}
    kept = base if plan["round"] is None else by_round.get(plan["round"], {})
    return {"kept_policy": {f"{seed}/{t}": v for t, v in kept.items()},
            "kept_from": "base" if plan["round"] is None else plan["round"]}


def _decisions(repo: HarnessRepo, run: Path) -> list[dict]:
    """The gate's decision on every branch of a live cell's run, as git records it (the table's gate column),
    and the live check's outcome on each merge a later round checked (``live``: None where none did)."""
    live = {check["branch"]: check["outcome"] for path in sorted(run.glob("rounds/*/digest.json"))
            for check in json.loads(path.read_text()).get("live_checks") or []}
    return [{"branch": iv.branch, "round": iv.round,
             "decision": "merge" if iv.merge_commit else "reject" if iv.status == "rejected" else "undecided",
             "probation": iv.on_probation, "live": live.get(iv.branch)}
            for iv in sorted(repo.interventions(), key=lambda iv: (iv.round, iv.branch))]
