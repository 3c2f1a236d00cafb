"""The checked-task builder: a spec becomes a task image and a proof that the task is sound.

    python -m meta_agent tasks check swe_env/specs/sqlparse-0.5.5-begin-transaction.yaml
    python -m meta_agent tasks build --domain swe        # every shipped spec; idempotent

``check_spec`` downloads both sdists with pip (host cache), lays out the buggy repo (old source +
the new release's test files), builds the task image offline, and runs the test files in fresh
task containers: once to collect every test (on the fixed tree: a new test module may not even
import before the fix), three times on the buggy repo and three times with the gold patch
applied through the grader's own path.  A spec is *checked* when every FAIL_TO_PASS fails (or
errors, a module that does not import included) in all three runs before and passes in all
three after, and no
test changes outcome between runs of the same side; PASS_TO_PASS is every other test that passed
in all six.  Otherwise it is *refused* and the record carries the evidence.  Records are cached
under ``cache_root()/checks``, keyed by the spec's content and the image recipe, so a second
check of an unchanged spec costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from swe_env.grade import RUNNER, PatchRejected, patched_copy, run_tests
from swe_env.sdist import BuildError, Log, cache_root, lay_out
from swe_env.spec import Spec, SpecError
from swe_env.swebench import imported_dir, read_instances, spec_from_instance
from swe_env.task_image import build_task_image, image_key, image_tag

RUNS = 3
CHECK_REVISION = 2
"""Bump when the check's rules change, so old records are not reused."""


@dataclass
class CheckRecord:
    """The evidence of one check, as cached and printed."""

    spec_id: str
    status: str
    """"checked" | "refused"."""
    reason: str
    image: str
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    before: dict[str, list[str]] = field(default_factory=dict)
    """Node id -> its outcome in each run on the buggy repo."""
    after: dict[str, list[str]] = field(default_factory=dict)
    """Node id -> its outcome in each run with the gold patch."""
    timings: dict[str, float] = field(default_factory=dict)
    unlisted_flips: list[str] = field(default_factory=list)
    """Tests that fail in every run before and pass in every run after but are not in the spec's
    FAIL_TO_PASS (``tasks check --add-flips`` adds them); not graded until listed."""

    @property
    def checked(self) -> bool:
        return self.status == "checked"


def record_path(spec: Spec) -> Path:
    """Keyed by the spec's content, the image recipe, the check's rules and the in-container code (runner, parent)."""
    from execution.container import INBOX

    code = b"".join(path.read_bytes() for path in [RUNNER, *sorted(INBOX.glob("grader_*.py"))])
    runner = hashlib.sha256(code + str(CHECK_REVISION).encode()).hexdigest()[:8]
    return cache_root() / "checks" / f"{spec.id}-{spec.content_hash()}-{image_key(spec)}-{runner}.json"


def cached_record(spec: Spec) -> CheckRecord | None:
    """The cached check of this exact spec and image recipe, if any."""
    path = record_path(spec)
    if not path.is_file():
        return None
    try:
        return CheckRecord(**json.loads(path.read_text()))
    except (ValueError, TypeError):
        return None  # a torn or old-format record: check again


def check_spec(spec: Spec, *, log: Log = print, force: bool = False, timeout_s: float = 300.0) -> CheckRecord:
    """Check ``spec`` (or return its cached record); never raises for a refused spec."""
    cached = None if force else cached_record(spec)
    if cached is not None:
        return cached
    record = CheckRecord(spec.id, "refused", "", image_tag(spec))
    started = time.monotonic()
    try:
        layout = lay_out(spec, image_key(spec), log=log)
        record.timings["download_layout_s"] = time.monotonic() - started
        mark = time.monotonic()
        build_task_image(spec, layout, log=log)
        record.timings["image_s"] = time.monotonic() - mark
        _run_check(spec, layout.repo, layout.gold_patch.read_text(), record, log, timeout_s)
    except BuildError as exc:
        record.reason = str(exc)
    record.timings["total_s"] = time.monotonic() - started
    if not (record.checked or record.before):
        return record  # refused before any test ran (download, layout, image): nothing worth caching
    path = record_path(spec)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".part", delete=False) as part:
        part.write(json.dumps(asdict(record), indent=1))
    os.replace(part.name, path)  # atomic: a reader sees the old record or the new, never half of one
    return record


def _run_check(spec: Spec, repo: Path, gold: str, record: CheckRecord, log: Log, timeout_s: float) -> None:
    image = record.image
    with tempfile.TemporaryDirectory(prefix="swe-gold-") as tmp:
        fixed = Path(tmp) / "repo"
        try:
            touched = patched_copy(repo, spec.test_files, gold, fixed)
        except PatchRejected as exc:
            raise BuildError(f"{spec.id}: the gold patch does not apply to the buggy repo: {exc}") from exc
        if touched:
            raise BuildError(f"{spec.id}: the gold patch touches test files {touched}; list only source files")
        # Collect on the fixed tree: a new test module may not even import before the fix.
        mark = time.monotonic()
        log(f"{spec.id}: collecting the tests of {list(spec.test_files)}")
        collected = run_tests(image, fixed, list(spec.test_files), timeout_s=timeout_s)
        if not collected.ok or not collected.reported:
            raise BuildError(f"{spec.id}: collecting the tests with the gold patch failed: {collected.detail}")
        nodes = sorted(collected.reported)
        record.timings["collect_s"] = time.monotonic() - mark
        for side, tree in (("before", repo), ("after", fixed)):
            outcomes: dict[str, list[str]] = {node: [] for node in nodes}
            for run in range(RUNS):
                mark = time.monotonic()
                log(f"{spec.id}: {side} run {run + 1}/{RUNS} ({len(nodes)} tests)")
                result = run_tests(image, tree, nodes, timeout_s=timeout_s)
                record.timings[f"{side}_{run + 1}_s"] = time.monotonic() - mark
                if not result.ok:
                    raise BuildError(f"{spec.id}: {side} run {run + 1} gave no usable report: {result.detail}")
                for node in nodes:
                    outcomes[node].append(result.outcomes[node])
            setattr(record, side, outcomes)
    _judge(spec, nodes, record)


def _judge(spec: Spec, nodes: list[str], record: CheckRecord) -> None:
    before, after = record.before, record.after
    flaky = [n for n in nodes if len(set(before[n])) > 1 or len(set(after[n])) > 1]
    if flaky:
        raise BuildError(f"{spec.id}: flaky tests (outcome differs between runs): "
                         + "; ".join(f"{n} before={before[n]} after={after[n]}" for n in flaky[:10]))
    problems = []
    for node in spec.fail_to_pass:
        if node not in before:
            problems.append(f"{node} is not a test the files collect")
        elif before[node][0] not in ("failed", "error"):
            problems.append(f"{node} does not fail before the gold change (it is {before[node][0]!r})")
        elif after[node][0] != "passed":
            problems.append(f"{node} does not pass with the gold change (it is {after[node][0]!r})")
    record.unlisted_flips = [n for n in nodes if n not in spec.fail_to_pass
                             and before[n][0] in ("failed", "error") and after[n][0] == "passed"]
    if problems:
        raise BuildError(f"{spec.id}: FAIL_TO_PASS is wrong: " + "; ".join(problems))
    record.fail_to_pass = list(spec.fail_to_pass)
    record.pass_to_pass = [n for n in nodes if n not in spec.fail_to_pass
                           and before[n][0] == "passed" and after[n][0] == "passed"]
    record.status, record.reason = "checked", (
        f"{len(record.fail_to_pass)} FAIL_TO_PASS fail before and pass after; "
        f"{len(record.pass_to_pass)} PASS_TO_PASS pass in all {2 * RUNS} runs"
        + (f"; {len(record.unlisted_flips)} more test(s) flip but are not listed" if record.unlisted_flips else ""))


def import_instances(path: Path, repo_path: Path, *, split: str = "train",
                     log: Log = print) -> list[tuple[Spec, CheckRecord]]:
    """Save each instance as a spec under ``imported_dir()`` and check it; return (spec, record) pairs."""
    if not (repo_path / ".git").exists():
        raise SpecError(f"--repo-path {repo_path} is not a git clone (no .git); clone the instances' repository")
    specs = [spec_from_instance(item, where, repo_path, split) for where, item in read_instances(path)]
    imported_dir().mkdir(parents=True, exist_ok=True)
    results = []
    for spec in specs:
        data = {k: v for k, v in spec.__dict__.items() if k != "test_requires"}
        data.update({k: list(data[k]) for k in ("source_files", "test_files", "fail_to_pass")})
        (imported_dir() / f"{spec.id}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
        results.append((spec, check_spec(spec, log=log)))
    return results
