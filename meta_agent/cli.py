"""Command line of meta-agent: run rounds, then review what changed and why.

  python -m meta_agent --domain math                        run rounds: train, digest, propose, backtest, promote
  python -m meta_agent --resume --run-dir runs/math         continue a stopped run
  python -m meta_agent backtest iv/r0-boxed --run-dir R     backtest a branch against main, then merge or tag it
  python -m meta_agent backtest iv/r0-boxed --run-dir R --groups all --workers 2   every group, over a local Ray
  python -m meta_agent history --run-dir R                  every intervention: status, hypothesis, verdict
  python -m meta_agent show iv/r0-boxed --run-dir R         one intervention whole (or a round: show 0)
  python -m meta_agent report --run-dir R                   HTML site + Markdown: curves, interventions, digests
  python -m meta_agent report --compare R1 R2 --out D       several runs overlaid with their intervals
  python -m meta_agent rescore --run-dir R [--workers 2]    re-judge the archive with main's harness and verifier
  python -m meta_agent demo --run-dir runs/demo             a sample run without training, in seconds
  python -m meta_agent tasks --help                         check, list, build and import SWE tasks
  python -m meta_agent import-trajectories a.traj.json --format mini-swe-agent --archive A --run-id imp

Exit codes: 0 done, 1 the work failed, 2 bad input (an option, a name or a folder), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console(stderr=True)
SUBCOMMANDS = ("backtest", "history", "show", "demo", "report", "import-trajectories", "rescore")


def _sandbox():
    from sandboxes.docker import DockerSandbox

    return DockerSandbox()


def cmd_backtest(args: argparse.Namespace) -> int:
    from harness_repo.repo import HarnessRepo
    from meta_agent.backtest import backtest_branch
    from meta_agent.config import BacktestSettings
    from meta_agent.judge.sharded_backtest import backtest_plan
    from meta_agent.run_dir import RunDir
    from rl_backend.archive import Archive

    from meta_agent.config import GateThresholds
    from meta_agent.run_config import RunConfigError, load_run_config
    from meta_agent.run_options import UsageError

    if (args.workers > 1 or args.ray_address) and args.groups != "all":  # the options before the run is opened
        raise UsageError("--workers and --ray-address shard a backtest of every group: add --groups all")
    rd = RunDir(Path(args.run_dir)).require()
    repo = HarnessRepo.open(rd.harness)
    if args.branch == "main":
        from meta_agent.review.records import names

        raise UsageError("main is what a branch is judged against, not a candidate; backtest an intervention "
                         "branch: " + (", ".join(n for n in names(rd, repo) if n.startswith("iv/")) or "none yet"))
    if not repo.branch_exists(args.branch):
        from meta_agent.review.records import NameNotFound, names, resolve

        kind, key = resolve(rd, repo, args.branch)  # NameNotFound with the nearest names when it is none
        if kind != "intervention":
            raise NameNotFound(f"{args.branch!r} is round {key}, not a branch; backtest one of: "
                               + ", ".join(n for n in names(rd, repo) if n.startswith("iv/")))
        args.branch = str(key)
    try:  # judge with the run's own thresholds and sandbox limits when it records them
        config = load_run_config(rd.run_json)
        thresholds, base = config.gate, config.backtest
    except RunConfigError:  # a folder whose run.json records no settings (bench/compare_arms.py runs): the defaults
        thresholds, base = GateThresholds(), BacktestSettings()
    archive, say = Archive(rd.archive), lambda s: console.print(f"  {s}")
    from rl_backend.archive_ledger import refuse_damaged

    if rd.archive.is_dir():  # a verdict over a damaged part would judge rows that are not there
        refuse_damaged(archive, None)
    every = args.groups == "all"  # every group; sharded by part file over Ray (meta_agent.judge.sharded_backtest)
    base = base.model_copy(update={"seed": args.seed, "all_groups": every, "workers": args.workers,
                                   "ray_address": args.ray_address} | ({} if every else {"sample_groups": args.groups}))
    with backtest_plan(archive, base, say) as (settings, runner):  # Ray started once for both arms
        outcome = backtest_branch(repo, archive, args.branch, _sandbox(), rd.backtests, thresholds=thresholds,
                                  settings=settings, apply=not args.dry_run, progress=say, runner=runner)
    colour = "green" if outcome.decision == "merge" else "red"
    console.print(f"[bold {colour}]{outcome.decision.upper()}[/] {args.branch}: {outcome.report['key_figures']}")
    for reason in outcome.reasons:
        console.print(f"  - {reason}")
    console.print(f"report: {outcome.report_md}")
    if outcome.merge_commit:
        console.print(f"merged into main as {outcome.merge_commit[:10]}")
    elif outcome.tag:
        console.print(f"kept branch, tagged {outcome.tag}")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from harness_repo.repo import HarnessRepo
    from meta_agent.live_check import live_lines
    from meta_agent.review.history_view import WIDE, print_compact
    from meta_agent.run_dir import RunDir

    rd = RunDir(Path(args.run_dir)).require()
    repo = HarnessRepo.open(rd.harness)
    ivs = repo.interventions()
    if args.json:
        print(json.dumps([iv.__dict__ for iv in ivs], indent=2, default=str))
        return 0
    digests = [json.loads(p.read_text()) for p in rd.path.glob("rounds/*/digest.json")]
    live = live_lines(digests)
    from meta_agent.review.rejudged import rejudged_lines

    for branch, lines in rejudged_lines(rd.path).items():
        live.setdefault(branch, []).extend(lines)
    out = Console()
    if out.width < WIDE:  # a table of five columns folds into slivers: a few lines per intervention instead
        print_compact(ivs, live, out, args.run_dir)
        ivs_shown = True
    else:
        ivs_shown = False
    table = Table(title=f"Interventions in {rd.harness}", show_lines=True)
    for col in ("branch", "status", "hypothesis", "predicted effect", "verdict / evidence"):
        table.add_column(col, overflow="fold")
    for iv in ivs:
        verdict = iv.verdict or ""
        if iv.revert_commit:  # why it was undone: the first paragraph after the subject of the revert commit
            paragraphs = repo.message(iv.revert_commit).split("\n\n")
            why = paragraphs[1] if len(paragraphs) > 1 else paragraphs[0]
            verdict += f"\nreverted {iv.revert_commit[:8]}: {why}"
        verdict += "".join(f"\n{line}" for line in live.get(iv.branch, []))
        agent = ", ".join(iv.trailers.get("Agent", []) + iv.trailers.get("Model", []))
        usage = " ".join(f"{k.lower()} {v[-1]}" for k, v in iv.trailers.items() if k in ("Tokens", "Cost") and v)
        agent = f"{agent}\n{usage}" if usage else agent
        table.add_row(f"{iv.branch}\n{iv.head[:8]}" + (f"\n{agent}" if agent else ""), iv.status, iv.hypothesis,
                      "\n".join(iv.predicted_effects), verdict)
    if not ivs_shown:
        out.print(table if ivs else "no interventions yet")
    from meta_agent.review.precision import checked_precision, describe

    Console().print(describe(checked_precision(ivs, digests)), markup=False)
    for n, info in sorted(rd.state().get("rounds", {}).items(), key=lambda item: int(item[0])):
        for line in info.get("unaddressed", []):
            Console().print(f"round {n}, not addressed: {line}", markup=False)
    from meta_agent.review.losses import loss_lines

    from meta_agent.review.losses import alarm_lines

    for line in loss_lines(rd.archive) + alarm_lines(digests):
        Console().print(line, markup=False)
    from meta_agent.review.drafts import drafts

    for d in drafts(repo):  # a stopped candidate's work: never judged, kept, and openable
        Console().print(f"parked draft {d.ref} ({d.head[:8]}, {d.subject}): never judged; "
                        f"open it with: python -m meta_agent show {d.ref} --run-dir {args.run_dir}", markup=False)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from meta_agent.review.show import show
    from meta_agent.run_dir import RunDir

    return show(RunDir(Path(args.run_dir)), args.name, args.json)


def cmd_demo(args: argparse.Namespace) -> int:
    from meta_agent.demo import run_demo
    from meta_agent.run_options import UsageError
    from meta_agent.run_dir import RunDir

    if RunDir(Path(args.run_dir)).exists():
        raise UsageError(f"{args.run_dir} already holds a run; pick another --run-dir or remove it")
    return run_demo(Path(args.run_dir), groups=args.groups, console=console)


def cmd_report(args: argparse.Namespace) -> int:
    from meta_agent.report import write_report
    from meta_agent.run_options import UsageError
    from meta_agent.review.html_report import write_compare, write_site

    if args.compare:
        if args.run_dir:
            raise UsageError("give either --run-dir (one run) or --compare R1 R2 ... (several), not both")
        index = write_compare([Path(p) for p in args.compare], Path(args.out or "report-compare"))
        console.print(f"comparison: {index}")
        return 0
    if not args.run_dir:
        raise UsageError("report needs --run-dir R (one run) or --compare R1 R2 ... (several runs)")
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise UsageError(f"--out {args.out} is a file; give a folder for the site")
    png = write_report(Path(args.run_dir), Path(args.out) if args.out else None)  # --out holds every file
    from meta_agent.review.losses import loss_lines
    from meta_agent.run_dir import RunDir

    for line in loss_lines(RunDir(Path(args.run_dir)).archive):
        console.print(line, markup=False)
    index = write_site(Path(args.run_dir), Path(args.out) if args.out else png.parent)
    console.print(f"report: {index} (open it in a browser, no server needed)\n"
                  f"markdown: {png.parent / 'report.md'}\ncurves: {png}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from meta_agent.run_options import UsageError
    from rl_backend.archive import Archive
    from swe_env.imports import import_rows

    for name in args.files:
        if not Path(name).is_file():
            what = "is a folder" if Path(name).is_dir() else "does not exist"
            raise UsageError(f"{name} {what}; give the trajectory files {args.format} wrote")
    rows = import_rows([Path(p) for p in args.files], args.format, run_id=args.run_id, round=args.round,
                       progress=lambda s: console.print(f"  {s}"))
    part = Archive(Path(args.archive)).append_round(args.run_id, args.round, rows)
    resolved = sum(r["verified"] == 1.0 for r in rows)
    console.print(f"imported {len(rows)} trajectories ({resolved} resolved) into {part}")
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    from meta_agent.judge.rescore import rescore_run
    from meta_agent.run_dir import RunDir

    summary = rescore_run(RunDir(Path(args.run_dir)), workers=args.workers, ray_address=args.ray_address,
                          skip_bad_parts=args.skip_bad_parts, revert=args.revert,
                          progress=lambda s: console.print(f"  {s}", markup=False))
    console.print(f"re-scored {summary['rows']} trajectories in {summary['parts']} part(s) with main "
                  f"{summary['judge']['main'][:12]} (verifier {summary['judge']['verifier']}): {summary['out']}")
    if summary["bad_parts"]:
        console.print(f"[yellow]skipped {len(summary['bad_parts'])} unreadable part(s)[/]")
    for shard, failure in summary["failures"].items():
        console.print(f"[red]main's harness failed on {escape(shard)}:[/] {escape(failure[:300])}")
    for verdict in summary["merges"]:
        colour = {"rejudged": "red", "unjudged": "yellow"}.get(verdict["status"], "green")
        reasons = "; ".join(verdict["reasons"])
        console.print(f"[{colour}]{verdict['status']}[/] {verdict['branch']}"
                      + (f": {escape(reasons)}" if reasons else ""))
    if summary["reverted"]:
        console.print(f"reverted: {', '.join(summary['reverted'])}")
    return 1 if summary["failures"] else 0


RUN_DIR_HELP = "the run folder (made by a run or by demo)"


def build_parser() -> argparse.ArgumentParser:
    from meta_agent.run_options import OneLineParser, at_least, sample_groups

    parser = OneLineParser(prog="python -m meta_agent", description=__doc__,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    bt = sub.add_parser("backtest", help="backtest a harness branch against main, then merge or tag it",
                        description="Replay a branch's harness and main's over archived rollouts in the sandbox; "
                                    "the gate merges the branch or tags it with its verdict.")
    bt.add_argument("branch", help="the intervention branch, e.g. iv/r0-boxed-answers")
    bt.add_argument("--run-dir", required=True, help=RUN_DIR_HELP)
    bt.add_argument("--groups", type=sample_groups, default=64, help="GRPO groups in the sample, or 'all' (default 64)")
    bt.add_argument("--seed", type=int, default=0, help="seed of the sample of groups (default 0)")
    bt.add_argument("--dry-run", action="store_true", help="report only; do not merge or tag")
    bt.add_argument("--workers", type=at_least(1), default=1, help="with --groups all: parts scored at once; above 1, "
                    "over Ray (default 1)")
    bt.add_argument("--ray-address", default=None, help="with --groups all: a Ray cluster to shard over "
                    "(default: a local Ray)")
    hist = sub.add_parser("history", help="every intervention: status, hypothesis, verdict, live check",
                          description="One row per intervention branch of the run's harness repo, then the "
                                      "backtest precision and the findings no intervention addressed.")
    hist.add_argument("--run-dir", required=True, help=RUN_DIR_HELP)
    hist.add_argument("--json", action="store_true", help="print the interventions as JSON instead of a table")
    show = sub.add_parser("show", help="one intervention whole (diff, backtest, verdict, live check) or one round",
                          description="An intervention: hypothesis, author, diff, backtest metrics with intervals "
                                      "for main and candidate, the gate, verdict, live check, skill or revert. A "
                                      "round: the digest's findings with examples, the proposals and their fates, "
                                      "the exam.")
    show.add_argument("name", help="an intervention branch (iv/r0-x or r0-x), a commit on one, or a round number")
    show.add_argument("--run-dir", required=True, help=RUN_DIR_HELP)
    show.add_argument("--json", action="store_true", help="print the record as JSON (the fields the HTML shows)")
    demo = sub.add_parser("demo", help="build a sample run (no training) and backtest two sample interventions",
                          description="A run folder with a synthetic archive, the recipe agent's proposal and a "
                                      "reward hack, each backtested: the hack is rejected. Review it with history, "
                                      "show and report; resume it to train.")
    demo.add_argument("--run-dir", default="runs/demo", help="a new folder for the sample run (default runs/demo)")
    demo.add_argument("--groups", type=at_least(2), default=64, help="GRPO groups in the sample archive (default 64)")
    rep = sub.add_parser("report", help="a static HTML site (and Markdown) of a run, or several runs compared",
                         description="Writes <run>/report/index.html (curves with intervals, every intervention "
                                     "with its own page, each round's findings, the harness's git graph) plus "
                                     "report.md and curves.png. Opens from disk: no server, no network.")
    rep.add_argument("--run-dir", help=RUN_DIR_HELP)
    rep.add_argument("--compare", nargs="+", metavar="RUN", help="run folders (or a compare_arms output folder) "
                                                                 "to overlay")
    rep.add_argument("--out", help="where to write the site (default <run>/report, or report-compare)")
    imp = sub.add_parser("import-trajectories", help="SWE trajectories of other tools -> graded archive rows")
    imp.add_argument("files", nargs="+", help="trajectory files")
    imp.add_argument("--format", required=True, choices=("mini-swe-agent", "swe-agent", "swebench-predictions"),
                     help="the tool that wrote the files")
    imp.add_argument("--archive", required=True, help="archive folder (e.g. runs/swe/archive)")
    imp.add_argument("--run-id", required=True, help="run id the rows are filed under")
    imp.add_argument("--round", type=int, default=0, help="round the rows are filed under (default 0)")
    res = sub.add_parser("rescore", help="re-judge every archived round with main's current harness and verifier",
                         description="Re-runs main's reward, filters and diagnostics (sandboxed) and the trusted "
                                     "verifier over every archive part, writes R/rescore/<main>/ beside the archive "
                                     "(never changing it) and lists the merges the new judge would reject.")
    res.add_argument("--run-dir", required=True, help=RUN_DIR_HELP)
    res.add_argument("--workers", type=at_least(1), default=1,
                     help="parts scored at once; above 1, over Ray (default 1)")
    res.add_argument("--ray-address", default=None, help="a Ray cluster to shard over (default: a local Ray)")
    res.add_argument("--skip-bad-parts", action="store_true", help="judge without unreadable parts (counted)")
    res.add_argument("--revert", action="store_true", help="revert the merges it re-judges (trailer Rejudged:)")
    sub.add_parser("tasks", help="check, list, build and import SWE tasks (python -m meta_agent tasks --help)",
                   add_help=False)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "tasks":  # check, list, build and import SWE tasks: its own parser
        from meta_agent.tasks_cli import main as tasks_main

        return tasks_main(argv[1:])
    if argv and not argv[0].startswith("-") and argv[0] not in SUBCOMMANDS:  # run options all start with "-"
        return unknown_command(argv[0])
    if argv and argv[0] in SUBCOMMANDS:
        args = build_parser().parse_args(argv)
        handler = {"backtest": cmd_backtest, "history": cmd_history, "show": cmd_show, "demo": cmd_demo,
                   "report": cmd_report, "import-trajectories": cmd_import,
                   "rescore": cmd_rescore}[args.command]
    else:
        from meta_agent.run_cli import cmd_run
        from meta_agent.run_options import OneLineParser, add_run_arguments

        commands = "{" + ",".join(SUBCOMMANDS + ("tasks",)) + "}"
        parser = OneLineParser(prog="python -m meta_agent", description=__doc__,
                               usage=f"%(prog)s [run options]\n       %(prog)s {commands} ... (each has --help)",
                               formatter_class=argparse.RawDescriptionHelpFormatter)
        add_run_arguments(parser)
        args = parser.parse_args(argv)
        handler = cmd_run
    try:
        return handler(args)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/]")
        return 130
    except Exception as exc:  # a clear one-line error for the user; the traceback with META_AGENT_DEBUG=1
        from meta_agent.errors import USER_ERRORS, one_line

        if isinstance(exc, USER_ERRORS + input_errors()) and not os.environ.get("META_AGENT_DEBUG"):
            console.print(f"[bold red]error:[/] {escape(one_line(str(exc)))}", soft_wrap=True)
            return 2 if isinstance(exc, input_errors()) else 1
        raise


def unknown_command(word: str) -> int:
    """Exit 2 naming the nearest command: a typo is not a run option."""
    import difflib

    commands = SUBCOMMANDS + ("tasks",)
    near = difflib.get_close_matches(word, commands, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}?" if near else (
        f"the commands are: {', '.join(commands)} (or run options: --help)")
    console.print(f"[bold red]error:[/] unknown command {escape(repr(word))}; {hint}", soft_wrap=True)
    return 2


def input_errors() -> tuple[type[Exception], ...]:
    """User errors about what the command was given (an option, a name, a folder, a file): exit 2.
    Any other user error (Docker down, a run locked by another controller) is a failure of the work: exit 1."""
    from meta_agent.registry import UnknownName
    from meta_agent.review.records import NameNotFound
    from meta_agent.run_options import UsageError
    from meta_agent.run_config import RunConfigError
    from meta_agent.run_dir import RunDirError
    from swe_env.imports import ImportFormatError
    from swe_env.spec import SpecError

    return (RunDirError, RunConfigError, UnknownName, NameNotFound, UsageError, ImportFormatError, SpecError)
