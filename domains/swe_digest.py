"""The SWE round's section of the rollout digest in Markdown: the trusted grader's outcomes.

``meta_agent.digest._swe_summary`` computes the figures; this renders them under the summary.

    text += render_swe_section(digest["swe"])
"""

from __future__ import annotations


def render_swe_section(swe: dict) -> str:
    """The ``## SWE grading`` table of a SWE round's digest (``digest["swe"]``)."""

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    counts = ", ".join(f"{k} {v}" for k, v in swe["by_status"].items()) or "none"
    exits = ", ".join(f"{k} {v}" for k, v in swe["by_exit_status"].items()) or "none (patch mode)"
    return (
        f"\n\n## SWE grading\n\n| | value |\n| --- | --- |\n"
        f"| resolve rate | {fmt(swe['resolve_rate'])} of {swe['n_graded']} graded |\n"
        f"| grade status | {counts} |\n| exit status | {exits} |\n"
        f"| stopped on a limit | {fmt(swe['limit_exit_rate'])} |\n| mean turns | {fmt(swe['mean_turns'])} |\n"
        f"| malformed answers | {fmt(swe['format_error_rate'])} |\n"
        f"| patch does not apply | {fmt(swe['patch_failed_rate'])} |\n"
        f"| patches editing tests | {fmt(swe['test_edit_rate'])} |\n"
        f"| grades tampered with | {fmt(swe['tampered_rate'])} |\n")
