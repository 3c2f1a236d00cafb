"""Running git safely on an untrusted repository.

Hooks and fsmonitor are programs git would run from repo config, and the agent
can reach ``.git``: every call disables them.
"""

from __future__ import annotations

from pathlib import Path

import git

SAFE_OPTIONS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class HarnessError(Exception):
    """A harness-repo operation could not be done; the message says what and how to fix it."""


def git_try(cwd: Path, *args: str) -> tuple[int, str, str]:
    status, out, err = git.Git(str(cwd)).execute(
        ["git", *SAFE_OPTIONS, *args], with_extended_output=True, with_exceptions=False
    )
    return int(status), str(out), str(err)


def run_git(cwd: Path, *args: str) -> str:
    status, out, err = git_try(cwd, *args)
    if status != 0:
        raise HarnessError(f"`git {' '.join(args)}` failed in {cwd}: {err.strip() or out.strip()}")
    return out


def require_empty(path: Path, what: str) -> None:
    """HarnessError unless ``path`` is absent or an empty directory; ``what`` says what to do instead."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise HarnessError(f"{path} already exists and is not an empty directory: {what}")
