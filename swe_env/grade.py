"""Trusted grading of a patch against a checked task, in a fresh task container.

    result = grade(task, patch)          # never raises on a bad patch
    result.status, result.resolved, result.touched_tests

How a patch is judged (SWE-bench's rule: resolved = every FAIL_TO_PASS and every PASS_TO_PASS
passed):

1. An empty patch is ``empty_patch``.  A patch that names a path outside the repo (absolute,
   ``..``, ``.git``), creates a symlink, carries binary data, or does not ``git apply`` to a clean
   copy of the buggy repo is ``patch_failed``.
2. Every test file, every file under a test folder, every ``conftest.py`` and every pytest
   configuration file (``pytest.ini``, ``setup.cfg``, ``pyproject.toml``, ``tox.ini``) is restored
   from the original; new ones are deleted, as are new top-level modules named like a standard
   library module or a test tool.  ``touched_tests`` lists them all.
3. FAIL_TO_PASS and PASS_TO_PASS run in a fresh container of the task image: no network, user
   65534, read-only repo, memory/pids/time caps, ``swe_env/test_runner.py`` mounted read-only
   outside the repo.  It records each test's own setup/call/teardown outcome and writes them to
   ``/out/report.json`` *after* pytest returns, with a one-time token the host put in ``/out``
   and the runner deleted before any repo code ran; the host reads that file under
   ``sandboxes.untrusted`` rules and refuses a report without the token.  Only a test's own
   "passed" counts: skipped, errored and missing tests do not; an early ``exit(0)`` or
   ``os._exit(0)`` leaves no report (status ``error``); past ``timeout_s`` the container is
   killed (``timeout``).  Containers are always removed; ``ContainerCap`` bounds how many run at
   once in this process.

What stays open: code under test runs inside the pytest process, so it can read and rewrite
that process's memory — take the token from the runner's frame and forge the report, patch the
recorder, or patch pytest in ways the recorder's identity checks do not see.  The recorder
flags the monkey-patching it can detect (pytest's runner and report constructors, pluggy's hook
caller, plugins registered mid-run) and a flagged run is never resolved, but a determined patch
can still fool an in-process recorder.  The reward should be confirmed by an out-of-process check before it is trusted for
anything irreversible.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sandboxes.base import Limits, Mount
from sandboxes.untrusted import UntrustedOutputError, read_json
from swe_env.tasks import SweTask, ensure_image, task_repo

STATUSES = ("resolved", "unresolved", "empty_patch", "patch_failed", "timeout", "error")
OUTCOMES = ("passed", "failed", "error", "skipped", "missing")
CONFIG_NAMES = frozenset({"conftest.py", "pytest.ini", ".pytest.ini", "setup.cfg", "pyproject.toml", "tox.ini"})
MAX_PATCH_BYTES = 1 << 20
MAX_REPORT_BYTES = 8 << 20
RUNNER = Path(__file__).with_name("test_runner.py")
GRADER_DIR = "/grader"
CONTAINER_REPO = "/repo"
_SHADOWED = frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py"}


@dataclass
class GradeResult:
    """The trusted verdict on one patch."""

    status: str
    """"resolved" | "unresolved" | "empty_patch" | "patch_failed" | "timeout" | "error"."""
    resolved: bool
    tests: dict[str, str] = field(default_factory=dict)
    """Node id -> "passed" | "failed" | "error" | "skipped" | "missing"."""
    touched_tests: list[str] = field(default_factory=list)
    """Test and test-configuration files the patch tried to change (restored before running)."""
    duration_s: float = 0.0
    detail: str = ""

    def to_info(self) -> dict:
        """A JSON-able dict for the archive's ``verifier_info`` column."""
        return asdict(self)


class PatchRejected(ValueError):
    """The patch cannot be applied safely; the message says why."""


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


# -- patch --------------------------------------------------------------------------------------

_PATH_LINE = re.compile(r"^(?:--- |\+\+\+ |rename from |rename to |copy from |copy to )(.+?)\s*$")


def _check_patch_text(patch: str) -> None:
    if len(patch.encode()) > MAX_PATCH_BYTES:
        raise PatchRejected(f"patch is larger than {MAX_PATCH_BYTES} bytes")
    for line in patch.splitlines():
        if line.startswith(("GIT binary patch", "Binary files ")):
            raise PatchRejected("binary patches are not accepted")
        if line.startswith(("new file mode 120000", "old mode 120000", "new mode 120000", "deleted file mode 120000")):
            raise PatchRejected("patches that create or change symlinks are not accepted")
        paths = []
        if line.startswith("diff --git "):
            paths = line[len("diff --git "):].split()
        elif match := _PATH_LINE.match(line):
            paths = [match.group(1).split("\t")[0]]
        for path in paths:
            if path == "/dev/null":
                continue
            stripped = path[2:] if path[:2] in ("a/", "b/") else path
            parts = Path(stripped).parts
            if path.startswith("/") or stripped.startswith("/") or ".." in parts or ".git" in parts:
                raise PatchRejected(f"patch path {path!r} points outside the repo or into .git")


def apply_patch(repo: Path, patch: str) -> None:
    """``git apply`` ``patch`` inside ``repo`` (a plain folder); raise PatchRejected when it cannot."""
    _check_patch_text(patch)
    patch_file = repo.parent / "submitted.patch"
    patch_file.write_text(patch if patch.endswith("\n") else patch + "\n")
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent)}  # never a repo above the copy
    proc = subprocess.run(["git", "apply", "--whitespace=nowarn", "-p1", str(patch_file)],
                          cwd=repo, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise PatchRejected(f"git apply failed: {proc.stderr.strip()[-800:]}")
    for path in repo.rglob("*"):
        if path.is_symlink():
            raise PatchRejected(f"patch created a symlink {path.relative_to(repo)}")


def _protected(rel: str, test_files: tuple[str, ...], test_dirs: set[str]) -> bool:
    parts = rel.split("/")
    if rel in test_files or parts[-1] in CONFIG_NAMES:
        return True
    return any("/".join(parts[:i]) in test_dirs for i in range(1, len(parts)))


def restore_tests(original: Path, repo: Path, test_files: tuple[str, ...]) -> list[str]:
    """Put back every test and test-config file, delete new ones; return the files the patch touched."""
    # A folder of tests (tests/, pkg/testing/) is protected whole, fixtures included; a package that
    # merely holds a test module next to its source is not, or the fix itself would be reverted.
    test_dirs = {str(Path(rel).parent) for rel in test_files
                 if any(part.startswith("test") for part in Path(rel).parent.parts)}
    touched = []
    before = {str(p.relative_to(original)) for p in original.rglob("*") if p.is_file()}
    after = {str(p.relative_to(repo)) for p in repo.rglob("*") if p.is_file()}
    for rel in sorted(before | after):
        if _protected(rel, test_files, test_dirs):
            if rel not in after or rel not in before or (original / rel).read_bytes() != (repo / rel).read_bytes():
                touched.append(rel)
                if rel in before:
                    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(original / rel, repo / rel)
                else:
                    (repo / rel).unlink()
        elif rel not in before and "/" not in rel and Path(rel).stem in _SHADOWED:
            touched.append(rel)  # a new top-level json.py/pytest.py would shadow what the runner imports
            (repo / rel).unlink()
    for rel in after - before:
        top = rel.split("/")[0]
        if "/" in rel and top in _SHADOWED and (repo / top).exists() and not (original / top).exists():
            touched.append(top + "/")
            shutil.rmtree(repo / top)
    return touched


# -- running tests ------------------------------------------------------------------------------

@dataclass
class TestRun:
    """What one container run of the tests produced (trusted: parsed and checked on the host)."""

    outcomes: dict[str, str]
    """Each requested node id -> one of OUTCOMES."""
    reported: dict[str, str]
    """Every node id the report named (a test file as argument reports all its tests)."""
    ok: bool
    """A complete, untampered report came back."""
    timed_out: bool
    duration_s: float
    detail: str
    tampered: bool = False
    """The runner saw the test process monkey-patch pytest or register a plugin mid-run."""


def run_tests(image: str, repo: Path, node_ids: list[str], *, timeout_s: float = 120.0) -> TestRun:
    """Run ``node_ids`` of ``repo`` (host folder, mounted read-only) in a fresh container of ``image``."""
    from sandboxes.docker import DockerSandbox
    from swe_env.task_image import SITE

    with tempfile.TemporaryDirectory(prefix="swe-grade-") as tmp:
        grader, out = Path(tmp) / "grader", Path(tmp) / "out"
        grader.mkdir()
        Path(tmp).chmod(0o755)
        grader.chmod(0o755)
        shutil.copyfile(RUNNER, grader / "test_runner.py")
        nonce = secrets.token_hex(16)
        out.mkdir()
        (out / "nonce").write_text(nonce)
        args = {"repo": CONTAINER_REPO, "site": SITE, "report": "/out/report.json", "nonce_file": "/out/nonce",
                "node_ids": node_ids}
        (grader / "args.json").write_text(json.dumps(args))
        with ContainerCap.slot():
            result = DockerSandbox(image).run(
                ["python3", "-I", "-B", f"{GRADER_DIR}/test_runner.py"],
                mounts=[Mount(repo, CONTAINER_REPO), Mount(grader, GRADER_DIR)],
                output_dir=out,
                limits=Limits(timeout_s=timeout_s, memory_mb=1024, pids=64, tmpfs_mb=128, output_total_mb=16),
            )
        missing = {node: "missing" for node in node_ids}
        if result.timed_out:
            return TestRun(missing, {}, False, True, result.duration_s, f"timed out after {timeout_s:.0f}s")
        try:
            report = _parse_report(read_json(out / "report.json", MAX_REPORT_BYTES), nonce)
        except UntrustedOutputError as exc:
            tail = (result.stdout + result.stderr).strip()[-600:]
            return TestRun(missing, {}, False, False, result.duration_s,
                           f"no usable test report ({exc}); {result.reason or 'exit code 0'}; log tail: {tail}")
    broken_modules = set(report["collect_errors"])  # a test whose module failed to import errored
    outcomes = {node: report["outcomes"].get(node, "error" if node.split("::")[0] in broken_modules else "missing")
                for node in node_ids}
    detail = f"pytest exit status {report['exit_status']}"
    if report["collect_errors"]:
        detail += f"; collection errors in {report['collect_errors'][:5]}"
    if report["tampered"]:
        return TestRun(outcomes, report["outcomes"], False, False, result.duration_s,
                       f"test process tampered with pytest: {report['tampered']}; {detail}", tampered=True)
    return TestRun(outcomes, report["outcomes"], True, False, result.duration_s, detail)


def _parse_report(data: object, nonce: str) -> dict:
    problem = "report.json is not an object with nonce, outcomes, collect_errors, tampered and exit_status"
    if not isinstance(data, dict) or set(data) != {"nonce", "outcomes", "collect_errors", "tampered", "exit_status"}:
        raise UntrustedOutputError(problem)
    if data["nonce"] != nonce:
        raise UntrustedOutputError("report.json was not written by the grader's runner (wrong token)")
    outcomes, errors, tampered = data["outcomes"], data["collect_errors"], data["tampered"]
    if not isinstance(outcomes, dict) or not all(isinstance(k, str) and v in OUTCOMES for k, v in outcomes.items()):
        raise UntrustedOutputError(f"{problem}: bad outcomes")
    if not isinstance(errors, list) or not isinstance(tampered, list) or not isinstance(data["exit_status"], int):
        raise UntrustedOutputError(problem)
    return {"outcomes": outcomes, "collect_errors": [str(e)[:300] for e in errors][:50],
            "tampered": [str(t)[:200] for t in tampered][:20], "exit_status": data["exit_status"]}


# -- grading ------------------------------------------------------------------------------------

def patched_copy(original: Path, test_files: tuple[str, ...], patch: str, dest: Path) -> list[str]:
    """A copy of the buggy repo ``original`` at ``dest`` with ``patch`` applied and tests restored."""
    shutil.copytree(original, dest, symlinks=True)
    apply_patch(dest, patch)
    return restore_tests(original, dest, test_files)


def grade(task: SweTask, patch: str, *, timeout_s: float = 120.0) -> GradeResult:
    """Apply ``patch`` to a clean buggy repo and run FAIL_TO_PASS and PASS_TO_PASS; never raises on bad patches."""
    started = time.monotonic()
    if not isinstance(patch, str) or not patch.strip():
        return GradeResult("empty_patch", False, detail="the patch is empty")
    nodes = list(dict.fromkeys([*task.fail_to_pass, *task.pass_to_pass]))
    with tempfile.TemporaryDirectory(prefix="swe-patched-") as tmp:
        try:
            touched = patched_copy(task_repo(task), task.test_files, patch, Path(tmp) / "repo")
        except (PatchRejected, OSError) as exc:
            return GradeResult("patch_failed", False, duration_s=time.monotonic() - started, detail=str(exc))
        ensure_image(task, log=lambda _: None)  # a no-op unless the image was removed since the check
        run = run_tests(task.image, Path(tmp) / "repo", nodes, timeout_s=timeout_s)
    resolved = run.ok and all(run.outcomes[node] == "passed" for node in nodes)
    if run.timed_out:
        status = "timeout"
    elif not run.ok and not run.tampered:
        status = "error"  # no usable report: a crash, an early exit, a forged or broken report file
    else:
        status = "resolved" if resolved else "unresolved"
    failing = [node for node in nodes if run.outcomes[node] != "passed"]
    detail = run.detail if not failing else f"{len(failing)} test(s) not passed, e.g. {failing[:3]}; {run.detail}"
    return GradeResult(status, resolved, run.outcomes, touched, time.monotonic() - started, detail[:2000])
