"""``python -m rl_backend.verl_import``: the verl dump importer's old name, kept for scripts and the README.

The importer lives in :mod:`rl_backend.verl.ingest`; this module only forwards to it.
"""

from rl_backend.verl.ingest import import_verl_dump, load_verifier, main, verl_rows

__all__ = ["import_verl_dump", "load_verifier", "main", "verl_rows"]

if __name__ == "__main__":
    raise SystemExit(main(prog="python -m rl_backend.verl_import"))
