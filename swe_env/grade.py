"""Trusted grading of a patch against a checked task, in a fresh task container.

    result = grade(task, patch)          # never raises on a bad patch
    result.status, result.resolved, result.touched_tests

How a patch is judged (SWE-bench's rule: resolved = every FAIL_TO_PASS and every PASS_TO_PASS
passed):

1. An empty patch is ``empty_patch``.  A patch that names a path outside the repo (absolute,
   ``..``, ``.git``), creates a symlink, carries binary data, or does not ``git apply`` to a clean
   copy of the buggy repo is ``patch_failed``.
2. The patch is applied to a copy of the repo the policy saw (the old release's tests).  Every
   test file, every file under a test folder, every ``conftest.py`` and every pytest configuration
   file (``pytest.ini``, ``setup.cfg``, ``pyproject.toml``, ``tox.ini``) is restored; new ones are
   deleted, as are new top-level modules named like a standard library module or a test tool.
   ``touched_tests`` lists them all.  Source the patch adds or changes that reaches into the
   interpreter (frames, gc, ``sys.modules``, pytest internals, ``/proc``, computed attribute names,
   ``exec``...: ``swe_env.patch_reach``) is ``rejected`` before anything runs, each line named in
   ``findings``.  Then the graded tests (the new release's) are laid in.
3. FAIL_TO_PASS and PASS_TO_PASS run in a fresh container of the task image through
   ``execution.container.run_plan``: a trusted parent starts the pytest process (one for all, or
   FAIL_TO_PASS apart with ``SEPARATE_FAIL_TO_PASS``) with a module of canary tests under random
   names and mutation twins of each FAIL_TO_PASS test in its own file, then runs FAIL_TO_PASS and
   their twins again in a last process that is not pytest (the second verdict), and receives
   every outcome as it happens over a MAC'd, ratcheting record channel; an audit hook, identity
   and outcome checks, the canaries, the twins and a disagreement of the two verdicts flag forging.
   Only a test's own "passed" counts: skipped, errored and
   missing tests do not; a process that exits before its ``done`` record leaves its tests missing
   (status ``error``); any flag is ``tampered`` with the evidence in ``findings``; past
   ``timeout_s`` the container is killed (``timeout``).  Containers are always removed;
   ``ContainerCap`` bounds how many run at once in this process.

Which layer stops which attack, and what remains possible: ``execution/README.md``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandboxes.base import Limits, Mount
from swe_env.patch_apply import (CONFIG_NAMES, MAX_PATCH_BYTES, PatchRejected, ReachRefused,  # noqa: F401 (API)
                                  apply_patch, lay_graded_tests, patched_copy, restore_tests)
from swe_env.tasks import SweTask, agent_repo, ensure_image, task_repo

STATUSES = ("resolved", "unresolved", "empty_patch", "patch_failed", "rejected", "timeout", "error", "tampered")
OUTCOMES = ("passed", "failed", "error", "skipped", "missing")
RUNNER = Path(__file__).with_name("test_runner.py")
GRADER_DIR = "/grader"
CONTAINER_REPO = "/repo"
SEPARATE_FAIL_TO_PASS = False
"""Run FAIL_TO_PASS in a pytest process of its own.  Off: a second pytest start-up and collection made a
grade cost 2.6x the old grader's on 2 loaded cores (``bench/bench_swe.py --compare-before``), over the 2x
budget; the channel, audit hook, identity checks and canaries do not depend on it."""


@dataclass
class GradeResult:
    """The trusted verdict on one patch."""

    status: str
    """"resolved" | "unresolved" | "empty_patch" | "patch_failed" | "rejected" | "timeout" | "error" | "tampered"."""
    resolved: bool
    tests: dict[str, str] = field(default_factory=dict)
    """Node id -> "passed" | "failed" | "error" | "skipped" | "missing"."""
    touched_tests: list[str] = field(default_factory=list)
    """Test and test-configuration files the patch tried to change (restored before running)."""
    duration_s: float = 0.0
    detail: str = ""
    findings: list[str] = field(default_factory=list)
    """Tampering evidence (audit hook, identity checks, channel, canaries, twins), or for ``rejected`` each line of
    the patch that reaches into the interpreter (``path:line: why``); empty otherwise."""
    second_verdict: dict[str, str] = field(default_factory=dict)
    """FAIL_TO_PASS test -> its outcome in a fresh process without pytest, or "unverifiable" (execution/README.md)."""
    arguments_hidden: bool | None = None
    """True when the kernel hid every runner's arguments (the twins' values, the nodes' order) from the code under
    test (landlock: ``inbox/grader_sight.hide``); False when a runner said it could not (a kernel without landlock:
    the twins' values were readable, so the twins are weaker evidence) or said nothing; None when nothing ran."""

    def to_info(self) -> dict:
        """A JSON-able dict for the archive's ``verifier_info`` column."""
        return asdict(self)


class ContainerCap:
    """Process-wide cap on concurrent task containers: ``with ContainerCap.slot(): ...``.

    The limit starts at ``META_AGENT_SWE_CONTAINERS`` (default 2) and can be changed with
    ``ContainerCap.set_limit(n)``; it bounds the threads of one process, not other processes.
    """

    _limit = max(1, int(os.environ.get("META_AGENT_SWE_CONTAINERS", "2")))
    _active = 0
    _cond = threading.Condition()

    @classmethod
    def set_limit(cls, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"ContainerCap limit must be at least 1, got {limit}")
        with cls._cond:
            cls._limit = limit
            cls._cond.notify_all()

    @classmethod
    def active(cls) -> int:
        return cls._active

    @classmethod
    @contextmanager
    def slot(cls) -> Iterator[None]:
        with cls._cond:
            cls._cond.wait_for(lambda: cls._active < cls._limit)
            cls._active += 1
        try:
            yield
        finally:
            with cls._cond:
                cls._active -= 1
                cls._cond.notify_all()


# -- running tests ------------------------------------------------------------------------------

@dataclass
class TestRun:
    """What one container run of the tests produced (trusted: streamed through the parent, parsed on the host)."""

    outcomes: dict[str, str]
    """Each requested node id -> one of OUTCOMES."""
    reported: dict[str, str]
    """Every node id the records named (a test file as argument reports all its tests), canaries excluded."""
    ok: bool
    """Every run finished, sent its ``done`` record, and nothing was flagged."""
    timed_out: bool
    duration_s: float
    detail: str
    tampered: bool = False
    """The audit hook, the identity checks, the channel or a canary caught the run forging or preparing to."""
    findings: list[str] = field(default_factory=list)
    """Each piece of tampering evidence, one line each (empty unless ``tampered``)."""
    second: dict[str, str] = field(default_factory=dict)
    """Deciding test -> its outcome in the fresh process without pytest, or "unverifiable"."""
    hidden: bool = False
    """Every runner said the kernel hid its arguments from the code under test (``GradeResult.arguments_hidden``)."""


def run_tests(image: str, repo: Path, node_ids: list[str], *, timeout_s: float = 120.0,
              isolate: tuple[str, ...] = (), deciding: tuple[str, ...] = (), old: Path | None = None) -> TestRun:
    """Run ``node_ids`` of ``repo`` (host folder, mounted read-only) in a fresh container of ``image``.

    The nodes in ``isolate`` (FAIL_TO_PASS when grading) run in a pytest process of their own, apart
    from the rest: nothing a PASS_TO_PASS test leaves in the process can reach them.  Every process also
    runs a fresh module of canary tests laid into a copy of the repo.  The ``deciding`` tests (FAIL_TO_PASS
    when grading) get mutation twins in their own files (``execution.twins.make_twins``), and run
    again, twins included, in a last process without pytest (``execution.second_verdict``).  ``old`` is the repo
    as the policy saw it: the twins change statements its test files do not hold.
    """
    from execution.canaries import make_canaries
    from execution.twins import Twins, make_twins
    from execution.container import Plan, run_plan
    from execution.second_verdict import plain_tests
    from swe_env.task_image import SITE

    canary = make_canaries()
    twins = make_twins(repo, list(deciding), [n for n in node_ids if n not in deciding], old=old) if deciding \
        else Twins({}, ())
    run_id = twins.run_id  # the real deciding tests run under drawn names too: the records name them so
    isolated = [run_id(node) for node in node_ids if node in isolate]
    shared = [run_id(node) for node in node_ids if node not in isolate]
    groups = [group for group in (shared, isolated) if group]
    with tempfile.TemporaryDirectory(prefix="swe-grade-") as tmp:
        files, runs = {}, []
        tree = Path(tmp) / "repo"
        shutil.copytree(repo, tree, symlinks=True)
        (tree / canary.filename).write_text(canary.text)
        for rel, text in twins.files.items():
            (tree / rel).write_text(text)
        for index, group in enumerate(groups):
            extra = [t.node for t in twins.twins if run_id(t.of) in group]
            files[f"args-{index}.json"] = json.dumps({"repo": CONTAINER_REPO, "site": SITE, "bindings": twins.bindings,
                                                      "node_ids": [*in_file_order([*group, *extra], twins.files),
                                                                   canary.filename]})
            runs.append(["python3", "-I", "-B", f"{GRADER_DIR}/test_runner.py", f"{GRADER_DIR}/args-{index}.json"])
        copies = [t.node for t in twins.twins if t.of in deciding]  # a deciding test's matching copies as well
        plain, unverifiable = plain_tests(tree, in_file_order([*map(run_id, deciding), *copies], twins.files)) \
            if deciding else ([], [])
        if plain:
            files["plain.json"] = json.dumps({"repo": CONTAINER_REPO, "site": SITE, "bindings": twins.bindings,
                                              "tests": plain})
            runs.append(["python3", "-I", "-B", f"{GRADER_DIR}/grader_plain.py", f"{GRADER_DIR}/plain.json"])
        with ContainerCap.slot():
            result = run_plan(image, Plan(runs=runs, run_timeout_s=timeout_s), mounts=[Mount(tree, CONTAINER_REPO)],
                              inbox=[RUNNER], files=files,
                              limits=Limits(timeout_s=timeout_s, memory_mb=1024, pids=64, tmpfs_mb=128,
                                            output_total_mb=16))
    run = _judge_records(result, [run_id(n) for n in node_ids], groups, canary, twins,
                         plain_run=len(runs) - 1 if plain else None, plain_nodes=[test["node"] for test in plain])
    back = {drawn: node for node, drawn in twins.renamed.items()}
    run.outcomes = {back.get(node, node): outcome for node, outcome in run.outcomes.items()}
    run.reported = {back.get(node, node): outcome for node, outcome in run.reported.items()}
    for drawn, node in back.items():  # the record names each test as the task does
        run.findings = [finding.replace(drawn, node) for finding in run.findings]
        run.detail = run.detail.replace(drawn, node)
    run.second = {node: run.second.get(run_id(node), "unverifiable") for node in deciding}  # twins stay out
    return run


def in_file_order(nodes: list[str], texts: dict[str, str]) -> list[str]:
    """``nodes`` as the runners take them: the copies of a scope (a file, a class) in the order their definitions
    stand in the laid-in text (an inherited test's in its mixin's), so that neither the run's order nor its
    arguments list a real deciding test before its twins.  The rest keep their order; a scope's nodes stay
    together where its first stood."""
    first = {node.rsplit("::", 1)[0]: index for index, node in reversed(list(enumerate(nodes)))}

    def place(item: tuple[int, str]) -> tuple:
        index, node = item
        path, name = node.split("::")[0], node.split("::")[-1].split("[")[0]
        pattern = re.compile(rf"^[ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)}\b", re.M)
        found = pattern.search(texts.get(path, "")) or next(
            (m for m in (pattern.search(text) for text in texts.values()) if m), None)
        return (first[node.rsplit("::", 1)[0]], found.start() if found else -1, index)
    return [node for _, node in sorted(enumerate(nodes), key=place)]


def _judge_records(result, node_ids: list[str], groups: list[list[str]], canary, twins=None,
                   plain_run: int | None = None, plain_nodes: list[str] = ()) -> TestRun:
    """Per-node outcomes and the tampering evidence from the parent's records."""
    from execution.second_verdict import disagreements

    findings = [f"{flag.get('layer', '?')}: {flag.get('why', '')}"[:300] for flag in result.flags]
    phases: dict[int, dict[str, dict[str, str]]] = {}
    collect_errors: dict[int, list[str]] = {}
    plain: dict[str, str] = {}
    sight: dict[int, str] = {}
    done = {r["run"]: r for r in result.records if r["k"] == "done" and isinstance(r.get("run"), int)}
    for record in result.records:
        run = record.get("run")
        if record["k"] == "plain" and run == plain_run and isinstance(record.get("node"), str):
            if record["node"] in plain:
                findings.append(f"records: {record['node']} reported twice by the second runner"[:300])
            plain[record["node"]] = str(record.get("outcome"))
            continue
        if record["k"] == "sight":
            if run in sight:
                findings.append(f"records: run {run} said twice whether its arguments were hidden"[:300])
            sight.setdefault(run, str(record.get("how")))
            continue
        if record["k"] == "collect_error" and isinstance(record.get("node"), str):
            collect_errors.setdefault(run, []).append(record["node"])
        if record["k"] != "test" or not isinstance(record.get("node"), str):
            continue
        node, when, outcome = record["node"], record.get("when"), record.get("outcome")
        seen = phases.setdefault(run, {}).setdefault(node, {})
        if when in seen or when not in ("setup", "call", "teardown") or outcome not in ("passed", "failed", "skipped"):
            findings.append(f"records: {node} reported {when}={outcome} after {seen}"[:300])
        seen.setdefault(when, outcome)
    per_run = {run: {node: _outcome(p) for node, p in nodes.items()} for run, nodes in phases.items()}
    for run, outcomes in per_run.items():
        findings += [f"canary (run {run}): {text}" for text in canary.tampering(outcomes)]
    outcomes, reported = {}, {}
    twin_nodes = set(twins.nodes) if twins else set()
    for run, group in enumerate(groups):
        got = per_run.get(run, {})
        broken = {node.split("::")[0] for node in collect_errors.get(run, [])}
        for node in group:
            outcomes[node] = got.get(node, "error" if node.split("::")[0] in broken else "missing")
        reported.update({node: value for node, value in got.items() if node not in canary.nodes and
                         node not in twin_nodes})
    for node in plain_nodes if plain_run in done else ():  # a finished second runner that never reported a test
        plain.setdefault(node, "missing")
    if twins:
        findings += twins.tampering({node: o for got in per_run.values() for node, o in got.items()})
        findings += twins.tampering(plain, " (second verdict)")
    findings += disagreements(outcomes, plain)
    runs = len(groups) + (plain_run is not None)
    incomplete = [run for run in range(runs) if run not in done]
    # A must-pass canary that did not pass in a finished run without collection errors means the run's
    # view cannot be used (with collection errors, pytest stops before running anything: that is the patch's doing).
    broken_runs = [run for run in range(len(groups)) if run not in incomplete and not collect_errors.get(run)
                   and canary.not_passing(per_run.get(run, {}))]
    detail = "; ".join(f"run {run}: pytest exit status {done[run].get('exit')}" for run in sorted(done))
    if any(collect_errors.values()):
        detail += f"; collection errors in {sorted({n for v in collect_errors.values() for n in v})[:5]}"
    if incomplete:
        tail = (result.sandbox.stderr or "").strip()[-400:]
        detail += f"; run(s) {incomplete} ended without their done record ({result.sandbox.reason or 'exit 0'}); " \
                  f"log tail: {tail}"
    if broken_runs:
        detail += f"; must-pass canaries did not pass in run(s) {broken_runs}: the runs' outcomes are not usable"
    if result.problems:
        detail += f"; stream problems: {result.problems[:3]}"
    hidden = runs > 0 and all(sight.get(run) == "landlock" for run in range(runs))
    if not hidden:
        detail += f"; the runners' arguments were not hidden by the kernel ({sight}): the twins' values were readable"
    tampered = bool(findings)
    if tampered:
        detail = f"tampered: {findings[:3]}; {detail}"
    ok = not (tampered or incomplete or broken_runs or result.problems or result.timed_out or not result.complete)
    return TestRun(outcomes, reported, ok, result.timed_out, result.sandbox.duration_s, detail.strip("; "),
                   tampered=tampered, findings=_kept(findings), second=plain, hidden=hidden)


def _kept(findings: list[str], most: int = 20, per_layer: int = 8) -> list[str]:
    """The first ``most`` findings, at most ``per_layer`` of one layer (the text before its first ":") while others
    wait: seven copies of each deciding test can give the outcome check dozens of lines, which hid the twins'."""
    layers: dict[str, int] = {}
    kept, rest = [], []
    for finding in findings:
        layer = finding.split(":", 1)[0].split(" (")[0]
        layers[layer] = layers.get(layer, 0) + 1
        (kept if layers[layer] <= per_layer else rest).append(finding)
    return (kept + rest)[:most]


def _outcome(phases: dict[str, str]) -> str:
    """A test's own outcome from its setup, call and teardown records."""
    setup, call, teardown = phases.get("setup"), phases.get("call"), phases.get("teardown")
    if setup == "failed":
        return "error"
    if setup == "skipped":
        return "skipped"
    if setup != "passed" or call is None:
        return "error" if setup == "passed" else "missing"
    if teardown == "failed":
        return "error"
    return call


# -- grading ------------------------------------------------------------------------------------

def grade(task: SweTask, patch: str, *, timeout_s: float = 120.0, reach_check: bool = True) -> GradeResult:
    """Apply ``patch`` to a clean buggy repo and run FAIL_TO_PASS and PASS_TO_PASS; never raises on bad patches.

    ``reach_check=False`` skips the static refusal of reflective reach: only for tests of the layers behind it.
    """
    started = time.monotonic()
    if not isinstance(patch, str) or not patch.strip():
        return GradeResult("empty_patch", False, detail="the patch is empty")
    nodes = list(dict.fromkeys([*task.fail_to_pass, *task.pass_to_pass]))
    with tempfile.TemporaryDirectory(prefix="swe-patched-") as tmp:
        try:
            touched = patched_copy(task_repo(task), task.test_files, patch, Path(tmp) / "repo", base=agent_repo(task),
                                   refuse_reach=reach_check)
        except ReachRefused as exc:  # nothing of the patch ran: verified 0, with each line named
            return GradeResult("rejected", False, duration_s=time.monotonic() - started, detail=str(exc)[:2000],
                               findings=exc.problems[:20])
        except (PatchRejected, OSError) as exc:
            return GradeResult("patch_failed", False, duration_s=time.monotonic() - started, detail=str(exc))
        ensure_image(task, log=lambda _: None)  # a no-op unless the image was removed since the check
        isolate = task.fail_to_pass if SEPARATE_FAIL_TO_PASS else ()
        run = run_tests(task.image, Path(tmp) / "repo", nodes, timeout_s=timeout_s, isolate=isolate,
                        deciding=task.fail_to_pass, old=agent_repo(task))
    resolved = run.ok and all(run.outcomes[node] == "passed" for node in nodes)
    if run.tampered:
        status = "tampered"  # evidence of forging outranks everything else the run showed
    elif run.timed_out:
        status = "timeout"
    elif not run.ok:
        status = "error"  # no usable report: a crash, an early exit, a forged or broken report file
    else:
        status = "resolved" if resolved else "unresolved"
    failing = [node for node in nodes if run.outcomes[node] != "passed"]
    detail = run.detail if not failing else f"{len(failing)} test(s) not passed, e.g. {failing[:3]}; {run.detail}"
    return GradeResult(status, resolved, run.outcomes, touched, time.monotonic() - started, detail[:2000],
                       findings=run.findings, second_verdict=run.second, arguments_hidden=run.hidden)
