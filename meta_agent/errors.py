"""Errors a user can fix: the command line shows their message as one line, without a traceback.

Each package raises its own, and every one of them is listed here; anything else -- a
``ValueError`` or ``FileNotFoundError`` from a real bug -- keeps its traceback::

    UserError                 this module; the controller's own derive from it:
      RunDirError             meta_agent.run_dir: not a run folder, unusable run.json / state.json
        RunStateError
      RunLocked               meta_agent.run_dir: another controller holds the run
      BacktestError           meta_agent.backtest: nothing in the archive to judge on
      SkillError              meta_agent.skills: a skill file that cannot be read
    HarnessError              harness_repo: a harness-repo operation refused, with how to fix it
    ArchiveError              rl_backend: rows that break the trajectory schema
    SandboxUnavailable        sandboxes: no Docker engine or image, with how to start one
    UnknownName               meta_agent.registry: a domain, backend or agent name not listed

``META_AGENT_DEBUG=1`` shows the traceback of a user error too.
"""

from __future__ import annotations

from harness_repo.gitcmd import HarnessError
from meta_agent.registry import UnknownName
from rl_backend.archive_checks import ArchiveError
from sandboxes.base import SandboxUnavailable


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and what to do."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError, HarnessError, ArchiveError, SandboxUnavailable, UnknownName)
