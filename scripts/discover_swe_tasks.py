"""Find candidate SWE tasks between two releases of a pure-Python package whose sdist carries its tests.

    .venv/bin/python scripts/discover_swe_tasks.py sqlparse 0.5.4 0.5.5

Downloads both sdists into the SWE cache (pip), lists the source and test files that changed,
then runs each changed test file of the NEW release against the OLD tree and the NEW tree with
the host's pytest and prints the tests that fail before and pass after: the FAIL_TO_PASS of a
draft spec.  It runs the package's own tests on the host (as trusted as `pip install`); the
draft is only a candidate until `python -m meta_agent tasks check SPEC` checks it in Docker.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from swe_env.sdist import fetch_release, unpack  # noqa: E402


def changed_files(old: Path, new: Path) -> list[str]:
    out = []
    for path in sorted(new.rglob("*.py")):
        rel = str(path.relative_to(new))
        if not (old / rel).is_file() or not filecmp.cmp(old / rel, path, shallow=False):
            out.append(rel)
    return out


def outcomes(tree: Path, test_files: list[Path]) -> dict[str, str]:
    """Node id -> outcome of ``test_files`` run against ``tree`` (as its own rootdir)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "r.json"
        code = (
            "import json,sys,pytest\n"
            "res={}\n"
            "class P:\n"
            "    def pytest_runtest_logreport(self,report):\n"
            "        if report.when=='call' or report.failed: res[report.nodeid]=report.outcome\n"
            f"pytest.main(['-q','-p','no:cacheprovider','-o','addopts=',*sys.argv[1:]],plugins=[P()])\n"
            f"json.dump(res,open({str(report)!r},'w'))\n"
        )
        env = {"PYTHONPATH": f"{tree}:{tree}/src", "PATH": "/usr/bin"}  # a src/ layout too
        subprocess.run([sys.executable, "-c", code, *map(str, test_files)], cwd=tree,
                       capture_output=True, text=True, timeout=600, env=env)
        return json.loads(report.read_text()) if report.exists() else {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package")
    parser.add_argument("old")
    parser.add_argument("new")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = unpack(fetch_release(args.package, args.old), Path(tmp) / "old")
        new = unpack(fetch_release(args.package, args.new), Path(tmp) / "new")
        changed = changed_files(old, new)
        tests = [rel for rel in changed if "test" in rel.split("/")[0] or Path(rel).name.startswith("test_")]
        sources = [rel for rel in changed if rel not in tests and not rel.startswith(("docs/", "setup.py"))]
        print(f"changed sources: {sources}\nchanged tests:   {tests}")
        if not tests:
            print("no changed test file: no task here")
            return 1
        hybrid = Path(tmp) / "hybrid"
        subprocess.run(["cp", "-r", str(old), str(hybrid)], check=True)
        for rel in tests:
            (hybrid / rel).parent.mkdir(parents=True, exist_ok=True)
            (hybrid / rel).write_bytes((new / rel).read_bytes())
        before = outcomes(hybrid, [Path(rel) for rel in tests])
        after = outcomes(new, [Path(rel) for rel in tests])
    f2p = sorted(n for n, o in after.items() if o == "passed" and before.get(n) != "passed")
    broken = sorted(n for n, o in before.items() if o == "passed" and after.get(n) != "passed")
    print(f"{len(before)} tests before, {len(after)} after")
    print("FAIL_TO_PASS candidates:\n  " + "\n  ".join(f2p) if f2p else "no FAIL_TO_PASS candidate")
    if broken:
        print("pass before, not after (check these):\n  " + "\n  ".join(broken))
    return 0 if f2p else 1


if __name__ == "__main__":
    sys.exit(main())
