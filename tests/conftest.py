"""Shared pytest fixtures."""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from sandboxes.base import SandboxUnavailable
from sandboxes.docker import DockerSandbox, connect_engine
from sandboxes.image import build_image


# A bench that a test runs appends its record here, never to bench/results/: a record there is quoted by the pages'
# tables (bench/tables.py --check), so one left by the suite makes the next clean checkout's tables out of step.
os.environ.setdefault("BENCH_RECORDS_DIR", tempfile.mkdtemp(prefix="bench-records-"))


# Modules that take minutes (CI durations at e729c70), handed out first under xdist so that no worker is left
# running a long module alone at the end. Order only: every module still runs with its own fixtures.
HEAVY_FIRST = ("test_swe_", "test_crash_resume", "test_loop", "test_verl_suite", "test_compare_arms",
               "test_repair_bench", "test_code_domain", "test_local_backend", "test_cli_commands")


@contextlib.contextmanager
def _locked(path: Path):
    """Hold an exclusive lock on ``path`` (created if missing) across processes."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's folder, the same for every xdist worker (each worker's basetemp is one level below it)."""
    base = tmp_path_factory.getbasetemp()
    # a pytest that a worker's test starts (the verl venv's) inherits PYTEST_XDIST_WORKER but has its own basetemp
    return base.parent if base.name == os.environ.get("PYTEST_XDIST_WORKER") else base


@functools.lru_cache(maxsize=None)  # the scheduler asks once per test; read each module once
def _group_of(module: Path) -> str:
    """The xdist work unit a test module runs in: its own file, as ``--dist loadfile`` does, except four groups.

    SWE modules (those naming ``swe_cache``) share one: they check and build the same tasks, and one worker
    doing that in order reuses each check, where two at once would both run it. The twin readings (modules
    importing ``tests/twin_draws.py``) share one, and so do the modules reading the session's demo run
    (``tests/review_run.py``): each is built once per worker that needs it (the draws ~70 s of CPU, the demo a
    real run with two Docker backtests), so spread over both workers they were built twice. Modules that start
    a local Ray cluster (or run the verl venv's Ray tests) share one too: two clusters at once compete for the
    same cores, shared memory and the dashboard's port.
    """
    text = module.read_text(errors="replace")
    if "swe_cache" in text:
        return "swe"
    if re.search(r"^from tests\.twin_draws import", text, re.M):
        return "twins"
    if re.search(r"^from review_run import .*\bdemo_run\b", text, re.M):
        return "demo"
    if re.search(r"\bray\.init\(", text) or module.stem == "test_verl_suite":  # it runs the verl venv's Ray tests
        return "ray"
    return str(module)


class _ModuleGroups:
    """xdist plugin: ``--dist loadfile`` with the groups of ``_group_of``.

    (xdist's own ``loadgroup`` does not group under pytest 9: it renames ``item._nodeid``, which pytest 9
    no longer reads.)
    """

    @staticmethod
    def pytest_xdist_make_scheduler(config: pytest.Config, log):
        if config.getoption("dist", "no") != "loadfile":
            return None
        from xdist.scheduler import LoadFileScheduling

        class ModuleGroupScheduling(LoadFileScheduling):
            def _split_scope(self, nodeid: str) -> str:
                return _group_of(Path(config.rootpath, nodeid.split("::", 1)[0]))

        config.option.loadscopereorder = False  # hand out work units in collection order (HEAVY_FIRST)
        return ModuleGroupScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Register the xdist scheduler where xdist is installed (the verl venv's inner pytest runs without it)."""
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_ModuleGroups(), "meta-agent-module-groups")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker, put the heavy modules first (the controller hands out work in this order)."""
    if not hasattr(config, "workerinput"):
        return

    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(HEAVY_FIRST) if item.path.stem.startswith(prefix)), len(HEAVY_FIRST))

    items.sort(key=rank)  # stable: collection order within each rank


@pytest.fixture
def ctrl_c_works():
    """SIGINT raises KeyboardInterrupt here and in the controllers this test starts, as in a terminal.

    A suite started in the background by a non-interactive shell (``bash -c 'pytest &'``) inherits SIGINT
    ignored, and so would every controller it spawns; a handler (unlike "ignored") is reset on exec.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def docker_sandbox(tmp_path_factory) -> DockerSandbox:
    """A DockerSandbox on the default image, built offline first if it is missing.

    Without a Docker engine (or without what the offline build needs) the tests
    that use it are skipped, with the reason; under CI (env ``CI`` set) they fail.
    """
    try:
        client = connect_engine()
        with _locked(shared_dir(tmp_path_factory) / "sandbox-image.lock"):  # xdist workers build it once
            build_image(client)
        return DockerSandbox(client=client)
    except (SandboxUnavailable, RuntimeError) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the Docker sandbox is required: {exc}", pytrace=False)
        pytest.skip(f"Docker sandbox unavailable: {exc}")


@pytest.fixture(autouse=True)
def _own_skills(tmp_path, monkeypatch):
    """Each test its own skills library: a user's saved skills never change what a test sees."""
    monkeypatch.setenv("META_AGENT_SKILLS", str(tmp_path / "skills-library"))


@pytest.fixture(scope="session")
def swe_cache(tmp_path_factory):
    """One SWE task cache (sdists, laid-out repos, check records) per test session, in a tmp folder.

    It starts as a copy of the user's cache (``swe_env.sdist.cache_root``), which ``scripts/setup.sh`` fills
    by building and checking every shipped task (``python -m meta_agent tasks build --domain swe``). A check
    record is keyed by the spec's content, the image recipe and the check's own code (``swe_env.build.
    record_path``), so a copied record is the check this code would make; copying it spares every test
    session the shipped tasks' downloads and checks (250-470 s of one worker). The checks themselves still
    run here: ``test_swe_tasks`` checks a shipped spec with ``force=True`` and specs made in the tests, and
    ``test_swe_spec_checks`` checks new specs through the CLI. Nothing is written back to the user's cache.

    Under xdist every worker uses the same folder (its writes are renames into place, safe across processes),
    so no worker downloads and checks the tasks again. Task images are content-addressed in the Docker
    engine, so a session reuses those built before.
    """
    from swe_env.sdist import cache_root

    path = shared_dir(tmp_path_factory) / "swe-cache"
    with _locked(shared_dir(tmp_path_factory) / "swe-cache.lock"):  # xdist workers copy it once
        if not path.exists():
            staged = path.with_name("swe-cache.copying")
            shutil.rmtree(staged, ignore_errors=True)
            if cache_root().is_dir():
                shutil.copytree(cache_root(), staged, symlinks=True)
            else:
                staged.mkdir()
            staged.rename(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("META_AGENT_SWE_CACHE", str(path))
        yield path


@pytest.fixture(scope="module")
def module_dir(request, tmp_path_factory) -> Path:
    """A folder shared by one test module, deleted when the module's tests all passed.

    Module fixtures that train save the 135M policy and its optimizer state (about 1.6 GB a round);
    pytest keeps factory folders until three later sessions have run, which filled the CI disk.
    A module with a failure keeps its folder to look at.
    """
    path = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    failed_before = request.session.testsfailed
    yield path
    if request.session.testsfailed == failed_before:
        shutil.rmtree(path, ignore_errors=True)
