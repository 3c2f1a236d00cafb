"""``main:diagnostic_examples`` on a round's own batch (no sandbox): the examples the digest shows for a diagnostic's
finding are judged against the round's rows of its mode, and joined with the constructed batches' into one finding.
"""

from __future__ import annotations

from domains.math import MathDomain
from meta_agent.constructed_checks import add_constructed_findings
from meta_agent.diagnostic_checks import round_bands
from meta_agent.diagnostic_examples import examples_finding, instances, wrong_examples
from meta_agent.digest_rows import example
from test_a2_constructed import round_rows
from test_recipe_agent import quiet_digest


def _rows() -> list[dict]:
    """The untrained round (two flat groups of four, all unpaid; one answer a group cut off and without a final
    line), each row with its verifier's verdict."""
    math = MathDomain()
    return [dict(r, verifier_info=math.verify(r["data_source"], r["response"], r["ground_truth"])[1])
            for r in round_rows()]


def _mode(name: str, rows: list[dict], severity: str = "warning") -> dict:
    """A diagnostics finding in the digest at the round's rate (every group flat, 2 of 8 answers cut and unanswered),
    showing ``rows`` as its examples."""
    said = "2/2 groups" if name == "zero_variance" else "2/8 responses"
    return {"name": name, "source": "diagnostics", "severity": severity, "rate": 1.0 if name == "zero_variance"
            else 0.25, "message": f"{said}: {name}", "examples": [example(r) for r in rows]}


def _digest(modes: list[dict], record: dict) -> dict:
    digest = quiet_digest(round=1, failure_modes=modes)
    add_constructed_findings(digest, record)
    return digest


def test_the_round_s_examples_are_judged_against_its_rows_of_the_mode() -> None:
    rows = _rows()
    of = instances(rows)
    assert sorted(of["no_final_answer"].of) == sorted(of["truncation"].of) == ["g0-3", "g1-3"], of
    assert len(of["zero_variance_groups"].of) == 8 and of["zero_variance_groups"].units == 2
    record = {"checks": [], "findings": [], "round_bands": round_bands(rows), "round_instances": of}
    right = [_mode("format_failures", [rows[3], rows[7]]), _mode("truncation", [rows[3]]),
             _mode("zero_variance", [rows[0], rows[4]])]
    digest = _digest(right, record)
    assert not [m for m in digest["failure_modes"] if m["name"].startswith("main:diagnostic")], digest
    # the format finding's examples are the round's first answers, which have their Answer: line
    digest = _digest([_mode("format_failures", rows[:3]), *right[1:]], record)
    [named] = [m for m in digest["failure_modes"] if m["name"] == "main:diagnostic_examples"]
    assert named["severity"] == "error" and named["rate"] == 1 / 3, named  # a warning showing no instance at all
    assert named["evidence"]["findings"]["format_failures"]["wrong"] == ["g0-0", "g0-1", "g0-2"], named
    assert not digest["main_checks"]["diagnostic_examples"]["passed"]
    # an info finding with one wrong example of two: a warning; joined with a constructed batch's wrong count
    batch = [dict(r, truncated=False, finish_reason="stop") for r in rows]
    items, judged = wrong_examples("clean", [{"name": "truncation", "severity": "info", "message": "8/8 cut",
                                              "example_ids": []}], batch)
    assert [(i["kind"], i["said"], i["trusted"]) for i in items] == [("count", "8/8", "0/8")], items
    record |= {"findings": [examples_finding(items, judged, "constructed_checks")], "example_items": items,
               "example_judged": judged}
    digest = _digest([right[0], _mode("truncation", [rows[3], rows[2]], "info"), right[2]], record)
    [named] = [m for m in digest["failure_modes"] if m["name"] == "main:diagnostic_examples"]
    found = named["evidence"]["findings"]["truncation"]
    assert (found["wrong"], found["batches"], found["counts"]) == (["g0-2"], ["round", "clean"],
                                                                   [["clean", "8/8", "0/8"]]), found
    assert named["severity"] == "warning" and named["rate"] == 2 / 4, named


def test_an_id_that_is_no_row_of_the_batch_is_a_wrong_example_and_an_unjudged_row_is_not_judged() -> None:
    rows = [dict(r, verifier_info=None) for r in _rows()]
    findings = [{"name": "format_failures", "severity": "warning", "message": "",
                 "example_ids": ["g0-0", "g0-3"]},
                {"name": "truncation", "severity": "warning", "message": "", "example_ids": ["g0-3", "made-up"]}]
    items, judged = wrong_examples("round", findings, rows)
    assert judged == 1 and [(i["finding"], i["id"], i["why"]) for i in items] == [
        ("truncation", "made-up", "no row of the batch")], items
