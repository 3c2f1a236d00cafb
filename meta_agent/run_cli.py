"""``python -m meta_agent --domain math``: create or resume a run and drive the round loop."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console
from rich.panel import Panel
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from meta_agent.config import BacktestSettings
from meta_agent.run_dir import RunDir, write_json_atomic

console = Console(stderr=True)
KNOWN_DOMAINS = ("math", "code", "swe")
AVAILABLE_DOMAINS = ("math",)
KNOWN_BACKENDS = ("local", "verl")
AVAILABLE_BACKENDS = ("local",)


class UsageError(Exception):
    """Bad command-line input: exit code 2."""


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--domain", default=None, help=f"task domain: {', '.join(KNOWN_DOMAINS)} (default math)")
    parser.add_argument("--backend", default=None, help="training backend: local (CPU, TRL) or verl (GPUs)")
    parser.add_argument("--rounds", type=int, default=None, help="total rounds in the run (default 3)")
    parser.add_argument("--run-dir", default=None, help="run folder (default runs/<domain>-<time>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --run-dir where it stopped")
    parser.add_argument("--from-branch", default=None, help="start a new run line from this harness branch ...")
    parser.add_argument("--from-run", default=None, help="... of the harness repo of this run folder")
    parser.add_argument("--model-path", default=None, help="a local Hugging Face model folder (default SmolLM2-135M)")
    parser.add_argument("--agent", default=None, help="recipe (default) or llm")
    parser.add_argument("--model", default=None, help="LiteLLM model string for --agent llm")
    parser.add_argument("--api-base", default=None, help="OpenAI-compatible endpoint for --agent llm")
    parser.add_argument("--candidates", type=int, default=None, help="interventions proposed per round (default 2)")
    parser.add_argument("--sample-groups", type=int, default=None, help="GRPO groups per backtest (default 64)")
    parser.add_argument("--max-agent-steps", type=int, default=None, help="tool calls per LLM candidate (default 30)")
    budget = parser.add_argument_group("budget (all optional; a resumed run may raise them)")
    budget.add_argument("--budget-tokens", type=int, default=None, help="LLM tokens over the whole run")
    budget.add_argument("--budget-cost", type=float, default=None, help="LLM cost in USD over the whole run")
    budget.add_argument("--budget-round-tokens", type=int, default=None, help="LLM tokens per round")
    budget.add_argument("--budget-round-cost", type=float, default=None, help="LLM cost in USD per round")
    budget.add_argument("--budget-compute-hours", type=float, default=None,
                        help="training compute over the run (CPU-hours locally, GPU-hours on GPUs)")


def _config_from_args(args: argparse.Namespace, run_dir: Path) -> dict:
    domain = args.domain or "math"
    backend = args.backend or "local"
    agent = args.agent or ("llm" if args.model else "recipe")
    if domain not in KNOWN_DOMAINS:
        raise UsageError(f"unknown domain {domain!r}; choose one of {', '.join(KNOWN_DOMAINS)}")
    if domain not in AVAILABLE_DOMAINS:
        raise UsageError(f"domain {domain!r} is not available in this version yet; use --domain math")
    if backend not in KNOWN_BACKENDS:
        raise UsageError(f"unknown backend {backend!r}; choose one of {', '.join(KNOWN_BACKENDS)}")
    if backend not in AVAILABLE_BACKENDS:
        raise UsageError(f"backend {backend!r} is not available in this version yet; use --backend local")
    if agent not in ("recipe", "llm"):
        raise UsageError(f"unknown agent {agent!r}; choose recipe or llm")
    if agent == "llm" and not args.model:
        raise UsageError("--agent llm needs --model (a LiteLLM model string, e.g. openai/gpt-4o-mini)")
    if bool(args.from_branch) != bool(args.from_run):
        raise UsageError("--from-branch and --from-run go together: the branch, and the run folder whose harness has it")
    return {
        "run_id": run_dir.name, "domain": domain, "backend": backend, "rounds": 3 if args.rounds is None else args.rounds,
        "model_path": args.model_path, "agent": agent, "model": args.model, "api_base": args.api_base,
        "candidates": args.candidates or 2,
        "backtest": BacktestSettings(sample_groups=args.sample_groups or 64).model_dump(),
        "max_agent_steps": args.max_agent_steps or 30,
        "budget": _budget_caps(args, {}),
        "from": {"run": args.from_run, "branch": args.from_branch} if args.from_branch else None,
        "created": time.time(),
    }


def _budget_caps(args: argparse.Namespace, saved: dict) -> dict:
    """Caps from the command line over those saved in run.json (so a resumed run can raise them)."""
    from meta_agent.budget import BudgetCaps

    given = {"run_tokens": args.budget_tokens, "run_cost_usd": args.budget_cost,
             "round_tokens": args.budget_round_tokens, "round_cost_usd": args.budget_round_cost,
             "run_compute_hours": args.budget_compute_hours}
    return BudgetCaps(**(saved | {k: v for k, v in given.items() if v is not None})).model_dump()


def _create_run(args: argparse.Namespace) -> RunDir:
    from harness_repo.repo import HarnessRepo

    domain = args.domain or "math"
    run_dir = Path(args.run_dir or f"runs/{domain}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
    rd = RunDir(run_dir)
    if rd.exists():
        raise UsageError(f"{run_dir} already holds a run; continue it with --resume, or pick another --run-dir")
    config = _config_from_args(args, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if args.from_branch:
        source = RunDir(Path(args.from_run).resolve())
        HarnessRepo.clone_line(source.harness, args.from_branch, rd.path / "harness")
    else:
        HarnessRepo.create(rd.path / "harness", config["domain"])
    write_json_atomic(rd.run_json, config)
    return rd


def _build_loop(rd: RunDir, config: dict, events):
    from harness_repo.repo import HarnessRepo
    from meta_agent.budget import Budget, BudgetCaps
    from meta_agent.config import GateThresholds
    from meta_agent.domains.base import get_domain
    from meta_agent.loop import RoundLoop
    from rl_backend.archive import Archive
    from sandboxes.docker import DockerSandbox

    sandbox = DockerSandbox()  # fail now, with how to start Docker, rather than after a round of training
    budget = Budget.from_dict(rd.state().get("budget") or {}, caps=BudgetCaps(**config.get("budget", {})))
    return RoundLoop(run=rd, repo=HarnessRepo.open(rd.harness), archive=Archive(rd.archive),
                     backend=_backend(config), domain=get_domain(config["domain"]),
                     agent=_agent(config, budget, sandbox), sandbox=sandbox, run_id=config["run_id"],
                     thresholds=GateThresholds(), settings=BacktestSettings(**config["backtest"]),
                     candidates=config["candidates"], budget=budget, events=events)


def _backend(config: dict):
    from rl_backend.local import LocalBackend

    return LocalBackend(base_model=config.get("model_path"))


def _agent(config: dict, budget, sandbox):
    if config["agent"] == "llm":
        from meta_agent.agents.llm import LLMAgent

        return LLMAgent(model=config["model"], api_base=config.get("api_base"), budget=budget, sandbox=sandbox,
                        max_steps=config.get("max_agent_steps", 30))
    from meta_agent.agents.recipe import RecipeAgent

    return RecipeAgent()


class ConsoleEvents:
    """Progress bars and a one-screen summary per round."""

    def __init__(self) -> None:
        self.progress: Progress | None = None
        self.task = None

    def phase(self, n: int, phase: str) -> None:
        self._close()
        console.print(f"[bold cyan]round {n}[/] · {phase}")

    def train_step(self, step: int, total: int, metrics: dict) -> None:
        if self.progress is None:
            self.progress = Progress(TextColumn("  training"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                                     TextColumn("{task.description}"), TimeElapsedColumn(), console=console)
            self.progress.start()
            self.task = self.progress.add_task("", total=total)
        reward = metrics.get("reward", metrics.get("reward_mean"))
        desc = f"reward {reward:.3f}" if isinstance(reward, (int, float)) else ""
        self.progress.update(self.task, completed=step, total=total, description=desc)
        if step >= total:
            self._close()

    def message(self, text: str) -> None:
        self._close()
        console.print(f"  {text}")

    def round_done(self, summary: dict) -> None:
        self._close()
        console.print(round_panel(summary))

    def _close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def round_panel(summary: dict) -> Panel:
    d = summary["digest"]
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()

    def fmt(key: str) -> str:
        value = d.get(key)
        trend = (d.get("trends") or {}).get(key, {})
        delta = trend.get("delta") if isinstance(trend, dict) else None
        text = f"{value:.3f}" if isinstance(value, (int, float)) else "-"
        return text + (f"  ({delta:+.3f})" if isinstance(delta, (int, float)) else "")

    for key in ("reward_mean", "verified_mean", "heldout_accuracy", "zero_variance_share", "truncation_rate",
                "hack_rate", "failure_pay", "miss_rate"):
        table.add_row(key, fmt(key))
    for alarm in d.get("tripwire") or []:
        if alarm.get("fired"):
            table.add_row("tripwire", f"[red]{alarm['detail']}[/]")
    for iv in summary["interventions"]:
        colour = {"merged": "green", "rejected": "red"}.get(iv["status"], "yellow")
        table.add_row("intervention", f"[{colour}]{iv['status']}[/] {iv['branch']}")
    for check in d.get("live_checks", []):
        table.add_row("live check", f"{check['outcome']} {check['branch']}")
    table.add_row("main", (summary.get("main") or "")[:10])
    table.add_row("details", summary["round_dir"])
    return Panel(table, title=f"round {summary['round']} done", expand=False)


def cmd_run(args: argparse.Namespace) -> int:
    from meta_agent.loop import RoundFailed

    try:
        if args.resume:
            if not args.run_dir:
                raise UsageError("--resume needs --run-dir (the folder of the run to continue)")
            rd = RunDir(Path(args.run_dir).resolve())
            config = rd.config()
            if args.rounds is not None:  # allow extending a finished run
                config["rounds"] = args.rounds
            config["budget"] = _budget_caps(args, config.get("budget", {}))
            # written only once the lock is held (below): a refused controller changes nothing
        else:
            rd = _create_run(args)
            config = rd.config()
    except UsageError as exc:
        console.print(f"[bold red]error:[/] {exc}")
        return 2
    events = ConsoleEvents()
    resume_hint = f"python -m meta_agent --resume --run-dir {rd.path}"
    console.print(f"run [bold]{config['run_id']}[/] in {rd.path} · domain {config['domain']} · "
                  f"backend {config['backend']} · agent {config['agent']}")
    with rd.lock():
        if args.resume:
            write_json_atomic(rd.run_json, config)
        loop = _build_loop(rd, config, events)
        try:
            state = loop.run_rounds(config["rounds"])
        except KeyboardInterrupt:
            events._close()
            state = rd.state()
            console.print(f"[yellow]interrupted[/] in round {state.get('round')} ({state.get('phase')}); "
                          f"nothing recorded is lost. Resume with:\n  {resume_hint}")
            return 130
        except RoundFailed as exc:
            events._close()
            console.print(f"[bold red]round failed:[/] {exc}\nResume with:\n  {resume_hint}")
            return 1
    if state.get("status") == "budget_exhausted":
        console.print(f"[yellow]stopped at the run budget[/] after {state['round']} rounds; raise a cap and resume:\n"
                      f"  {resume_hint} --budget-compute-hours <more>")
        return 0
    console.print(f"[bold green]finished[/] {state['round']} rounds. Review with:\n"
                  f"  python -m meta_agent history --run-dir {rd.path}\n  git -C {rd.harness} log --graph --oneline --all")
    return 0
