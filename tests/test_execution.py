"""The shared execution layer on its own: strict record parsing, and the trusted parent in a real container."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from execution.records import MAX_LINE_BYTES, RecordParser

RUNNER = '''
import os, sys
sys.path.insert(0, "/grader")
import grader_channel
def main():
    send = grader_channel.open_channel(int(sys.argv[-2]), int(sys.argv[-1]))
    send("test", node="a", outcome="passed")
    if sys.argv[1] == "forge":
        os.write(int(sys.argv[-1]), b"1 " + b"0" * 64 + b' {"k":"test","node":"b","outcome":"passed"}\\n')
    if sys.argv[1] != "crash":
        send("done", exit=0)
    if sys.argv[1] == "late":
        os.write(int(sys.argv[-1]), b"junk after done\\n")
main()
'''


def test_record_parser_is_strict_and_bounded():
    parser = RecordParser(max_records=3)
    records = parser.feed(b'{"k": "test", "node": "a"}\n{"k": "te')
    assert records == [{"k": "test", "node": "a"}]
    parser.feed(b'st", "n": 1}\nnot json\n[1, 2]\n{"k": "x", "v": {"nested": 1}}\n{"k": "x", "v": NaN}\n')
    parser.feed(b'{"k": "' + b"x" * MAX_LINE_BYTES + b'"}\n{"k": "3"}\n{"k": "4"}\n{"k": "tail')
    parser.close()
    assert [r["k"] for r in parser.records] == ["test", "test", "3"]
    assert parser.problems == [
        "a line that is not JSON: Expecting value: line 1 column 1 (char 0)",
        "a line that is not an object with a string 'k' and few fields",
        "record field 'v' is not a scalar or a short list of scalars",
        "a line that is not JSON: NaN is not a JSON number",
        f"a line longer than {MAX_LINE_BYTES} bytes",
        "more than 3 records",
        "the stream ended inside a line (11 bytes)",
    ]


@pytest.mark.docker
def test_parent_streams_mac_checked_records_and_flags_the_rest(tmp_path: Path, docker_sandbox):
    from execution.container import Plan, run_plan
    from sandboxes.base import Limits

    runner = tmp_path / "toy_runner.py"
    runner.write_text(RUNNER)
    seen: list[dict] = []
    argv = lambda mode: ["python3", "-I", "-B", "/grader/toy_runner.py", mode]  # noqa: E731
    result = run_plan(docker_sandbox.image, Plan(runs=[argv("honest"), argv("forge"), argv("crash"), argv("late")]),
                      mounts=[],
                      inbox=[runner], limits=Limits(timeout_s=60), on_record=seen.append)
    assert result.complete and not result.problems
    assert [(r["run"], r["k"], r.get("node")) for r in result.records if r["k"] != "flag"] == [
        (0, "test", "a"), (0, "done", None), (1, "test", "a"), (1, "done", None), (2, "test", "a"),
        (3, "test", "a"), (3, "done", None)]
    assert [(f["run"], f["why"]) for f in result.flags] == [
        (1, "record 1 carries a wrong MAC: not written by the runner"),
        (3, "15 bytes on the record pipe after the runner's done record")]
    # The forged line is flagged; the runner's own record with that number still counts (the flag stays).
    assert [(r["run"], r["done"]) for r in result.runs] == [(0, True), (1, True), (2, False), (3, True)]
    assert [r for r in seen if r["k"] == "test"] == [r for r in result.records if r["k"] == "test"]  # streamed
    assert json.dumps(result.records)  # plain JSON all the way
