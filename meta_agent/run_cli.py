"""``python -m meta_agent --domain math``: create or resume a run and drive the round loop.

The options are parsed and checked in :mod:`meta_agent.run_options`; this module creates the run
folder (or takes the lock of the one it resumes), records ``run.json``, builds the round loop from
the run's config and reports how the run ended.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from rich.markup import escape

from meta_agent import registry
from meta_agent.run_config import RunConfig, RunConfigError, apply_seed_profile, profiled_harness_yaml, save_run_config
from meta_agent.run_dir import RunDir
from meta_agent.run_display import ConsoleEvents, console, run_table, time_line
from meta_agent.run_options import UsageError, new_config, resumed_config
from rl_backend.base import BackendOptionError


def _create_run(args: argparse.Namespace) -> tuple[RunDir, RunConfig]:
    from harness_repo.repo import HarnessRepo

    domain = args.domain or RunConfig.model_fields["domain"].default
    run_dir = Path(args.run_dir or f"runs/{domain}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    rd = RunDir(run_dir)
    if rd.exists():
        raise UsageError(f"{run_dir} already holds a run; continue it with --resume, or pick another --run-dir")
    config = new_config(args, run_dir)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in its place, or a parent that cannot be made
        raise UsageError(f"cannot create --run-dir {run_dir} ({exc.strerror}); pick a new folder where you can "
                         "write") from None
    if args.from_branch:
        source = RunDir(Path(args.from_run).resolve())
        HarnessRepo.clone_line(source.harness, args.from_branch, rd.path / "harness")
    else:
        apply_seed_profile(HarnessRepo.create(rd.path / "harness", config.domain), config)
    save_run_config(rd.run_json, config)
    return rd, config


class _BackendOnFirstUse:
    """The training backend, built when the loop first asks for it: a run resumed past its training phase
    does not import torch and the trainer (most of a controller's start-up) until the next round trains."""

    def __init__(self, make) -> None:
        self._make, self._backend = make, None

    def __getattr__(self, name: str):
        if self._backend is None:
            self._backend = self._make()
        return getattr(self._backend, name)


def _build_loop(rd: RunDir, config: RunConfig, events):
    from harness_repo.repo import HarnessRepo
    from meta_agent.budget import Budget
    from meta_agent.loop import RoundLoop
    from rl_backend.archive import Archive
    from sandboxes.docker import DockerSandbox

    sandbox = DockerSandbox()  # fail now, with how to start Docker, rather than after a round of training
    budget = Budget.from_dict(rd.state().get("budget") or {}, caps=config.budget)
    return RoundLoop(run=rd, repo=HarnessRepo.open(rd.harness), archive=Archive(rd.archive),
                     backend=_BackendOnFirstUse(lambda: registry.make_backend(config.backend, config, sandbox)),
                     domain=registry.make_domain(config.domain),
                     agent=registry.make_agent(config.agent, config, budget, sandbox), sandbox=sandbox,
                     run_id=config.run_id, thresholds=config.gate, tripwire=config.tripwire, settings=config.backtest,
                     evaluation=config.evaluation, candidates=config.candidates, budget=budget, events=events,
                     rollback=config.rollback)


def _dry_run(args: argparse.Namespace, config: RunConfig) -> int:
    """The next round's training command and its validation (``--backend verl``); nothing is launched."""
    import tempfile

    from harness_repo.repo import HarnessRepo
    from rl_backend.base import RoundSpec

    try:
        backend = registry.make_backend(config.backend, config, None)
    except BackendOptionError as exc:  # e.g. verl without --model-path
        console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return 2
    if not hasattr(backend, "dry_run"):
        console.print(f"[bold red]error:[/] --dry-run shows a GPU job's command; backend {config.backend} has none")
        return 2
    run_dir = Path(args.run_dir or "runs/dry-run").resolve()
    with tempfile.TemporaryDirectory() as tmp:
        state = RunDir(run_dir).state() if args.resume else {}
        n = int(state.get("round", 0))
        harness = (HarnessRepo.open(RunDir(run_dir).harness).export("main", Path(tmp) / "harness") if args.resume
                   else Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / config.domain)
        if not args.resume and config.seed_profile is not None:  # the seed as a new run would commit it
            harness = Path(shutil.copytree(harness, Path(tmp) / "harness"))
            (harness / "harness.yaml").write_text(profiled_harness_yaml((harness / "harness.yaml").read_text(),
                                                                        config.seed_profile))
        spec = RoundSpec(run_id=config.run_id, round=n, harness_dir=harness, harness_commit="main",
                         policy_in=state.get("policy_ref"), out_dir=run_dir / "rounds" / str(n) / "train",
                         domain=registry.check("domain", config.domain), seed=n, **config.evaluation.model_dump())
        report = backend.dry_run(spec)
        print(report)
    return 0 if getattr(report, "ok", True) else 1  # INVALID: a script gating a launch on --dry-run must see it


def cmd_run(args: argparse.Namespace) -> int:
    from meta_agent.loop import RoundFailed

    try:
        if args.resume:
            if not args.run_dir:
                raise UsageError("--resume needs --run-dir (the folder of the run to continue)")
            rd = RunDir(Path(args.run_dir).resolve())
            config = resumed_config(args, rd)  # saved only once the lock is held: a refused controller changes nothing
            from rl_backend.archive import Archive
            from rl_backend.archive_ledger import refuse_damaged

            if rd.archive.is_dir():  # a damaged part refuses the resume before run.json or the lock is touched
                refuse_damaged(Archive(rd.archive), config.run_id)
        elif args.dry_run:  # nothing is created: the seed harness of the domain stands in for the run's
            config = new_config(args, Path(args.run_dir or f"runs/{args.domain or 'math'}-dry-run").resolve())
        else:
            rd, config = _create_run(args)
    except (UsageError, RunConfigError) as exc:
        console.print(f"[bold red]error:[/] {escape(str(exc))}", soft_wrap=True)
        return 2
    if args.dry_run:
        return _dry_run(args, config)
    events = ConsoleEvents()
    resume_hint = f"python -m meta_agent --resume --run-dir {rd.path}"
    console.print(f"run [bold]{config.run_id}[/] in {rd.path} · domain {config.domain} · "
                  f"backend {config.backend} · agent {config.agent}")
    with rd.lock():
        if args.resume:
            save_run_config(rd.run_json, config)
        loop = _build_loop(rd, config, events)
        try:
            state = loop.run_rounds(config.rounds)
        except KeyboardInterrupt:
            events.close()
            state = rd.state()
            console.print(f"[yellow]interrupted[/] in round {state.get('round')} ({state.get('phase')}); "
                          f"nothing recorded is lost. Resume with:\n  {resume_hint}")
            return 130
        except RoundFailed as exc:
            events.close()
            console.print(f"[bold red]round failed:[/] {exc}\nResume with:\n  {resume_hint}")
            return 1
    if state.get("status") == "budget_exhausted":
        console.print(f"[yellow]stopped at the run budget[/] after {state['round']} rounds; raise a cap and resume:\n"
                      f"  {resume_hint} --budget-compute-hours <more>")
        return 0
    console.print(run_table(rd, state["round"]))
    console.print(time_line(rd, events.trained, events.seconds), soft_wrap=True)
    console.print(f"[bold green]finished[/] {state['round']} rounds. Review with:\n"
                  f"  python -m meta_agent history --run-dir {rd.path}\n"
                  f"  git -C {rd.harness} log --graph --oneline --all")
    return 0
