"""Errors a user can fix: the command line shows their message as one line, without a traceback.

Each package raises its own, and every one of them is listed here; anything else -- a
``ValueError`` or ``FileNotFoundError`` from a real bug -- keeps its traceback::

    UserError                 this module; the controller's own derive from it:
      RunDirError             meta_agent.run_dir: not a run folder, unusable run.json / state.json
        RunStateError
      RunLocked               meta_agent.run_dir: another controller holds the run
      RunConfigError          meta_agent.run_config: a run.json or option the run cannot use
      UnknownName             meta_agent.registry: a domain, backend or agent name not listed
      BacktestError           meta_agent.backtest: nothing in the archive to judge on
      SkillError              meta_agent.skills: a skill file that cannot be read

The layers below ``meta_agent`` cannot import this module, so their user errors are listed beside it:

    HarnessError              harness_repo: a harness-repo operation refused, with how to fix it
    ArchiveError              rl_backend: rows that break the trajectory schema
    BackendOptionError        rl_backend: a backend's options it cannot run with (verl without --model-path)
    ModelUnavailable          rl_backend.model: the local policy's weights are missing
    SandboxUnavailable        sandboxes: no Docker engine or image, with how to start one
      GraderUnavailable       a trusted grader's engine failed mid-grading: nothing scored, run it again
    SpecError, BuildError     swe_env: a task spec refused; a release that cannot be fetched
    TaskNotReady              swe_env: a SWE task whose image and check are not built yet
    ImportFormatError         swe_env: a trajectory file that is not the format it claims (file and line)
    PolicyEndpointError       swe_env: a policy endpoint that is down or answers garbage

``META_AGENT_DEBUG=1`` shows the traceback of a user error too.
"""

from __future__ import annotations

from harness_repo.gitcmd import HarnessError
from rl_backend.base import BackendOptionError
from rl_backend.model import ModelUnavailable
from sandboxes.base import SandboxUnavailable
from swe_env.imports import ImportFormatError
from swe_env.policy_client import PolicyEndpointError
from swe_env.sdist import BuildError
from swe_env.spec import SpecError
from swe_env.tasks import TaskNotReady
from trajectory.archive_checks import ArchiveError


class UserError(Exception):
    """Something the user can fix; the message says what is wrong and what to do."""


USER_ERRORS: tuple[type[Exception], ...] = (UserError, HarnessError, ArchiveError, BackendOptionError,
                                            SandboxUnavailable, ModelUnavailable, SpecError, BuildError, TaskNotReady,
                                            ImportFormatError, PolicyEndpointError)


def one_line(message: str) -> str:
    """``message`` on one line: a parser's own line breaks (YAML's position and caret) joined with "; "."""
    parts = [part.strip() for part in message.splitlines()]
    return "; ".join(part for part in parts if part and part != "^")
