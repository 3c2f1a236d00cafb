"""Trusted grading of a patch against a checked task, in a fresh task container.

    result = grade(task, patch)          # never raises on a bad patch
    result.status, result.resolved, result.touched_tests
"""

from __future__ import annotations

from dataclasses import dataclass, field

from swe_env.tasks import SweTask


@dataclass
class GradeResult:
    """The trusted verdict on one patch."""

    status: str
    """"resolved" | "unresolved" | "empty_patch" | "patch_failed" | "timeout" | "error"."""
    resolved: bool
    tests: dict[str, str] = field(default_factory=dict)
    """Node id -> "passed" | "failed" | "error" | "skipped" | "missing"."""
    touched_tests: list[str] = field(default_factory=list)
    """Test and test-configuration files the patch tried to change (restored before running)."""
    duration_s: float = 0.0
    detail: str = ""

    def to_info(self) -> dict:
        """A JSON-able dict for the archive's ``verifier_info`` column."""
        raise NotImplementedError


def grade(task: SweTask, patch: str, *, timeout_s: float = 120.0) -> GradeResult:
    """Apply ``patch`` to a clean buggy repo and run FAIL_TO_PASS and PASS_TO_PASS; never raises on bad patches."""
    raise NotImplementedError


class ContainerCap:
    """Process-wide cap on concurrent task containers: ``with ContainerCap.slot(): ...``."""
