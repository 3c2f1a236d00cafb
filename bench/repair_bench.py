"""The harness-repair benchmark: can the loop find, fix and live-confirm planted flaws?

Each flaw of ``bench/repair_flaws.py`` (and the control, which has none) is a starting harness.  Two tiers:

- ``offline`` (every flaw x seed x agent arm): round 0 trains once per flaw and seed on the flawed harness
  (``OUT/<flaw>/shared/seed<k>``: compare_arms' shared prefix, which the live tier goes on from).  From
  that one archive and digest: did the digest name the flaw (a warning or error of one of its modes)?  Did the agent
  propose a branch that, alone on the flawed harness, passes the flaw's trusted repair check
  (``addressed``)?  What did the gate decide on each branch?  Is the flaw repaired on ``main`` after the
  gate's merges (``repaired``)?  On the control, ``repaired`` means no flaw's symptom appeared.
- ``live`` (flaw x seed x arm, ``--rounds`` rounds of training): ``compare_arms`` on the flawed harness,
  fixed arm included (it runs first); each agent arm names the fixed arm as its round-1 control
  (``live_control.json``, ``meta_agent.judge.live_control``), so a round-0 merge's benefit is measured
  against the same round trained without it and can be confirmed; the table gives the last round's
  held-out accuracy minus the fixed arm's, paired over seeds and tasks, the round the repair was merged,
  and each arm's live-check precision.

Arms: ``recipe``, ``random-edit`` (random edits of the same vocabulary, as many per round, through the
same gate; ``bench/random_edits.py``), ``search`` (the recipe agent, then previewed edits for the modes it left,
``meta_agent.agents.search``), ``best-of-n`` (``--best-of`` random edits, each previewed, the best kept),
``llm`` with ``--model`` (and ``--api-base``), and in the live
tier ``fixed`` (the flawed harness left alone).  An agent or endpoint that fails marks its cell
incomplete with the cause; a round 0 that fails to train is reported for its flaw and seed.  Each cell's
result is written once it is finished (``OUT/.../result.json``) and appended to the results file
(``--results``, committed: the table grows over several runs); a killed bench resumes where it stopped
without retraining what finished.  One process per seed (``--only-seed``), as in compare_arms.

    .venv/bin/python bench/repair_bench.py offline --out runs/repair                     # all flaws, 1 seed
    .venv/bin/python bench/repair_bench.py live --out runs/repair --flaws short-budget --seeds 3 --rounds 3
    .venv/bin/python bench/repair_bench.py table                                         # the results file
    .venv/bin/python bench/repair_bench.py offline --flaws-from bench/heldout_flaws_2026_12.py \
        --results /tmp/heldout.jsonl --knob steps_per_round=1 --knob prompts_per_step=2 --heldout-size 4

Held-out flaws: ``--flaws-from FILE`` imports a module that registers more ``Flaw`` objects
(``repair_flaws.register``), each with its own symptom and repair checks and, where the common probes do not
show it, its own observation probe; without ``--flaws``, only its flaws run.  Every record carries the recipe
set's version (``meta_agent.agents.recipes.RECIPES_VERSION``) and the code commit; a flaw planted against an
older recipe set (a recipe was added or changed after it was written) counts as in-sample, and the tables
report in-sample and held-out flaws apart.  Bad input (an unknown flaw, a missing or broken module) exits 2
with one line.

Recall (per arm): the share of planted flaws repaired on main.  Precision (live): the share of merges a
later round's live check confirmed against its control (``live_check.backtest_precision``).  Anchors:
AHE's 33.7% precision and 51.4% recall.  What it does not show: other domains, policies or longer runs;
the offline tier scores one round's decisions, not whether training then improves.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import compare_arms
from repair_flaws import CONTROL, FLAW_LIST, FLAWS, HELD_OUT, IN_SAMPLE, FlawInputError, flawed_files, load_flaws, \
    probes, sample
from repair_observe import observe
from repair_table import latest_records, table, tables_by_config
from random_edits import BestOfNAgent, RandomEditAgent

from harness_repo.repo import HarnessRepo
from meta_agent import registry
from meta_agent.agents.base import AgentContext
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.agents.recipes import RECIPES_VERSION
from meta_agent.agents.search import TRANSCRIPT as SEARCH_TRANSCRIPT
from meta_agent.agents.search import SearchAgent
from meta_agent.backtest import backtest_branch, make_preview
from meta_agent.budget import Budget
from meta_agent.config import BacktestSettings, EvaluationSettings, GateThresholds
from meta_agent.generation_preview import GenerationPreview
from meta_agent.judge.live_control import CONTROL_FILE
from meta_agent.live_check import backtest_precision
from meta_agent.names import get_domain
from meta_agent.run_config import RunConfig
from meta_agent.run_dir import RunDir, RunLock, RunLocked, write_json_atomic
from rl_backend.archive import Archive
from sandboxes.base import Sandbox
from sandboxes.docker import DockerSandbox

RESULTS = Path(__file__).with_name("repair_results.jsonl")
RESULT = "result.json"
NAMED_SEVERITIES = ("warning", "error")
PREVIEWING_ARMS = ("search", "best-of-n")
"""Arms that preview generation edits with round 0's policy (the others read only its archive and digest)."""


def _names(digest: dict, flaw: str) -> list[str]:
    """The flaw's modes the digest raised as a warning or error."""
    modes = FLAWS[flaw].modes if flaw in FLAWS else ()
    return sorted({str(m.get("name")) for m in digest.get("failure_modes") or []
                   if m.get("name") in modes and m.get("severity") in NAMED_SEVERITIES})


def _check(flaw: str, repo: HarnessRepo, ref: str, dest: Path, sandbox: Sandbox) -> tuple[bool, str]:
    """The flaw's repair check on ``ref`` (for the control: no flaw's symptom shows).

    ``ref`` may be an agent's branch: its harness code runs only in the sandboxed runtime (``observe``).
    """
    shutil.rmtree(dest, ignore_errors=True)
    obs = observe(repo.export(ref, dest), sandbox, probes=probes())
    if flaw == CONTROL:
        shown = [f"{f.name}: {s}" for f in FLAW_LIST if (s := f.symptom(obs))]
        return not shown, "; ".join(shown) or "no flaw's symptom"
    return FLAWS[flaw].repaired(obs)


def _agent(arm: str, flaw: str, seed: int, args: argparse.Namespace, sandbox: DockerSandbox, run_id: str):
    if arm == "recipe":
        return RecipeAgent()
    if arm == "random-edit":  # each flaw its own draw (compare_arms: the same key, args.cell)
        return RandomEditAgent(seed, cell=flaw)
    if arm == "search":
        return SearchAgent()
    if arm == "best-of-n":  # N random edits, each previewed, the best kept (random-edit keeps every draw)
        return BestOfNAgent(seed, cell=flaw, n=args.best_of)
    config = RunConfig(run_id=run_id, domain=args.domain, agent="llm", model=args.model, api_base=args.api_base)
    return registry.make_agent("llm", config, Budget(), sandbox)


@functools.cache
def _code() -> str | None:
    """The commit this bench runs at (``+changes`` when files other than the results differ from it), or None
    outside a git checkout: a cell's record says which code produced it."""
    repo = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no", "--",
                                  ".", ":(exclude)bench/repair_results.jsonl"], capture_output=True, text=True,
                                 check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+changes" if changed else "")


def _stamp(flaw: str) -> dict:
    """Which code and recipe set produced a cell, and whether its flaw was held out from that recipe set."""
    planted = FLAWS[flaw].recipes_version if flaw in FLAWS else None
    return {"date": time.strftime("%Y-%m-%d"), "code": _code(), "recipes_version": RECIPES_VERSION,
            "planted_against": planted, "sample": sample(flaw)}


def _append(results: Path, record: dict) -> None:
    results.parent.mkdir(parents=True, exist_ok=True)
    with results.open("a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def offline_cell(flaw: str, seed: int, arm: str, args: argparse.Namespace, sandbox: DockerSandbox) -> dict:
    """One flaw x seed x agent of the offline tier (read back when already finished)."""
    root = args.out / flaw
    cell = root / "offline" / arm / f"seed{seed}"
    if (cell / RESULT).exists():
        return json.loads((cell / RESULT).read_text())
    record = {"tier": "offline", "flaw": flaw, "seed": seed, "arm": arm, "config": args.config_key}
    # the archive and digest only, unless the arm previews generation edits with round 0's policy
    shared = compare_arms.shared_round0(root, seed, args, sandbox, need_policy=arm in PREVIEWING_ARMS)
    status = json.loads((shared.path / compare_arms.RECORD).read_text()).get("status")
    if status != "finished" and "refused" in shared.state().get("rounds", {}).get("0", {}):
        # training refused the flawed harness: this arm's agent gets its own round 0, repairing it first
        print(f"{arm} {flaw}: training refused the shared round 0; the arm's own round 0 repairs first", flush=True)
        shared = compare_arms.shared_round0(root, seed, args, sandbox, need_policy=arm in PREVIEWING_ARMS, arm=arm,
                                            agent=_agent(arm, flaw, seed, args, sandbox, f"round0-{arm}"))
        status = json.loads((shared.path / compare_arms.RECORD).read_text()).get("status")
    if status != "finished":  # reported for this flaw and seed, tried again on the next run
        return record | {"status": f"incomplete: round 0 failed to train: {status}"}
    digest = json.loads((shared.round_dir(0) / "digest.json").read_text())
    pretrain = shared.round_dir(0) / "pretrain" / "digest.json"  # what training refused, before the round trained
    before = json.loads(pretrain.read_text()).get("failure_modes", []) if pretrain.exists() else []
    record["named"] = _names({"failure_modes": before + list(digest.get("failure_modes") or [])}, flaw)
    shutil.rmtree(cell, ignore_errors=True)  # a cell killed midway starts again from the shared round 0
    cell.mkdir(parents=True)
    shutil.copytree(shared.harness, cell / "harness", symlinks=True)
    repo = HarnessRepo.open(cell / "harness")
    archive = Archive(shared.archive)
    ctx = AgentContext(round=0, digest=digest, digest_markdown=(shared.round_dir(0) / "digest.md").read_text(),
                       history=[], skills=[], repo=repo, worktree_root=cell / "worktrees",
                       round_dir=cell / "rounds" / "0",
                       max_candidates=args.candidates, archive=archive,
                       preview=make_preview(repo, archive, sandbox, cell / "previews", domain=get_domain(args.domain),
                                            thresholds=GateThresholds(), settings=BacktestSettings()),
                       generation_preview=_generation_preview(shared, repo, sandbox, cell, seed, args))
    started = time.monotonic()
    try:
        proposals = _agent(arm, flaw, seed, args, sandbox, shared.path.name).propose(ctx)
    except Exception as exc:  # noqa: BLE001 - the cell is incomplete with the cause, the bench goes on
        return record | {"status": f"incomplete: the {arm} agent failed: {type(exc).__name__}: {str(exc)[:200]}"}
    if failed := compare_arms.endpoint_failures(RunDir(cell)):  # the LLM agent declines on a provider error
        return record | {"status": f"incomplete: the LLM endpoint failed, {failed[0][:200]}"}
    branches = []
    for p in proposals:
        addressed = _check(flaw, repo, p.branch, cell / "exports" / "branch", sandbox)
        outcome = backtest_branch(repo, archive, p.branch, sandbox, cell / "backtests", domain=get_domain(args.domain),
                                  run_id=shared.path.name)
        branches.append({"branch": p.branch, "addresses": addressed[0], "why": addressed[1],
                         "decision": outcome.decision,
                         "probation": bool(outcome.report.get("gate", {}).get("probation")),
                         "reasons": [str(r)[:160] for r in outcome.reasons][:3]})
    repaired, why = _check(flaw, repo, "main", cell / "exports" / "main", sandbox)
    searched = cell / "rounds" / "0" / SEARCH_TRANSCRIPT
    if searched.exists():  # the preview's cost per candidate (goal: <= 60 s on 2 cores at the small size)
        tried = json.loads(searched.read_text())["tried"]
        record["preview_seconds"] = {kind: [t["preview_seconds"] for t in tried if t.get("preview") == kind]
                                     for kind in ("generation", "backtest")}
        for kind, timed in record["preview_seconds"].items():
            print(f"{arm} {flaw}: {len(timed)} {kind} preview(s)" + (
                f", {sum(timed) / len(timed):.1f} s per candidate" if timed else ""), flush=True)
    record |= {"status": "finished", "branches": branches, "addressed": any(b["addresses"] for b in branches),
               "repaired": repaired, "repair_check": why, "seconds": round(time.monotonic() - started, 1),
               **_stamp(flaw)}
    write_json_atomic(cell / RESULT, record)
    _append(args.results, record)
    return record


def _generation_preview(shared: RunDir, repo: HarnessRepo, sandbox: Sandbox, cell: Path, seed: int,
                        args: argparse.Namespace) -> GenerationPreview | None:
    """Round 0's policy generating under each candidate's knobs and templates (None where it was pruned)."""
    policy = shared.round_dir(0) / "train" / "policy"
    return GenerationPreview(repo, get_domain(args.domain), sandbox, policy, cell / "generation_previews",
                             seed=seed) if (policy / "config.json").is_file() else None


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
            _append(args.results, record)
        return record
    # round 1 confirms round 0's merges against the fixed arm's round 1 (judge.live_control).  Written into the
    # arm's own folder once it exists: the shared round 0 may not exist yet (a fixed arm finished in an earlier
    # run whose shared folder is gone), and a control written only there was then never made.
    control = {CONTROL_FILE: json.dumps({"run_dir": f"../../fixed/seed{seed}", "rounds": [1]})} if arm != "fixed" \
        else None
    run = compare_arms.run_arm(rd, arm, seed, args, sandbox, files=control)
    record = {"tier": "live", "flaw": flaw, "seed": seed, "arm": arm, "config": args.config_key,
              "rounds": args.rounds, "status": run.get("status", "not run")}
    if record["status"] != "finished":
        if str(record["status"]).startswith("incomplete: shared round 0"):
            record["status"] = "incomplete: round 0 failed to train: " + record["status"]
        return record
    repo = HarnessRepo.open(rd.harness)
    merged_round = None
    for iv in sorted(repo.interventions(), key=lambda iv: iv.round):
        if iv.merge_commit and not iv.revert_commit and \
                _check(flaw, repo, iv.branch, rd.path / "exports" / "b", sandbox)[0]:
            merged_round = iv.round
            break
    digests = [json.loads(p.read_text()) for p in sorted(rd.path.glob("rounds/*/digest.json"))]
    precision = backtest_precision(repo.interventions(), digests)
    outcomes = compare_arms._outcomes(rd, args.rounds)[1].get(args.rounds - 1, {})
    record |= {"repaired": _check(flaw, repo, "main", rd.path / "exports" / "main", sandbox)[0], "repair_merged_round":
               merged_round, "merges": precision["merges"], "confirmed": precision["confirmed"],
               "last_round": {f"{seed}/{t}": v for t, v in outcomes.items()}, "branches": _decisions(repo, rd.path),
               **_stamp(flaw)} | _kept_policy(rd, seed, args.rounds)
    write_json_atomic(done, record)
    _append(args.results, record)
    if not args.keep_policies:
        _prune_policies(rd)
    return record


def _prune_shared(root: Path, seed: int) -> None:
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


def _config_key(args: argparse.Namespace) -> str:
    """What makes results comparable: tier settings that change training or proposals."""
    return json.dumps({"knobs": sorted(args.knob), "candidates": args.candidates,
                       "heldout": args.heldout_size}, sort_keys=True)


def _refuse(message: str) -> SystemExit:
    """Bad input: one line saying what is wrong and what to do, exit status 2."""
    print(f"repair_bench: error: {message}", file=sys.stderr)
    return SystemExit(2)


def _apart(records: list[dict], show) -> str:
    """``show`` (a table function) for the in-sample and the held-out records apart, each headed: a recall over
    flaws the recipes were written for says nothing about flaws they were not (records before the split count
    as in-sample: the nine)."""
    parts = []
    for kind in (IN_SAMPLE, HELD_OUT):
        rs = [r for r in records if r.get("sample", IN_SAMPLE) == kind]
        if rs:
            versions = sorted({str(r.get("recipes_version", "?")) for r in rs})
            parts.append(f"## {kind} flaws (recipes version {', '.join(versions)})\n\n{show(rs)}")
    return "\n\n".join(parts) or "(no cell in the results file yet)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tier", choices=["offline", "live", "table"])
    parser.add_argument("--out", type=Path, default=Path("runs/repair"))
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file the table reads and grows")
    parser.add_argument("--flaws", nargs="+", default=None, help=f"default: all and the control ({', '.join(FLAWS)});"
                        " with --flaws-from, the flaws it registers")
    parser.add_argument("--flaws-from", type=Path, action="append", default=[],
                        help="a Python module that registers more flaws (repair_flaws.register(Flaw(...)))")
    parser.add_argument("--arms", nargs="+", default=None, help="default: recipe random-edit (+ llm with --model; "
                        "+ fixed in the live tier)")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--only-seed", type=int, action="append", default=None)
    parser.add_argument("--rounds", type=int, default=3, help="live tier: rounds of training")
    parser.add_argument("--candidates", type=int, default=2, help="proposals per round of every agent arm")
    parser.add_argument("--best-of", type=int, default=4, help="best-of-n arm: random edits previewed per round")
    parser.add_argument("--heldout-size", type=int, default=EvaluationSettings().heldout_size)
    parser.add_argument("--knob", action="append", default=[], help="grpo knob of every starting harness")
    parser.add_argument("--keep-policies", action="store_true",
                        help="keep the trained policies of finished cells and of a shared round 0 whose arms all "
                             "finished (deleted by default: ~1.6 GB a round)")
    parser.add_argument("--model", default=None)
    parser.add_argument("--api-base", default=None)
    parser.add_argument("--domain", default="math", choices=["math"], help="the flaws are written for math")
    args = parser.parse_args(argv)
    try:
        loaded = [name for path in args.flaws_from for name in load_flaws(path)]
        flaws = args.flaws or (loaded or [*FLAWS, CONTROL])
        for name in flaws:
            flawed_files(name)  # an unknown name stops here, before any training
    except FlawInputError as exc:
        raise _refuse(str(exc)) from None
    if args.tier == "table":  # --flaws: only those flaws' cells (and their pooled rows)
        records = [r for r in latest_records(args.results) if not args.flaws or r["flaw"] in args.flaws]
        print(_apart(records, tables_by_config))
        return 0
    arms = args.arms or ["recipe", "random-edit"] + (["llm"] if args.model else [])
    if args.tier == "live":
        arms = ["fixed"] + [a for a in arms if a != "fixed"]
    elif "fixed" in arms:
        parser.error("the offline tier scores agents' proposals; the fixed arm proposes nothing")
    if "llm" in arms and not args.model:
        parser.error("the llm arm needs --model (and --api-base for a local endpoint)")
    if bad := [s for s in args.only_seed or [] if not 0 <= s < args.seeds]:
        parser.error(f"--only-seed {bad[0]}: seeds are 0 to {args.seeds - 1} (--seeds {args.seeds})")
    knobs = compare_arms._knobs(args.knob)
    args.config_key = _config_key(args)
    args.knob = []  # written into each starting harness's harness.yaml (flawed_files), under the flaw's own knob
    sandbox = DockerSandbox()
    incomplete = []
    for seed in args.only_seed or range(args.seeds):
        try:
            with RunLock(args.out / f".seed{seed}.lock"):
                for flaw in flaws:
                    args.harness_files = flawed_files(flaw, knobs)
                    args.cell = flaw  # the live tier's random edits draw per flaw too (compare_arms)
                    finished = True
                    for arm in arms:
                        cell = (offline_cell if args.tier == "offline" else live_cell)(flaw, seed, arm, args, sandbox)
                        print(f"{args.tier} {flaw} {arm} seed {seed}: {cell['status']}", flush=True)
                        if cell["status"] != "finished":
                            incomplete.append(cell | {"sample": sample(flaw)})
                            finished = False
                    if finished and not args.keep_policies:
                        _prune_shared(args.out / flaw, seed)
        except RunLocked as exc:
            raise SystemExit(f"seed {seed}: {exc}") from None
    done = [r for r in latest_records(args.results) if r.get("config") == args.config_key]
    print(_apart(done + incomplete, lambda rs: table([r for r in rs if r.get("status") == "finished"],
                                                     [r for r in rs if r.get("status") != "finished"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
