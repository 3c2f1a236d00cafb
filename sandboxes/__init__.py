"""sandboxes: isolation for untrusted harness code.

Owns the Sandbox protocol, the Docker implementation, the image recipe with its
offline build, the one harness runtime that executes harness files *inside* a
container (``harness_runtime``) and its host-side client (``harness_client``),
and the reader of hostile sandbox output (``untrusted``).  It must never compute
a metric or a decision: it only returns what harness code produced, checked.
"""
from sandboxes.base import GraderUnavailable, Limits, Mount, Sandbox, SandboxResult, SandboxUnavailable

__all__ = ["GraderUnavailable", "Limits", "Mount", "Sandbox", "SandboxResult", "SandboxUnavailable"]
