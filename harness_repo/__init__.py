"""harness_repo: the training harness as a git repository (untrusted content, trusted handling).

Owns the file contract, seed harnesses per domain, intervention branches,
worktrees, merges that carry evidence and verdict tags.  It must never execute
harness code; it only reads and writes files and git objects.
"""

from harness_repo.repo import HarnessError, HarnessRepo, Intervention, Worktree
from harness_repo.trailers import format_trailers, parse_trailers

__all__ = [
    "HarnessError",
    "HarnessRepo",
    "Intervention",
    "Worktree",
    "format_trailers",
    "parse_trailers",
]
