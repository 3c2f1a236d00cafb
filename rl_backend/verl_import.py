"""``python -m rl_backend.verl_import``: import a verl dump into the archive from the command line.

The importer itself is :mod:`rl_backend.verl.ingest` (verl's rules for a dump's lines: ``verl.dump_lines``)::

    python -m rl_backend.verl_import runs/r1/rollouts --archive runs/r1/archive \\
        --run-id r1 --round 3 --domain math --split train --verifier domains.math:verify
"""

from __future__ import annotations

import argparse
import importlib
import typing
from pathlib import Path

from rl_backend.archive import Archive, ArchiveError
from rl_backend.verl.ingest import Verifier, import_verl_dump, verl_rows

__all__ = ["import_verl_dump", "load_verifier", "main", "verl_rows"]


def load_verifier(spec: str) -> Verifier:
    """``package.module:function`` -> the callable."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise ArchiveError(f"--verifier {spec!r}: expected 'package.module:function'")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module_name + ".").startswith(exc.name + "."):
            raise  # the module exists and an import inside it failed: its traceback says where
        raise ArchiveError(f"--verifier {spec!r}: no module named {exc.name!r}") from None
    function = getattr(module, attribute, None)
    if not callable(function):
        raise ArchiveError(f"--verifier {spec!r}: {module_name} has no callable {attribute!r}")
    return function


class OneLineParser(argparse.ArgumentParser):
    """Bad input refused in one line (exit 2), as every other command line of the project refuses it: argparse's
    usage block would bury the line that says what is wrong; ``--help`` still shows it.  (The controller's own
    parser, ``meta_agent.run_options.OneLineParser``, sits a layer above this one.)"""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, f"error: {message}; see {self.prog} --help\n")


def main(argv: list[str] | None = None, prog: str = "python -m rl_backend.verl_import") -> int:
    """CLI entry point: ``python -m rl_backend.verl_import DIR --archive A --run-id R --round N ...``."""
    parser = OneLineParser(prog=prog, description="Import a verl rollout or validation dump into the "
                                                            "trajectory archive.")
    parser.add_argument("dump_dir", type=Path, help="verl rollout or validation dump directory (<step>.jsonl)")
    parser.add_argument("--archive", type=Path, required=True, help="archive root directory")
    parser.add_argument("--run-id", required=True)
    parser.add_argument("--round", type=int, required=True)
    parser.add_argument("--domain", required=True, help="math | code | swe")
    parser.add_argument("--split", required=True, help="train | val | heldout")
    parser.add_argument("--data-source", help="data_source for every row (default: the line's, else verl/<domain>)")
    parser.add_argument("--verifier", help="trusted verifier 'module:function' called as f(data_source, response, "
                        "gts); without it 'verified' stays null")
    parser.add_argument("--up-to-step", type=int, help="import only steps <= this one (the job's "
                        "latest_checkpointed_iteration.txt while it runs or after it crashed)")
    args = parser.parse_args(argv)
    try:
        verifier = load_verifier(args.verifier) if args.verifier else None
        n = import_verl_dump(args.dump_dir, Archive(args.archive), args.run_id, args.round, domain=args.domain,
                             split=args.split, data_source=args.data_source, verifier=verifier,
                             up_to_step=args.up_to_step)
    except ArchiveError as exc:
        parser.exit(2, f"error: {exc}\n")
    print(f"{args.dump_dir}: {n} trajectories now in {args.archive} (run {args.run_id}, round {args.round})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
