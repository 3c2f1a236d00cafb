"""The README is read in five minutes: at most 250 lines, the two first commands exactly as CI runs the second,
no developer's absolute paths, and every relative link of the README and docs/ resolves."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_short_and_its_test_command_is_what_ci_runs() -> None:
    assert len(README.splitlines()) <= 250
    ci = next(line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("bash "))
    lines = README.splitlines()
    assert any(line.startswith(ci + " ") or line == ci for line in lines), ci
    assert any(line.startswith("bash scripts/setup.sh && .venv/bin/python -m meta_agent --domain math ")
               for line in lines)


def test_no_developer_paths_in_the_readme_or_docs() -> None:
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md",
                 ROOT / "CHANGELOG.md"]:
        text = page.read_text()
        assert not re.search(r"(?<![\w.])/(work|home|Users|root)/", text), page


def test_every_relative_link_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md",
             ROOT / "CHANGELOG.md"]
    checked = 0
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            checked += 1
            assert (page.parent / target).exists(), f"{page.relative_to(ROOT)} links to {target}, which is missing"
    assert checked >= 20
