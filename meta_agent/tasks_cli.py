"""``python -m meta_agent tasks ...``: check, list, build and import SWE tasks.

    python -m meta_agent tasks check swe_env/specs/sqlparse-0.5.5-begin-transaction.yaml   # evidence; exit 1 if refused
    python -m meta_agent tasks check my-spec.yaml [--add-flips] [--add]   # a spec from anywhere (then gradable here)
    python -m meta_agent tasks list --domain swe [--json]      # shipped tasks and their status here
    python -m meta_agent tasks list --domain code [--json]     # frozen code tasks: counts per source and split
    python -m meta_agent tasks build --domain swe              # build + check every shipped task (idempotent)
    python -m meta_agent tasks import-swebench FILE --repo-path DIR [--split heldout]

Exit codes: 0 done, 1 a spec was refused (the evidence is printed), 2 bad input or no Docker.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from swe_env.build import CheckRecord, cached_record, check_spec
from swe_env.cross_check import shipped_specs
from swe_env.spec import Spec, SpecError, load_spec

DOMAINS = ("swe",)


def _log(message: str) -> None:
    print(f"[tasks] {message}", file=sys.stderr, flush=True)


def print_evidence(spec: Spec, record: CheckRecord) -> None:
    """Per-test outcomes before and after the gold change, timings and the image tag."""
    print(f"task:    {spec.id} ({spec.package} {spec.old_version} -> {spec.new_version}, {spec.split})")
    print(f"image:   {record.image}")
    print(f"status:  {record.status}: {record.reason}")
    if record.timings:
        print("timings: " + ", ".join(f"{k}={v:.1f}s" for k, v in record.timings.items()))
    if not record.before:
        return
    print(f"{'test':<80} before (x{len(next(iter(record.before.values())))})  after")
    shown = [*spec.fail_to_pass, *(n for n in record.before if n not in spec.fail_to_pass)]
    for node in shown:
        before, after = record.before.get(node, ["missing"]), record.after.get(node, [])
        role = "F2P" if node in spec.fail_to_pass else "P2P" if node in record.pass_to_pass else "   "
        print(f"{role} {node[:76]:<76} {','.join(before):<24} {','.join(after)}")


def cmd_check(args: argparse.Namespace) -> int:
    import shutil

    import yaml

    from swe_env.cross_check import split_overlaps
    from swe_env.spec import SPECS_DIR
    from swe_env.tasks import registered_dir

    path = Path(args.spec)
    spec = load_spec(path)
    outside = path.resolve().parent != SPECS_DIR.resolve()
    overlaps = split_overlaps(spec, [s for s in shipped_specs() if s.id != spec.id or outside])
    if overlaps:
        raise SpecError(f"{path}: a held-out task must share nothing with a training task: {overlaps[0]}; "
                        "move one of them to the other split or drop it")
    record = check_spec(spec, log=_log, force=args.force)
    print_evidence(spec, record)
    if record.checked and outside:  # the spec as checked (before --add-flips rewrites it) is gradable here from now on
        registered_dir().mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, registered_dir() / f"{spec.id}.yaml")
    if record.unlisted_flips:
        print(f"unlisted: {len(record.unlisted_flips)} test(s) fail before and pass after but are not in "
              f"fail_to_pass: {record.unlisted_flips[:10]}")
        if args.add_flips:
            data = yaml.safe_load(path.read_text())
            data["fail_to_pass"] = [*data["fail_to_pass"], *record.unlisted_flips]
            path.write_text(yaml.safe_dump(data, sort_keys=False))  # comments in the file are not kept
            print(f"added them to {path}; run `tasks check {path}` again to check the spec as it now reads")
        else:
            print("add them with --add-flips (rewrites the spec's fail_to_pass)")
    if record.checked and outside:
        if args.add:
            shutil.copyfile(path, SPECS_DIR / f"{spec.id}.yaml")
            print(f"added to {SPECS_DIR / (spec.id + '.yaml')}")
        else:
            print(f"{path} is outside {SPECS_DIR}: it can be graded on this machine now; "
                  "ship it with `tasks check --add` (copies it there)")
    return 0 if record.checked else 1


def _status(spec: Spec) -> str:
    record = cached_record(spec)
    return "unchecked" if record is None else record.status


def cmd_list(args: argparse.Namespace) -> int:
    if args.domain == "code":
        from domains.code_listing import print_code_tasks

        return print_code_tasks(as_json=args.json)
    rows = [{"id": s.id, "package": s.package, "old_version": s.old_version, "new_version": s.new_version,
             "split": s.split, "status": _status(s), "fail_to_pass": len(s.fail_to_pass)} for s in shipped_specs()]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    print(f"{'id':<44} {'package':<12} {'versions':<18} {'split':<8} status")
    for row in rows:
        versions = f"{row['old_version']}->{row['new_version']}"
        print(f"{row['id']:<44} {row['package']:<12} {versions:<18} {row['split']:<8} {row['status']}")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    refused = []
    for spec in shipped_specs():
        record = check_spec(spec, log=_log)
        print(f"{record.status:<9} {spec.id}: {record.reason}")
        if not record.checked:
            refused.append(spec.id)
    if refused:
        print(f"refused: {refused} (run `python -m meta_agent tasks check SPEC` for the evidence)", file=sys.stderr)
    return 1 if refused else 0


def cmd_import_swebench(args: argparse.Namespace) -> int:
    from swe_env.build import import_instances

    records = import_instances(Path(args.file), Path(args.repo_path), split=args.split, log=_log)
    for spec, record in records:
        print(f"{record.status:<9} {spec.id}: {record.reason}")
    return 0 if all(record.checked for _, record in records) else 1


def build_parser() -> argparse.ArgumentParser:
    from meta_agent.run_options import OneLineParser

    parser = OneLineParser(prog="python -m meta_agent tasks", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="check one spec and print the evidence (exit 1 if refused)")
    check.add_argument("spec", help="a task spec YAML file, e.g. swe_env/specs/<id>.yaml")
    check.add_argument("--force", action="store_true", help="check again even if a cached record exists")
    check.add_argument("--add-flips", action="store_true",
                       help="add tests that flip between the releases but are not listed to the spec's fail_to_pass")
    check.add_argument("--add", action="store_true", help="copy a checked spec from outside into swe_env/specs/")
    listing = sub.add_parser("list", help="the shipped tasks and their status on this machine")
    listing.add_argument("--domain", choices=(*DOMAINS, "code"), required=True)
    listing.add_argument("--json", action="store_true", help="one JSON object per task")
    build = sub.add_parser("build", help="build and check every shipped task (idempotent)")
    build.add_argument("--domain", choices=DOMAINS, required=True)
    imp = sub.add_parser("import-swebench", help="import SWE-bench-format instances from a local repository")
    imp.add_argument("file", help="a .json (list) or .jsonl file of SWE-bench instances")
    imp.add_argument("--repo-path", required=True, help="a local git clone of the instances' repository")
    imp.add_argument("--split", choices=("train", "heldout"), default="train")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    handler = {"check": cmd_check, "list": cmd_list, "build": cmd_build,
               "import-swebench": cmd_import_swebench}[args.command]
    from meta_agent.errors import USER_ERRORS, one_line

    try:
        return handler(args)
    except USER_ERRORS as exc:  # SpecError, SandboxUnavailable, BuildError...: a bug's ValueError keeps its traceback
        print(f"error: {one_line(str(exc))}", file=sys.stderr)
        return 2
