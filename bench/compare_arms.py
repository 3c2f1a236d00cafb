"""Benchmark: a fixed seed harness vs the recipe agent vs the LLM agent, at equal training.

Each arm trains the same policy (SmolLM2-135M, local backend) on the same domain with the same
seed harness knobs, the same seeds and the same number of GRPO steps; only what may change the
harness between rounds differs:

- ``fixed``: the seed harness, never changed (the loop runs with 0 candidates);
- ``recipe``: the recipe agent proposes, the gate judges;
- ``llm``: the LLM agent (only with ``--model``; ``--api-base`` for a local endpoint);
- ``random-edit``: random edits of the recipe agent's vocabulary, as many per round (``bench/random_edits.py``).

Every arm x seed is one real run of the round loop in ``OUT/<arm>/seed<k>``.  Round 0 up to its propose
phase is the same for every arm (same seed harness, policy and seed), so it runs once per seed in
``OUT/shared/seed<k>`` and each arm goes on from a copy of it; its ``compare.json`` says so (``round0``)
and carries the shared round's seconds, so each arm's seconds are what that arm alone would have spent.
Run it again after a stop: finished runs are read back, an unfinished one resumes where the loop left
it (its state file), so no finished arm or seed is redone.  A run that fails (an endpoint that dies mid-run, say)
is marked incomplete in the table, never dropped.

    .venv/bin/python bench/compare_arms.py --out runs/compare                 # fixed + recipe, 3 seeds x 3 rounds
    .venv/bin/python bench/compare_arms.py --out runs/compare --model openai/gpt-4o-mini
    .venv/bin/python bench/compare_arms.py --out /tmp/c --seeds 1 --rounds 1 --heldout-size 8 \\
        --knob steps_per_round=1 --knob group_size=2 --knob prompts_per_step=2     # a smoke run
    .venv/bin/python bench/compare_arms.py --out runs/compare --only-seed 1 &      # seeds side by side:
    .venv/bin/python bench/compare_arms.py --out runs/compare --only-seed 2 &      # one process per seed,
    .venv/bin/python bench/compare_arms.py --out runs/compare --only-seed 0        # never two on one seed

The table: the trusted held-out exam per round, pooled over seeds (tasks x seeds, exact 95%
intervals), merges and rejections, seconds per loop phase summed over seeds, LLM tokens and cost,
each arm's last-round accuracy minus the fixed arm's and minus its own round 0's (what training after
the first round added), both paired by seed and task.  What it does
not show: whether a difference holds for other policies, domains or longer runs; with one seed
the interval covers task noise only, not seed-to-seed variation of training.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import defaultdict
from pathlib import Path

import yaml

import records
from harness_repo.repo import HarnessError, HarnessRepo
from meta_agent import registry
from meta_agent.agents.recipe import RecipeAgent
from meta_agent.budget import Budget
from meta_agent.config import EvaluationSettings
from meta_agent.heldout_stats import accuracy, format_change, format_interval, outcomes_by_task, paired_difference
from meta_agent.loop import Events, RoundLoop
from meta_agent.names import get_domain
from meta_agent.run_config import RunConfig
from meta_agent.run_dir import RunDir, RunLock, RunLocked, write_json_atomic
from rl_backend.archive import Archive
from rl_backend.local import LocalBackend
from rl_backend.local_trainer import OPTIMIZER_STATE
from sandboxes.docker import DockerSandbox

RECORD = "compare.json"
SHARED = "shared"


def _knobs(pairs: list[str]) -> dict:
    """``["group_size=2", ...]`` as harness.yaml ``grpo`` values (YAML-typed); a clear error otherwise."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            records.refuse(f"--knob {pair!r}: write it as name=value, e.g. --knob steps_per_round=2")
        out[key] = yaml.safe_load(value)
    return out


def _create(rd: RunDir, domain: str, knobs: dict, files: dict[str, str] | None = None) -> HarnessRepo:
    """A seed harness repo with this comparison's knobs and ``files`` (a planted flaw of repair_bench.py)."""
    rd.path.mkdir(parents=True)
    repo = HarnessRepo.create(rd.harness, domain)
    changed = {rel: text for rel, text in (files or {}).items() if not _same_on_main(repo, rel, text)}
    if changed:  # a flaw may be the seed's own file (seed-reward): nothing of it to commit
        repo.commit_files(changed, "The starting harness of this comparison (the same for every arm)")
    if knobs:
        config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
        config["grpo"].update(knobs)
        repo.commit_files({"harness.yaml": yaml.safe_dump(config, sort_keys=False)},
                          "Knobs of this comparison, the same for every arm")
    write_json_atomic(rd.run_json, {"run_id": rd.path.name, "domain": domain})
    return repo


def _same_on_main(repo: HarnessRepo, rel: str, text: str) -> bool:
    try:
        return repo.read_file("main", rel) == text
    except HarnessError:  # not on main
        return False


class _SharedPrefixDone(Exception):
    """Raised by the phase event when round 0 reaches propose: the prefix every arm shares ends there."""


def _loop(rd: RunDir, arm: str, seed: int, args: argparse.Namespace, sandbox: DockerSandbox,
          seconds: dict, stop_at_propose: bool = False, agent=None) -> RoundLoop:
    """The round loop of one run; ``seconds`` collects the seconds per phase as they pass; ``agent`` (repair_bench's
    own arm agents) replaces the one ``arm`` names."""
    repo = HarnessRepo.open(rd.harness) if rd.run_json.exists() else _create(rd, args.domain, _knobs(args.knob),
                                                                             getattr(args, "harness_files", None))
    budget = Budget.from_dict(rd.state().get("budget") or {})
    if arm == "llm":
        config = RunConfig(run_id=rd.path.name, domain=args.domain, agent="llm", model=args.model,
                           api_base=args.api_base)
        agent = registry.make_agent("llm", config, budget, sandbox)
    elif agent is not None:
        pass
    elif arm == "random-edit":
        from random_edits import RandomEditAgent  # bench/ is on sys.path: this script's own folder
        agent = RandomEditAgent(seed, cell=getattr(args, "cell", ""))  # repair_bench sets the flaw
    else:
        agent = RecipeAgent()
    clock = {"phase": None, "t": time.monotonic()}

    def phase(n: int, name: str | None) -> None:
        now = time.monotonic()
        if clock["phase"]:
            seconds[clock["phase"]] = seconds.get(clock["phase"], 0.0) + now - clock["t"]
        clock.update(phase=name, t=now)
        if stop_at_propose and (n, name) == (0, "propose"):
            raise _SharedPrefixDone

    return RoundLoop(run=rd, repo=repo, archive=Archive(rd.archive), backend=LocalBackend(sandbox=sandbox),
                     domain=get_domain(args.domain), agent=agent, sandbox=sandbox, run_id=rd.path.name,
                     evaluation=EvaluationSettings(heldout_size=args.heldout_size),
                     candidates=0 if arm == "fixed" else args.candidates, seed=seed, budget=budget,
                     events=Events(phase=phase, round_done=lambda s: phase(s["round"], None),
                                   message=lambda text: print(f"  [{arm} seed {seed}] {text}")))


def shared_round0(out: Path, seed: int, args: argparse.Namespace, sandbox: DockerSandbox,
                  need_policy: bool = True, arm: str = "fixed", agent=None) -> RunDir:
    """Round 0 of seed ``seed`` up to its propose phase, run once for all arms in ``OUT/shared/seed<k>``.

    Every arm starts from the same seed harness, policy and seed, so its round 0 trains, sits the exam,
    diagnoses and digests the same way; the arms differ from round 0's propose phase on.  Each arm copies
    this folder and goes on from there (a shared prefix, not a replay: no determinism is needed).
    ``need_policy=False`` (repair_bench's offline tier reads only the archive and the digest): a finished round 0
    whose policy a bench deleted is used as it is, not trained again.  ``arm`` and ``agent`` other than the fixed
    arm: that arm's own round 0 (``OUT/round0-<arm>/seed<k>``), whose agent may repair a harness training refused
    before the round trains (``meta_agent.phases.refused``); repair_bench uses it where the shared one was refused."""
    rd = RunDir(out / (SHARED if arm == "fixed" else f"round0-{arm}") / f"seed{seed}")
    path = rd.path / RECORD
    record = json.loads(path.read_text()) if path.exists() else {"seed": seed, "seconds": {}}
    if record.get("status") == "finished":
        if (rd.round_dir(0) / "train" / "policy").is_dir() or not need_policy:
            return rd
        # a bench deleted the policy once every arm it ran had finished (repair_bench: disk); an arm added
        # later trains round 0 again from the same seed
        print(f"shared round 0 of seed {seed}: its policy was deleted; training it again", flush=True)
        shutil.rmtree(rd.path)
        record = {"seed": seed, "seconds": {}}
    if not rd.run_json.exists():  # stopped while creating: nothing in it has run yet
        shutil.rmtree(rd.path, ignore_errors=True)
    try:
        _loop(rd, arm, seed, args, sandbox, record["seconds"], stop_at_propose=True, agent=agent).run_rounds(1)
    except _SharedPrefixDone:
        record["status"] = "finished"
    except Exception as exc:  # noqa: BLE001 - every arm of this seed is marked incomplete with the cause
        record["status"] = f"incomplete: shared round 0: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        write_json_atomic(path, record)
    return rd


def run_arm(rd: RunDir, arm: str, seed: int, args: argparse.Namespace, sandbox: DockerSandbox,
            files: dict[str, str] | None = None, agent=None) -> dict:
    """Run (or resume) one arm x seed from its copy of the shared round 0; its record: status, seconds per phase,
    the agent that proposed (its name).  ``files`` (name -> text) are written into the arm's folder before its rounds
    run (a live control); ``agent`` (repair_bench's arm agents) replaces the one ``arm`` names."""
    path = rd.path / RECORD
    if not path.exists():
        shared = shared_round0(rd.path.parent.parent, seed, args, sandbox)
        if (failed := json.loads((shared.path / RECORD).read_text())).get("status") != "finished":
            return failed | {"arm": arm}  # the table reads it from the shared record; a rerun tries it again
        shutil.rmtree(rd.path, ignore_errors=True)  # stopped while copying
        # the record last: a copy killed midway has none, so it is made again (the shared one says "finished")
        # round 1 starts from the shared policy (state.json names its path), so its optimizer state stays there
        shutil.copytree(shared.path, rd.path, symlinks=True, ignore=shutil.ignore_patterns(RECORD, OPTIMIZER_STATE))
        write_json_atomic(path, json.loads((shared.path / RECORD).read_text()) | {
            "arm": arm, "status": "running", "round0": f"shared: {SHARED}/seed{seed}"})
    record = json.loads(path.read_text())
    if record.get("status") == "finished":
        return record
    for name, text in (files or {}).items():
        (rd.path / name).write_text(text)
    loop = _loop(rd, arm, seed, args, sandbox, record["seconds"], agent=agent)
    record["agent"] = None if arm == "fixed" else loop.agent.name
    try:
        loop.run_rounds(args.rounds)
        failed = endpoint_failures(rd)
        record["status"] = f"incomplete: the LLM endpoint failed, {failed[0][:200]}" if failed else "finished"
    except Exception as exc:  # noqa: BLE001 - any failure marks the arm incomplete, with its cause
        record["status"] = f"incomplete: {type(exc).__name__}: {str(exc)[:200]}"
    finally:
        loop.events.phase(-1, None)
        write_json_atomic(path, record)
    return record


def endpoint_failures(rd: RunDir) -> list[str]:
    """The LLM agent's conversations that ended on a provider error (``rounds/<n>/agent/*.json``), one line
    each: the agent declines and the loop goes on, so the run ends without an error to catch."""
    out = []
    for path in sorted(rd.path.glob("rounds/*/agent/*.json")):
        record = json.loads(path.read_text())
        if record.get("status") == "provider_error":
            out.append(f"round {record.get('round')}: {record.get('error')}")
    return out


def _outcomes(rd: RunDir, rounds: int) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """The base policy's exam and each round's, by task id."""
    first = rd.round_dir(0) / "train" / "result.json"
    base = json.loads(first.read_text())["eval"].get("base_outcomes", {}) if first.exists() else {}
    archive = Archive(rd.archive)
    by_round = {n: outcomes_by_task(archive.rows(run_id=rd.path.name, round=n, split="heldout"))
                for n in range(rounds)} if rd.archive.exists() else {}
    return base, by_round


def _not_started(out: Path, seed: int) -> dict:
    """The record of an arm x seed that never started: the shared round 0's failure, else ``not run``."""
    path = out / SHARED / f"seed{seed}" / RECORD
    shared = json.loads(path.read_text()) if path.exists() else {}
    return shared if str(shared.get("status", "")).startswith("incomplete") else {"status": "not run"}


def table(out: Path, arms: list[str], seeds: int, rounds: int) -> str:
    """The comparison as a markdown table (see the module docstring)."""
    pooled: dict[str, dict] = {}
    lines = ["| arm | runs finished | base | " + " | ".join(f"round {n}" for n in range(rounds))
             + " | last round - fixed | last round - round 0 | merged / rejected | seconds per phase | LLM tokens"
             " | LLM cost $ |", "|---" * (rounds + 9) + "|"]
    for arm in arms:
        base, per_round = {}, defaultdict(dict)
        status, seconds, merged, rejected, tokens, cost = [], defaultdict(float), 0, 0, 0, 0.0
        for seed in range(seeds):
            rd = RunDir(out / arm / f"seed{seed}")
            record_path = rd.path / RECORD
            record = json.loads(record_path.read_text()) if record_path.exists() else _not_started(out, seed)
            status.append(record.get("status", "not run"))
            for k, v in record.get("seconds", {}).items():
                seconds[k] += v
            if not rd.run_json.exists():
                continue
            b, rs = _outcomes(rd, rounds)
            base |= {f"{seed}/{t}": v for t, v in b.items()}
            for n, outcomes in rs.items():
                per_round[n] |= {f"{seed}/{t}": v for t, v in outcomes.items()}
            ivs = HarnessRepo.open(rd.harness).interventions()
            merged += sum(iv.merge_commit is not None for iv in ivs)
            rejected += sum(iv.status == "rejected" for iv in ivs)
            spent = rd.state().get("budget") or {}
            tokens, cost = tokens + int(spent.get("run_tokens") or 0), cost + float(spent.get("run_cost_usd") or 0)
        pooled[arm] = per_round.get(rounds - 1, {})

        def cell(outcomes: dict) -> str:
            acc = accuracy(list(outcomes.values()))
            return format_interval(acc.value, acc.low, acc.high)

        finished = sum(s == "finished" for s in status)
        problems = sorted({" ".join(s.split()).replace("|", "\\|") for s in status if s != "finished"})  # one line
        def change(before: dict, after: dict) -> str:
            d = paired_difference(before, after)
            return format_change(d.value, d.low, d.high, d.excludes_zero)

        diff = change(pooled["fixed"], pooled[arm]) if arm != "fixed" and pooled.get("fixed") and pooled[arm] else "-"
        since = change(per_round[0], pooled[arm]) if rounds > 1 and per_round.get(0) and pooled[arm] else "-"
        lines.append(f"| {arm} | {finished}/{seeds}" + (f" ({'; '.join(problems)})" if problems else "")
                     + f" | {cell(base)} | " + " | ".join(cell(per_round.get(n, {})) for n in range(rounds))
                     + f" | {diff} | {since} | {merged} / {rejected} | "
                     + ", ".join(f"{k} {v:.0f}" for k, v in seconds.items()) + f" | {tokens} | {cost:.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = records.parser("compare_arms", __doc__)
    parser.add_argument("--out", type=Path, default=Path("runs/compare"), help="folder of all arms' runs")
    parser.add_argument("--domain", default="math")
    parser.add_argument("--arms", nargs="+", default=None, help="default: fixed recipe, plus llm with --model")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=2, help="proposals per round of the agent arms")
    parser.add_argument("--heldout-size", type=int, default=EvaluationSettings().heldout_size)
    parser.add_argument("--knob", action="append", default=[], help="grpo knob for every arm, e.g. group_size=4")
    parser.add_argument("--model", default=None, help="LiteLLM model of the llm arm")
    parser.add_argument("--api-base", default=None, help="OpenAI-compatible endpoint of the llm arm")
    parser.add_argument("--only-seed", type=int, action="append", default=None,
                        help="run only this seed (repeatable), e.g. one process per seed; the table covers --seeds")
    args = parser.parse_args(argv)
    arms = args.arms or ["fixed", "recipe"] + (["llm"] if args.model else [])
    if "llm" in arms and not args.model:
        parser.error("the llm arm needs --model (and --api-base for a local endpoint)")
    if "fixed" not in arms:
        parser.error("the fixed arm is what the others are compared with; keep it in --arms")
    arms = ["fixed"] + [a for a in dict.fromkeys(arms) if a != "fixed"]
    _knobs(args.knob)  # refuse a malformed knob before any training
    if bad := [s for s in args.only_seed or [] if not 0 <= s < args.seeds]:
        parser.error(f"--only-seed {bad[0]}: seeds are 0 to {args.seeds - 1} (--seeds {args.seeds})")
    load_before = records.load_now()
    sandbox = DockerSandbox()
    for seed in args.only_seed or range(args.seeds):
        try:  # one process per seed: two would train in the same run folders at once
            with RunLock(args.out / f".seed{seed}.lock"):
                for arm in arms:
                    record = run_arm(RunDir(args.out / arm / f"seed{seed}"), arm, seed, args, sandbox)
                    print(f"{arm} seed {seed}: {record['status']}")
        except RunLocked as exc:
            raise SystemExit(f"seed {seed}: {exc}") from None
    shown = table(args.out, arms, args.seeds, args.rounds)
    print(shown)
    records.write(args, {k: getattr(args, k) for k in ("domain", "seeds", "rounds", "candidates", "heldout_size",
                                                       "knob", "model", "only_seed")} | {"arms": arms},
                  {"table": shown}, load_before)
    print("\n* the interval excludes zero. Accuracy: trusted held-out exam, tasks x seeds pooled, exact 95% "
          "intervals; the difference is paired by seed and task. Round 0 up to its propose phase is shared: "
          f"trained once per seed ({args.out / SHARED}), each arm's seconds include it.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
