"""The code section of a round's digest: pass rate, program outcomes and the trusted failure categories.

Built from the trusted grader's outcomes (``verifier_info``), never from the harness's diagnostics, so
``meta_agent.digest`` can set them beside the harness's findings as ``source: trusted``::

    code = code_summary(rows)           # None when no row is a graded code answer
    code["pass_rate"], code["by_status"], code["syntax_error_rate"]
    markdown += render_code_section(code)
"""

from __future__ import annotations

import json
from collections import Counter

EXAMPLES = 3
CODE_MODES = {
    "code_no_code": ("no_code_rate", 0.3, "warning"),
    "code_syntax_errors": ("syntax_error_rate", 0.3, "warning"),
    "code_truncated": ("truncated_rate", 0.3, "warning"),
    "code_timeouts": ("timeout_rate", 0.2, "warning"),
    "code_forbidden": ("forbidden_rate", 0.0, "error"),
}
"""name -> (field, rate above which it is a warning or error, level): the digest's trusted modes for code."""
_HITS = {
    "code_no_code": lambda i: i.get("parse_status") == "no_code",
    "code_syntax_errors": lambda i: i.get("status") == "syntax_error",
    "code_truncated": lambda i: i.get("parse_status") == "truncated",
    "code_timeouts": lambda i: i.get("status") == "timeout",
    "code_forbidden": lambda i: i.get("status") in ("forbidden", "exited"),
}


def _info(row: dict) -> dict | None:
    info = row.get("verifier_info")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except ValueError:
            return None
    return info if isinstance(info, dict) and isinstance(info.get("execution"), dict) else None


def code_summary(rows: list[dict]) -> dict | None:
    """Pass rate, statuses, mean share of tests passed and failure rates of a round's graded code rows."""
    graded = [(r, i) for r in rows if r.get("domain") == "code" and (i := _info(r)) is not None]
    if not graded:
        return None
    n = len(graded)
    shares = [float(i["execution"].get("share") or 0.0) for _, i in graded]
    summary = {
        "n_graded": n,
        "pass_rate": sum(1 for _, i in graded if i.get("status") == "passed" and i.get("verified") == 1) / n,
        "mean_test_share": sum(shares) / n,
        "by_status": dict(sorted(Counter(str(i.get("status")) for _, i in graded).items())),
        "examples": {},
    }
    for name, (field, _, _) in CODE_MODES.items():
        hits = [str(r.get("traj_id")) for r, i in graded if _HITS[name](i)]
        summary[field] = len(hits) / n
        summary["examples"][name] = hits[:EXAMPLES]
    return summary


def render_code_section(code: dict) -> str:
    """The digest's ``## Code grading`` Markdown table."""
    counts = ", ".join(f"{k} {v}" for k, v in code["by_status"].items()) or "none"
    rows = "".join(f"| {field.removesuffix('_rate').replace('_', ' ')} | {code[field]:.3f} |\n"
                   for field, _, _ in CODE_MODES.values())
    return (f"\n\n## Code grading\n\n| | value |\n| --- | --- |\n"
            f"| pass rate (every hidden test) | {code['pass_rate']:.3f} of {code['n_graded']} graded |\n"
            f"| mean share of tests passed | {code['mean_test_share']:.3f} |\n"
            f"| program status | {counts} |\n" + rows)
