"""The checked-task builder and the ``tasks`` CLI on real release pairs, in real task containers.

Refusals are tested with deliberately wrong specs of a real pair (sqlparse 0.5.4 -> 0.5.5) and,
for flakiness, with two hand-made sdists whose tests flip coins.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import docker
import pytest
import yaml

from swe_env.build import check_spec
from swe_env.checked import load_task
from swe_env.cross_check import shipped_specs
from swe_env.sdist import fetch_release
from swe_env.spec import SPECS_DIR, SpecError, load_spec, parse_spec
from swe_env.tasks import gold_patch, task_repo

SPEC = SPECS_DIR / "sqlparse-0.5.5-begin-transaction.yaml"
F2P = ["tests/test_split.py::test_split_begin_transaction",
       "tests/test_split.py::test_split_begin_transaction_formatted"]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", "tasks", *args],
                          capture_output=True, text=True, timeout=900)


def wrong_spec(tmp_path: Path, name: str, **changes) -> Path:
    data = yaml.safe_load(SPEC.read_text())
    data.update(changes, id=f"{data['id']}-{name}")
    path = tmp_path / f"{data['id']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_shipped_tasks_span_three_packages_and_hold_out_other_releases():
    specs = shipped_specs()
    train = [s for s in specs if s.split == "train"]
    heldout = [s for s in specs if s.split == "heldout"]
    assert len(specs) >= 8 and len({s.package for s in specs}) >= 3
    assert len(train) >= 6 and len(heldout) >= 2
    train_releases = {(s.package, s.new_version) for s in train}
    assert all((s.package, s.new_version) not in train_releases for s in heldout)


def test_spec_that_lists_pass_to_pass_is_refused_with_the_field_named(tmp_path):
    data = {**yaml.safe_load(SPEC.read_text()), "pass_to_pass": ["tests/test_split.py::test_split_semicolon"]}
    with pytest.raises(SpecError, match="pass_to_pass"):
        parse_spec(data, "hand.yaml")


def test_spec_whose_fail_to_pass_is_outside_its_test_files_is_refused():
    data = {**yaml.safe_load(SPEC.read_text()), "fail_to_pass": ["tests/test_format.py::test_x"]}
    with pytest.raises(SpecError, match="not in one of the test_files"):
        parse_spec(data, "hand.yaml")


@pytest.mark.docker
@pytest.mark.slow
def test_real_release_pair_checks_with_evidence_and_is_cached(swe_cache, docker_sandbox):
    spec = load_spec(SPEC)
    record = check_spec(spec, log=lambda _: None, force=True)  # checked here, not the record setup.sh cached
    assert record.status == "checked", record.reason
    assert all(record.before[n] == ["failed"] * 3 and record.after[n] == ["passed"] * 3 for n in F2P)
    # test_split_semicolon exercises the splitter on plain statements: it passes on both releases
    assert "tests/test_split.py::test_split_semicolon" in record.pass_to_pass
    assert not set(F2P) & set(record.pass_to_pass)
    assert check_spec(spec, log=lambda _: None) == record  # the second check is the cached record
    assert load_task(spec.id).pass_to_pass == tuple(record.pass_to_pass)


@pytest.mark.docker
def test_cli_check_prints_per_test_evidence_and_list_reports_status(swe_cache, docker_sandbox):
    checked = cli("check", str(SPEC))
    assert checked.returncode == 0, checked.stderr
    assert "checked" in checked.stdout and "meta-agent-swe-task:" in checked.stdout
    line = next(line for line in checked.stdout.splitlines() if F2P[0] in line)
    assert "failed,failed,failed" in line and "passed,passed,passed" in line
    listed = cli("list", "--domain", "swe", "--json")
    rows = {row["id"]: row for row in map(json.loads, listed.stdout.splitlines())}
    assert set(rows) == {s.id for s in shipped_specs()}
    assert rows["sqlparse-0.5.5-begin-transaction"]["status"] == "checked"
    assert {"id", "package", "split", "status"} <= set(rows["parse-1.20.2-hyphen-field-names"])


@pytest.mark.docker
@pytest.mark.slow
def test_fail_to_pass_that_passes_before_is_refused(swe_cache, docker_sandbox, tmp_path):
    path = wrong_spec(tmp_path, "f2p-passes-before", fail_to_pass=["tests/test_split.py::test_split_semicolon"])
    result = cli("check", str(path))
    assert result.returncode == 1
    assert "refused" in result.stdout and "does not fail before the gold change" in result.stdout
    assert "tests/test_split.py::test_split_semicolon" in result.stdout


@pytest.mark.docker
@pytest.mark.slow
def test_gold_change_that_fails_after_is_refused(swe_cache, docker_sandbox, tmp_path):
    # grouping.py also changed in 0.5.5, but not for BEGIN TRANSACTION: as the gold change it fixes nothing here
    path = wrong_spec(tmp_path, "gold-fails-after", source_files=["sqlparse/engine/grouping.py"])
    result = cli("check", str(path))
    assert result.returncode == 1
    assert "does not pass with the gold change" in result.stdout


@pytest.mark.docker
def test_sdist_without_the_test_files_is_refused(swe_cache, tmp_path):
    path = wrong_spec(tmp_path, "no-test-file", test_files=["tests/test_transactions.py"],
                      fail_to_pass=["tests/test_transactions.py::test_begin"])
    result = cli("check", str(path))
    assert result.returncode == 1
    assert "lacks the test files ['tests/test_transactions.py']" in result.stdout


def _sdist(folder: Path, name: str, version: str, files: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    with tarfile.open(folder / f"{name}-{version}.tar.gz", "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}-{version}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


@pytest.mark.docker
@pytest.mark.slow
def test_flaky_pass_to_pass_is_refused(swe_cache, docker_sandbox, tmp_path):
    # Twenty coin-flip tests: over three runs on each side, at least one changes outcome.
    tests = ("import os\nimport pytest\nimport coinpkg\n\n"
             "def test_answer():\n    assert coinpkg.answer() == 42\n\n"
             "@pytest.mark.parametrize('i', range(20))\n"
             "def test_coin(i):\n    assert os.urandom(1)[0] % 2\n")
    for version, answer in (("1.0", 41), ("1.1", 42)):
        _sdist(swe_cache / "sdists" / "coinpkg" / version, "coinpkg", version,
               {"coinpkg.py": f"def answer():\n    return {answer}\n", "tests/test_coin.py": tests})
    spec = tmp_path / "coin.yaml"
    spec.write_text(yaml.safe_dump({
        "id": "coinpkg-1.1-answer", "package": "coinpkg", "old_version": "1.0", "new_version": "1.1",
        "split": "train", "source_files": ["coinpkg.py"], "test_files": ["tests/test_coin.py"],
        "fail_to_pass": ["tests/test_coin.py::test_answer"], "problem_statement": "answer() should be 42.",
    }))
    result = cli("check", str(spec))
    assert result.returncode == 1
    assert "flaky tests (outcome differs between runs)" in result.stdout and "test_coin[" in result.stdout


@pytest.mark.docker
def test_new_test_module_that_cannot_import_before_the_fix_checks(swe_cache, docker_sandbox, tmp_path):
    # The new release adds new() and a test module importing it: before the fix the module errors.
    tests = "from newapi import new, old\n\n\ndef test_old():\n    assert old() == 1\n\n\n" \
            "def test_new():\n    assert new() == 2\n"
    _sdist(swe_cache / "sdists" / "newapi" / "1.0", "newapi", "1.0",
           {"newapi.py": "def old():\n    return 1\n", "tests/test_newapi.py": tests})
    _sdist(swe_cache / "sdists" / "newapi" / "1.1", "newapi", "1.1",
           {"newapi.py": "def old():\n    return 1\n\n\ndef new():\n    return 2\n",
            "tests/test_newapi.py": tests})
    spec = parse_spec({"id": "newapi-1.1-new", "package": "newapi", "old_version": "1.0", "new_version": "1.1",
                       "split": "train", "source_files": ["newapi.py"], "test_files": ["tests/test_newapi.py"],
                       "fail_to_pass": ["tests/test_newapi.py::test_new"], "problem_statement": "Add new()."},
                      "newapi spec")
    record = check_spec(spec, log=lambda _: None)
    assert record.status == "checked", record.reason
    assert record.before["tests/test_newapi.py::test_new"] == ["error"] * 3
    assert record.after["tests/test_newapi.py::test_new"] == ["passed"] * 3
    assert record.pass_to_pass == []  # test_old errored before too: it passed on one side only


def _needles(spec_path: Path) -> list[bytes]:
    """Lines only the fixed release has: gold-patch additions absent from the buggy repo, and its version line."""
    task = load_task(load_spec(spec_path).id)
    buggy = b"".join(p.read_bytes() for p in task_repo(task).rglob("*") if p.is_file())
    added = [line[1:].strip().encode() for line in gold_patch(task).splitlines()
             if line.startswith("+") and not line.startswith("+++") and len(line.strip()) > 25]
    needles = [line for line in added if line not in buggy]
    with tarfile.open(fetch_release(task.package, task.new_version)) as sdist:
        init = next(m for m in sdist.getmembers() if m.name.endswith("sqlparse/__init__.py"))
        text = sdist.extractfile(init).read()
    needles += [line.strip() for line in text.splitlines() if line.startswith(b"__version__")]
    assert len(needles) >= 3
    return needles


@pytest.mark.docker
def test_task_image_holds_no_trace_of_the_gold_change(swe_cache, docker_sandbox):
    record = check_spec(load_spec(SPEC), log=lambda _: None)
    needles = _needles(SPEC)
    client = docker.from_env()
    container = client.containers.create(record.image, ["true"])
    found, names = [], []
    try:
        with tarfile.open(fileobj=_Stream(container.export()), mode="r|") as image:
            for member in image:
                names.append(member.name)
                if member.isfile() and member.size < 4 << 20:
                    data = image.extractfile(member).read()
                    found += [(member.name, n) for n in needles if n in data]
    finally:
        container.remove(force=True)
    assert found == []
    assert any(name.startswith("repo/sqlparse/") for name in names)  # the buggy repo is there
    assert not [n for n in names if "/.git/" in f"/{n}" or ".cache/pip" in n or "sqlparse-0.5.5" in n]


class _Stream(io.RawIOBase):
    """A file object over the chunks of ``container.export()``."""

    def __init__(self, chunks) -> None:
        self._chunks, self._buffer = iter(chunks), b""

    def readable(self) -> bool:
        return True

    def readinto(self, target) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        size = min(len(target), len(self._buffer))
        target[:size], self._buffer = self._buffer[:size], self._buffer[size:]
        return size


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_AUTHOR_DATE": "2024-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2024-01-01T00:00:00Z", "PATH": "/usr/bin:/bin", "HOME": str(repo)}
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout


def _swebench_clone(root: Path) -> tuple[Path, dict]:
    """A real git repo with a bug at its base commit, and the SWE-bench instance that fixes it."""
    repo = root / "calc-repo"
    (repo / "calc").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "calc" / "__init__.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text("import calc\n\n\ndef test_zero():\n    assert calc.add(0, 0) == 0\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    base = _git(repo, "rev-parse", "HEAD").strip()
    (repo / "calc" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "tests" / "test_calc.py").write_text(
        "import calc\n\n\ndef test_zero():\n    assert calc.add(0, 0) == 0\n\n\n"
        "def test_add():\n    assert calc.add(2, 3) == 5\n")
    patch, test_patch = _git(repo, "diff", "--", "calc"), _git(repo, "diff", "--", "tests")
    _git(repo, "checkout", "-q", "--", ".")
    instance = {"instance_id": "calc__calc-1", "repo": "example/calc", "base_commit": base, "patch": patch,
                "test_patch": test_patch, "problem_statement": "add() subtracts instead of adding.",
                "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]),
                "PASS_TO_PASS": json.dumps(["tests/test_calc.py::test_zero"])}
    return repo, instance


@pytest.mark.docker
def test_swebench_instance_over_a_local_clone_imports_checks_and_grades(swe_cache, docker_sandbox, tmp_path):
    from swe_env.grade import grade

    repo, instance = _swebench_clone(tmp_path)
    instances = tmp_path / "instances.jsonl"
    instances.write_text(json.dumps(instance) + "\n")
    result = cli("import-swebench", str(instances), "--repo-path", str(repo), "--split", "heldout")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "checked   calc__calc-1" in result.stdout
    task = load_task("calc__calc-1")
    assert (task.fail_to_pass, task.pass_to_pass, task.split) == (
        ("tests/test_calc.py::test_add",), ("tests/test_calc.py::test_zero",), "heldout")
    assert "return a - b" in task_repo(task).joinpath("calc/__init__.py").read_text()
    assert grade(task, instance["patch"]).status == "resolved"


def test_malformed_swebench_file_names_the_line(swe_cache, tmp_path):
    repo, instance = _swebench_clone(tmp_path)
    instances = tmp_path / "broken.jsonl"
    instances.write_text(json.dumps(instance) + "\n{not json\n")
    result = cli("import-swebench", str(instances), "--repo-path", str(repo))
    assert result.returncode == 2
    assert f"{instances}:2: not valid JSON" in result.stderr
