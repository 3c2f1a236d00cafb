"""Run options of ``python -m meta_agent``: the flags, their checks, and the RunConfig they fill.

The options fill a :class:`~meta_agent.run_config.RunConfig`, which ``run.json`` records and the
loop is built from.  On ``--resume`` only :data:`RESUMABLE` options may change; any other option
that differs from the run's record is refused, never ignored.  Each backend declares its own
options (``rl_backend.base.BackendOptions``, named in its registry line); they are added here under
the backend's heading and refused for any other backend.  Nothing here writes a file:
:mod:`meta_agent.run_cli` creates or resumes the run from the config these checks return.
"""

from __future__ import annotations

import argparse
import functools
import math
import time
import types
import typing
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from meta_agent import registry
from meta_agent.config import BacktestSettings
from meta_agent.run_config import RunConfig, describe, load_run_config, problems, with_seed_profile
from meta_agent.run_dir import RunDir, RunDirError, not_a_run_message
from rl_backend.base import BackendOptionError

OPTIONS: dict[str, tuple[str, ...]] = {
    "domain": ("domain",), "backend": ("backend",), "agent": ("agent",), "model": ("model",),
    "api_base": ("api_base",), "model_path": ("model_path",), "rounds": ("rounds",), "candidates": ("candidates",),
    "max_agent_steps": ("max_agent_steps",), "sample_groups": ("backtest", "sample_groups"),
    "backtest_workers": ("backtest", "workers"), "backtest_ray_address": ("backtest", "ray_address"),
    "budget_tokens": ("budget", "run_tokens"), "budget_cost": ("budget", "run_cost_usd"),
    "budget_round_tokens": ("budget", "round_tokens"), "budget_round_cost": ("budget", "round_cost_usd"),
    "budget_compute_hours": ("budget", "run_compute_hours"), "rollback": ("rollback",),
    "draw_seed": ("draw_seed",),  # issue 45: a public, reproducible task draw (meta_agent.loop.round_seed)
}
"""Each run option (argparse dest) and the RunConfig field it sets; the backends' own are added by
:func:`_options`."""
RESUMABLE = ("rounds", "candidates", "max_agent_steps", "budget_tokens", "budget_cost", "budget_round_tokens",
             "budget_round_cost", "budget_compute_hours", "backtest_workers", "backtest_ray_address")
"""Options a resumed run may change: how long it goes on, how much it may spend and where its backtests run (a
sharded backtest's results are the unsharded one's), never what judges it."""


class UsageError(Exception):
    """Bad command-line input: exit code 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse, refusing bad input in one line (exit 2) like every other refusal of the command line: the
    usage block argparse prints first would bury the line that says what is wrong; ``--help`` still shows it."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"error: {message}; see {self.prog} --help\n")


def at_least(low: int) -> typing.Callable[[str], int]:
    """An argparse ``type``: a whole number of at least ``low``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if n < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {n}")
        return n

    parse.__name__ = f"a number of at least {low}"
    return parse


def finite_amount(text: str) -> float:
    """An argparse ``type``: a finite amount of at least 0 (``inf`` would be a cap that is never reached)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite amount of at least 0, got {text!r}")
    return value


def _flag(dest: str) -> str:
    return "--no-rollback" if dest == "rollback" else "--" + dest.replace("_", "-")


def _names(kind: str) -> str:
    planned = registry.planned(kind)
    return ", ".join(registry.available(kind)) + (f" (planned: {', '.join(planned)})" if planned else "")


@functools.cache
def backend_option_owners() -> dict[str, tuple[str, ...]]:
    """Every backend option (its field name, the argparse dest) -> the backends that take it."""
    owners: dict[str, tuple[str, ...]] = {}
    for name in registry.available("backend"):
        for field in registry.backend_options(name).model_fields:
            owners[field] = owners.get(field, ()) + (name,)
    return owners


def _options() -> dict[str, tuple[str, ...]]:
    return OPTIONS | {dest: ("backend_options", dest) for dest in backend_option_owners()}


def _argument_type(field: str, annotation: Any) -> dict[str, Any]:
    """argparse ``type``/``choices`` for a ``BackendOptions`` field of ``annotation``."""
    kinds = [annotation]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        kinds = [kind for kind in typing.get_args(annotation) if kind is not type(None)]
    if len(kinds) == 1 and typing.get_origin(kinds[0]) is Literal:
        choices = typing.get_args(kinds[0])
        return {"type": type(choices[0]), "choices": choices}
    if len(kinds) == 1 and kinds[0] in (int, float, str):
        return {"type": kinds[0]}
    raise TypeError(f"backend option {field}: {annotation} is not int, float, str or a Literal of choices")


def _add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """Each backend's options under its heading (an option two backends share, once)."""
    added: set[str] = set()
    for name in registry.available("backend"):
        model = registry.backend_options(name)
        fields = {field: info for field, info in model.model_fields.items() if field not in added}
        if not fields:
            continue
        group = parser.add_argument_group(model.title or f"--backend {name}")
        for field, info in fields.items():
            text = (info.description or "").replace("``", "").rstrip(".")
            default = "" if info.default is None else f" (default {info.default})"
            group.add_argument(_flag(field), default=None, help=text + default,
                               **_argument_type(field, info.annotation))
            added.add(field)


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    default = {name: field.default for name, field in RunConfig.model_fields.items()}
    parser.add_argument("--domain", default=None, help=f"task domain: {_names('domain')}; default {default['domain']}")
    parser.add_argument("--backend", default=None, help=f"training backend: {_names('backend')}; "
                                                        f"default {default['backend']}")
    parser.add_argument("--rounds", type=int, default=None,
                        help=f"total rounds in the run (default {default['rounds']})")
    parser.add_argument("--run-dir", default=None, help="run folder (default runs/<domain>-<time>)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in --run-dir where it stopped; --rounds, --candidates, "
                             "--max-agent-steps and the budget caps may change, any other option must match the run "
                             "or is refused")
    parser.add_argument("--from-branch", default=None, help="start a new run line from this harness branch "
                        "(of --from-run's harness; its iv/ branches are kept, so new ones get other names)")
    parser.add_argument("--from-run", default=None, help="the run folder whose harness holds --from-branch")
    parser.add_argument("--model-path", default=None, help="a local Hugging Face model folder (default SmolLM2-135M)")
    parser.add_argument("--agent", default=None, help=f"meta agent: {_names('agent')}; default llm with --model, "
                                                      f"else {default['agent']}")
    parser.add_argument("--model", default=None, help="LiteLLM model string for --agent llm")
    parser.add_argument("--api-base", default=None, help="OpenAI-compatible endpoint for --agent llm")
    parser.add_argument("--candidates", type=int, default=None,
                        help=f"interventions proposed per round, 0 for none (default {default['candidates']})")
    parser.add_argument("--sample-groups", type=sample_groups, default=None, help="GRPO groups per backtest, or "
                        "'all': every group the archive holds at each backtest (default "
                        f"{BacktestSettings.model_fields['sample_groups'].default})")
    parser.add_argument("--backtest-workers", type=int, default=None, help="with --sample-groups all: archive parts "
                        "scored at once, over a local Ray above 1 (default 1)")
    parser.add_argument("--backtest-ray-address", default=None, help="with --sample-groups all: a Ray cluster to "
                        "shard backtests over (the run folder on a filesystem every node mounts)")
    parser.add_argument("--no-rollback", dest="rollback", action="store_const", const=False, default=None,
                        help="after an exam that fell, keep training the fallen policy (default: roll back)")
    parser.add_argument("--draw-seed", type=int, default=None, help="public draw seed N (reproducible; default secret)")
    parser.add_argument("--max-agent-steps", type=int, default=None,
                        help=f"tool calls per LLM candidate (default {default['max_agent_steps']})")
    parser.add_argument("--dry-run", action="store_true", help="print the first round's exact command, its overrides "
                        "one per line and their validation; launch nothing (a backend that launches jobs: verl)")
    _add_backend_arguments(parser)
    budget = parser.add_argument_group("budget (all optional; a resumed run may change them)")
    budget.add_argument("--budget-tokens", type=int, default=None, help="LLM tokens over the whole run")
    budget.add_argument("--budget-cost", type=finite_amount, default=None, help="LLM cost in USD over the whole run")
    budget.add_argument("--budget-round-tokens", type=int, default=None, help="LLM tokens per round")
    budget.add_argument("--budget-round-cost", type=finite_amount, default=None, help="LLM cost in USD per round")
    budget.add_argument("--budget-compute-hours", type=finite_amount, default=None,
                        help="training compute over the run (CPU-hours locally, GPU-hours on GPUs)")


ALL_GROUPS = "all"


def sample_groups(text: str) -> int | str:
    """``--sample-groups`` (and ``backtest --groups``): a number of groups (at least 2) or ``all``."""
    if text == ALL_GROUPS:
        return text
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number of groups nor 'all'") from None
    if n < 2:
        raise argparse.ArgumentTypeError(f"a sample needs at least 2 groups, got {n}")
    return n


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The run options set on the command line (argparse dest -> value)."""
    return {dest: getattr(args, dest) for dest in _options() if getattr(args, dest) is not None}


def _changes(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` as RunConfig changes, nested where the field is: ``{"budget": {"run_tokens": 9}}``."""
    changes: dict[str, Any] = {}
    for dest, value in given.items():
        if dest == "sample_groups" and value == ALL_GROUPS:
            changes.setdefault("backtest", {})["all_groups"] = True
            continue
        *parents, leaf = _options()[dest]
        node = changes
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return changes


def _validated(build, given: dict[str, Any]) -> RunConfig:
    """``build()``, with a validation error reported against the option that caused it."""
    try:
        return build()
    except ValidationError as exc:
        dest_of = {path: dest for dest, path in _options().items()}
        for loc, what in problems(exc):
            if dest_of.get(loc) in given:
                raise UsageError(f"{_flag(dest_of[loc])}: {what}") from None
        raise UsageError(describe(exc)) from None


def _check_agent(config: RunConfig, given: dict[str, Any]) -> None:
    """The agent gets what it needs and nothing it would ignore: ``--agent llm`` needs ``--model``."""
    takes = registry.agent_options(config.agent)
    for field, required in takes.items():
        if required and getattr(config, field) is None:
            example = " (a LiteLLM model string, e.g. openai/gpt-4o-mini)" if field == "model" else ""
            raise UsageError(f"--agent {config.agent} needs {_flag(field)}{example}")
    for field in registry.AGENT_OPTIONS.values():
        if field in given and field not in takes:
            raise UsageError(f"--agent {config.agent} takes no {_flag(field)}; it is for an agent that does "
                             "(--agent llm)")


def _check_backend_options(backend: str, given: dict[str, Any]) -> None:
    """Options of another backend are refused, and the backend's own checked, each named by its flag."""
    try:
        model = registry.backend_options(backend)
    except registry.UnknownName:
        return  # the run configuration's check names the backend and lists the available ones
    owners = backend_option_owners()
    for dest in given:
        if dest in owners and dest not in model.model_fields:
            raise UsageError(f"{_flag(dest)} is an option of --backend {' and '.join(owners[dest])}, not of "
                             f"--backend {backend}")
    try:
        model.model_validate({dest: value for dest, value in given.items() if dest in model.model_fields})
    except ValidationError as exc:
        loc, what = problems(exc)[0]
        raise UsageError(f"{_flag(str(loc[0]))}: {what}" if loc else what) from None


def _check_line_source(run: Path, branch: str) -> str | None:
    """``--from-run`` is a run whose harness has ``--from-branch``: checked before the new run's folder exists.
    Returns the domain the branch's harness.yaml names (None where it names none it can be read for)."""
    import yaml

    from harness_repo.gitcmd import HarnessError
    from harness_repo.repo import HarnessRepo

    source = RunDir(run)
    if not (source.harness / ".git").is_dir():  # a run folder, or any folder holding a harness repo as harness/
        if not run.is_dir():
            raise RunDirError(not_a_run_message(run))
        raise UsageError(f"--from-run {run} holds no harness repo ({source.harness} is not one); give a run folder")
    repo = HarnessRepo.open(source.harness)
    if not repo.branch_exists(branch):
        raise UsageError(f"--from-branch {branch}: no such branch in {run}'s harness; see its branches with "
                         f"`python -m meta_agent history --run-dir {run}` (main is one)")
    try:  # a harness.yaml the branch broke is the harness's failure in its round, not an option to refuse here
        settings = yaml.safe_load(repo.read_file(branch, "harness.yaml"))
    except (HarnessError, yaml.YAMLError):
        return None
    return settings.get("domain") if isinstance(settings, dict) else None


def new_config(args: argparse.Namespace, run_dir: Path) -> RunConfig:
    if bool(args.from_branch) != bool(args.from_run):
        raise UsageError("--from-branch and --from-run go together: the branch, and the run folder whose harness "
                         "has it")
    given = _given(args)
    _check_backend_options(given.get("backend", RunConfig.model_fields["backend"].default), given)
    values = _changes(given) | {"run_id": run_dir.name, "created": time.time()}
    values.setdefault("agent", "llm" if args.model else "recipe")
    if args.from_branch:
        line_domain = _check_line_source(Path(args.from_run), args.from_branch)
        values["from"] = {"run": args.from_run, "branch": args.from_branch}
    config = _validated(lambda: RunConfig.model_validate(values), given)
    if args.from_branch and line_domain not in (None, config.domain):  # else round 0 fails on harness.yaml
        raise UsageError(f"--from-branch {args.from_branch} of {args.from_run} is a {line_domain} harness; a line "
                         f"from it trains --domain {line_domain}, not {config.domain}")
    _check_agent(config, given)
    try:  # the backend checks its own options (e.g. verl needs --model-path) before any file is written
        registry.make_backend(config.backend, config, None)
    except BackendOptionError as exc:
        raise UsageError(str(exc)) from None
    config = with_seed_profile(config)  # a GPU backend: GPU-sized seed knobs and exam budget, recorded
    if config.evaluation.heldout_max_tokens is None:  # record the number the exam uses, not "the domain's"
        exam_tokens = registry.make_domain(config.domain).exam_max_tokens
        config = config.updated({"evaluation": {"heldout_max_tokens": exam_tokens}})
    return config


def _shown(value: Any) -> str:
    """A recorded setting as the user would say it: ``on``/``off``, ``none``, never Python's ``True``/``None``."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def resumed_config(args: argparse.Namespace, rd: RunDir) -> RunConfig:
    """The run's recorded config with the resumable options given now; any other change is refused."""
    if not rd.path.is_dir():  # a file in its place would fail deep in reading run.json
        raise RunDirError(not_a_run_message(rd.path))
    config = load_run_config(rd.run_json)
    recorded = config.to_json()
    given = _given(args)
    _check_backend_options(config.backend, given)
    changed = []
    for dest in (d for d in given if d not in RESUMABLE):
        value = recorded
        for key in _options()[dest]:
            value = value.get(key) if isinstance(value, dict) else None
        if value != given[dest]:
            changed.append(f"{_flag(dest)} (run.json has {_options()[dest][-1]}: {_shown(value)})")
    changed += [f"{_flag(dest)} (only a new run line starts from a branch)"
                for dest in ("from_branch", "from_run") if getattr(args, dest)]
    if changed:
        raise UsageError(f"cannot change {', '.join(changed)} when resuming: a run keeps what it was started with, "
                         f"so that its rounds stay comparable; only {', '.join(map(_flag, RESUMABLE))} may change. "
                         f"To try other settings start a new run line: --from-run {rd.path} --from-branch main "
                         "--run-dir <new folder> with the options you want")
    updated = _validated(lambda: config.updated(_changes(given)), given)
    _check_agent(updated, given)
    return updated
