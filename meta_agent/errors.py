"""Exceptions that are the user's to fix: shown as one clear line instead of a traceback."""

from __future__ import annotations


def _user_errors() -> tuple[type[BaseException], ...]:
    from harness_repo.repo import HarnessError
    from meta_agent.run_dir import RunLocked
    from rl_backend.archive import ArchiveError
    from sandboxes.base import SandboxUnavailable

    return (HarnessError, RunLocked, ArchiveError, SandboxUnavailable, FileNotFoundError, ValueError)


USER_ERRORS = _user_errors()
