"""The runtime's limits and sizes (one place: the host reads some of them too)."""

from __future__ import annotations

RUNTIME_VERSION = 8
"""Bump when what the runtime does changes: backtest caches are keyed by it (with its bytes, ``RUNTIME_ID``)."""
MAX_ERROR_CHARS = 2000
MAX_INFO_CHARS = 4000
MAX_FINDINGS = 50
MAX_REQUEST_BYTES = 1 << 30
MAX_WORKER_BYTES = 1 << 28
CALL_S_BASE = 10.0
CALL_S_PER_ITEM = 0.05
"""One group (or prompt) gets 10 s plus 50 ms per trajectory before it counts as hung."""
SCORE_LANES = 2
"""Score workers.  Each is sent every ``SCORE_LANES``-th group of the session, counted across requests, so which
groups one sees does not depend on how the caller split them into requests; two groups are scored at once."""
READ_BYTES = 1 << 16
"""One read from a pipe: a pipe holds 64 KiB, and a larger read costs an allocation of that size per call
(a 1 MiB read made every group's round trip to the score worker ~5x slower)."""
