"""Specs checked against each other and from anywhere: split overlaps, unlisted flips, specs outside swe_env/specs/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from swe_env.cross_check import refuse_overlaps
from swe_env.spec import SPECS_DIR, SpecError, load_spec, parse_spec

REPO = Path(__file__).resolve().parents[1]
TASK_ID = "sqlparse-0.5.5-begin-transaction"


def spec_data(**changes) -> dict:
    return yaml.safe_load((SPECS_DIR / f"{TASK_ID}.yaml").read_text()) | changes


def tasks_cli(*args: str, env_cache: Path) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "meta_agent", "tasks", *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, "META_AGENT_SWE_CACHE": str(env_cache)}, timeout=1800)


@pytest.mark.parametrize("changes, why", [
    ({}, "the same release pair sqlparse 0.5.4 -> 0.5.5"),
    ({"old_version": "0.5.3"}, "overlapping release ranges of sqlparse"),
])
def test_a_heldout_spec_overlapping_a_train_spec_is_refused_naming_both(changes, why):
    train = load_spec(SPECS_DIR / f"{TASK_ID}.yaml")
    heldout = parse_spec(spec_data(id="sqlparse-leak", split="heldout", **changes), "leak.yaml")
    with pytest.raises(SpecError, match=f"sqlparse-leak \\(heldout\\) and {TASK_ID} \\(train\\) share {why}"):
        refuse_overlaps([heldout, train], "specs")
    refuse_overlaps([parse_spec(spec_data(id="sqlparse-same-split", **changes), "x.yaml"), train], "specs")  # one split


def test_releases_that_touch_but_do_not_overlap_are_accepted():
    # parse 1.22.2 -> 1.22.3 (train) and 1.22.3 -> 1.22.4 (held out) are shipped side by side.
    from swe_env.cross_check import shipped_specs

    assert {s.split for s in shipped_specs() if s.package == "parse" and s.new_version in ("1.22.3", "1.22.4")} == \
        {"train", "heldout"}


def test_tasks_check_refuses_an_overlapping_spec_from_outside(tmp_path, swe_cache):
    path = tmp_path / "leak.yaml"
    path.write_text(yaml.safe_dump(spec_data(id="sqlparse-leak", split="heldout")))
    proc = tasks_cli("check", str(path), env_cache=swe_cache)
    assert proc.returncode == 2
    assert f"sqlparse-leak (heldout) and {TASK_ID} (train) share the same release pair" in proc.stderr


@pytest.mark.docker
def test_unlisted_flips_are_reported_and_a_spec_from_outside_is_graded(tmp_path, swe_cache, docker_sandbox):
    from swe_env.checked import load_task
    from swe_env.grade import grade
    from swe_env.tasks import gold_patch

    full = spec_data()["fail_to_pass"]
    assert len(full) == 2
    path = tmp_path / "copy.yaml"
    path.write_text(yaml.safe_dump(spec_data(id="sqlparse-copy", fail_to_pass=full[:1])))
    proc = tasks_cli("check", str(path), "--add-flips", env_cache=swe_cache)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"unlisted: 1 test(s) fail before and pass after but are not in fail_to_pass: {full[1:]}" in proc.stdout
    assert yaml.safe_load(path.read_text())["fail_to_pass"] == full
    assert "it can be graded on this machine now" in proc.stdout

    task = load_task("sqlparse-copy")  # checked from outside swe_env/specs/, found by id
    assert task.fail_to_pass == tuple(full[:1])
    assert grade(task, gold_patch(task)).status == "resolved"
