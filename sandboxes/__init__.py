"""sandboxes: isolation for untrusted harness code.

Owns the Sandbox protocol, the Docker implementation, the image recipe with its
offline build, and the backtest runner that executes *inside* a container.
It must never compute a metric or a decision: it only returns what harness code
produced.
"""
from sandboxes.base import Limits, Mount, Sandbox, SandboxResult, SandboxUnavailable

__all__ = ["Limits", "Mount", "Sandbox", "SandboxResult", "SandboxUnavailable"]
