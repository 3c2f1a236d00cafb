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
import json
import shutil
import sys
import time
from pathlib import Path

import compare_arms
from repair_cells import PREVIEWING_ARMS, RESULT, RESULTS, agent_for, append, check, names, stamp
from repair_flaws import CONTROL, FLAWS, HELD_OUT, IN_SAMPLE, FlawInputError, flawed_files, load_flaws, sample
from repair_live import live_cell, prune_shared
from repair_table import latest_records, table, tables_by_config

from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.search import TRANSCRIPT as SEARCH_TRANSCRIPT
from meta_agent.backtest import backtest_branch, make_preview
from meta_agent.config import BacktestSettings, EvaluationSettings, GateThresholds
from meta_agent.generation_preview import GenerationPreview
from meta_agent.names import get_domain
from meta_agent.run_dir import RunDir, RunLock, RunLocked, write_json_atomic
from rl_backend.archive import Archive
from sandboxes.base import Sandbox
from sandboxes.docker import DockerSandbox


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
                                            agent=agent_for(arm, flaw, seed, args, sandbox, f"round0-{arm}"))
        status = json.loads((shared.path / compare_arms.RECORD).read_text()).get("status")
    if status != "finished":  # reported for this flaw and seed, tried again on the next run
        return record | {"status": f"incomplete: round 0 failed to train: {status}"}
    digest = json.loads((shared.round_dir(0) / "digest.json").read_text())
    pretrain = shared.round_dir(0) / "pretrain" / "digest.json"  # what training refused, before the round trained
    before = json.loads(pretrain.read_text()).get("failure_modes", []) if pretrain.exists() else []
    record["named"] = names({"failure_modes": before + list(digest.get("failure_modes") or [])}, flaw)
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
        proposals = agent_for(arm, flaw, seed, args, sandbox, shared.path.name).propose(ctx)
    except Exception as exc:  # noqa: BLE001 - the cell is incomplete with the cause, the bench goes on
        return record | {"status": f"incomplete: the {arm} agent failed: {type(exc).__name__}: {str(exc)[:200]}"}
    if failed := compare_arms.endpoint_failures(RunDir(cell)):  # the LLM agent declines on a provider error
        return record | {"status": f"incomplete: the LLM endpoint failed, {failed[0][:200]}"}
    branches = []
    for p in proposals:
        addressed = check(flaw, repo, p.branch, cell / "exports" / "branch", sandbox)
        outcome = backtest_branch(repo, archive, p.branch, sandbox, cell / "backtests", domain=get_domain(args.domain),
                                  run_id=shared.path.name)
        branches.append({"branch": p.branch, "addresses": addressed[0], "why": addressed[1],
                         "decision": outcome.decision,
                         "probation": bool(outcome.report.get("gate", {}).get("probation")),
                         "reasons": [str(r)[:160] for r in outcome.reasons][:3]})
    repaired, why = check(flaw, repo, "main", cell / "exports" / "main", sandbox)
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
               **stamp(flaw)}
    write_json_atomic(cell / RESULT, record)
    append(args.results, record)
    return record


def _generation_preview(shared: RunDir, repo: HarnessRepo, sandbox: Sandbox, cell: Path, seed: int,
                        args: argparse.Namespace) -> GenerationPreview | None:
    """Round 0's policy generating under each candidate's knobs and templates (None where it was pruned)."""
    policy = shared.round_dir(0) / "train" / "policy"
    return GenerationPreview(repo, get_domain(args.domain), sandbox, policy, cell / "generation_previews",
                             seed=seed) if (policy / "config.json").is_file() else None


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
                        prune_shared(args.out / flaw, seed)
        except RunLocked as exc:
            raise SystemExit(f"seed {seed}: {exc}") from None
    done = [r for r in latest_records(args.results) if r.get("config") == args.config_key]
    print(_apart(done + incomplete, lambda rs: table([r for r in rs if r.get("status") == "finished"],
                                                     [r for r in rs if r.get("status") != "finished"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
