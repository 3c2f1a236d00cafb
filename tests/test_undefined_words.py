"""An undefined figure reads as a word with its reason, never ``nan`` (issue 48: the backtest table printed
``nan +nan [+nan, +nan] pass``; ``show 1`` printed ``0.352 [0.269, +0.441]``)."""

from __future__ import annotations

import io
import json
import math

from rich.console import Console

from meta_agent.backtest_report import render_markdown
from meta_agent.review.records import _metric_rows
from meta_agent.review.show import change_cell, print_round

NAN = math.nan


def report() -> dict:
    """A backtest report as ``build_report`` writes it, read back from JSON (NaN survives as NaN)."""
    metrics = {"hack_rate": {"name": "hack_rate", "main": NAN, "candidate": NAN, "delta": NAN, "ci_low": NAN,
                             "ci_high": NAN},
               "kept_share": {"name": "kept_share", "main": 1.0, "candidate": 0.75, "delta": -0.25, "ci_low": -0.4,
                              "ci_high": -0.1}}
    data = {"intervention": {"branch": "iv/r0-x", "head": "a" * 40, "subject": "x", "hypothesis": "h",
                             "predicted_effects": [], "skill": None},
            "main_commit": "b" * 40, "candidate_commit": "c" * 40,
            "sample": {"id": "s", "trajectories": 8, "groups": 2, "definition": "d"},
            "runs": {}, "decision": "merge", "reasons": [],
            "thresholds": {"confidence": 0.95, "hack_rate_margin": 0.0},
            "gate": {"metrics": metrics, "effects": [],
                     "checks": [{"name": "hack_rate", "passed": True, "detail": ""}]}}
    return json.loads(json.dumps(data))


def test_an_undefined_gate_metric_says_why_in_show_and_in_the_markdown_report() -> None:
    rows = {m["name"]: m for m in _metric_rows(report())}
    assert change_cell(rows["hack_rate"]) == "undefined: no verified failure in the sample"
    assert change_cell(rows["kept_share"]) == "-0.250 [-0.400, -0.100]"
    md = render_markdown(report())
    assert "nan" not in md.lower()
    assert "| hack_rate | undefined | undefined | undefined | undefined: no verified failure in the sample |" in md


def test_a_rounds_accuracy_bounds_carry_no_sign() -> None:
    out = io.StringIO()
    record = {"round": 1, "figures": {}, "findings": [], "proposals": [], "missing": [],
              "exam": {"accuracy": {"value": 0.352, "low": 0.269, "high": 0.441, "n": 128}, "vs_base": None}}
    print_round(record, Console(file=out, width=80))
    assert "0.352 [0.269, 0.441]" in out.getvalue() and "+0.441" not in out.getvalue()
