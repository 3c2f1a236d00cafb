"""A backend declares its own options: adding one is its module plus one registry line.

A toy backend is written into a temporary folder and registered the way a new backend is (one
``BACKENDS`` entry naming its class and its ``BackendOptions``); the real command line then offers
its options, refuses them for other backends, checks their values, hands them to the backend,
records them in ``run.json`` and refuses to change them on ``--resume``.  Nothing in ``meta_agent``
is edited for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from meta_agent.run_config import RunConfig, load_run_config

ROOT = Path(__file__).resolve().parents[1]
TOY = '''
from typing import ClassVar, Literal

from pydantic import Field

from rl_backend.base import BackendOptions, TrainingFailed


class ToyOptions(BackendOptions):
    title: ClassVar[str] = "toy training (--backend toy)"

    speed: int = Field(2, ge=1)
    """How fast the toy trains."""
    mode: Literal["calm", "wild"] = "calm"
    """The toy's mood."""


class ToyBackend:
    name = "toy"
    compute = "cpu"

    def __init__(self, base_model=None, sandbox=None, **options):
        self.options = ToyOptions(**options)

    def dry_run(self, spec):
        return f"toy round {spec.round} at speed {self.options.speed}, {self.options.mode}"

    def train_round(self, spec, progress=None):
        raise TrainingFailed(f"the toy trained nothing (speed={self.options.speed}, mode={self.options.mode})")
'''
DRIVER = '''
import sys

sys.path.insert(0, sys.argv.pop(1))
from meta_agent import registry

registry.BACKENDS["toy"] = registry.BackendEntry("toy_backend:ToyBackend", "toy_backend:ToyOptions")  # its one line
from meta_agent.cli import main

sys.exit(main())
'''


@pytest.fixture()
def toy_cli(tmp_path):
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_backend.py").write_text(textwrap.dedent(TOY))
    (plugin / "driver.py").write_text(textwrap.dedent(DRIVER))

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(plugin / "driver.py"), str(plugin), *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=600, env=os.environ | {"COLUMNS": "1000"})
    return run


def test_a_new_backends_options_reach_help_checks_and_the_backend(toy_cli, tmp_path):
    shown = toy_cli("--help")
    assert shown.returncode == 0, shown.stderr
    assert "toy training (--backend toy)" in shown.stdout
    assert "--speed SPEED" in shown.stdout and "How fast the toy trains (default 2)" in shown.stdout
    assert "--mode {calm,wild}" in shown.stdout
    assert "--gpus" in shown.stdout, "the registered backends keep theirs"

    planned = toy_cli("--backend", "toy", "--speed", "5", "--dry-run", "--run-dir", str(tmp_path / "r"))
    assert planned.returncode == 0, planned.stderr
    assert "toy round 0 at speed 5, calm" in planned.stdout

    for args, said in [(("--backend", "local", "--speed", "5"), "--speed is an option of --backend toy, not of "
                                                                 "--backend local"),
                       (("--backend", "toy", "--speed", "0"), "--speed: Input should be greater than or equal to 1"),
                       (("--backend", "toy", "--gpus", "2"), "--gpus is an option of --backend verl, not of "
                                                             "--backend toy"),
                       (("--backend", "toy", "--mode", "sleepy"), "invalid choice: 'sleepy'")]:
        refused = toy_cli(*args, "--dry-run", "--run-dir", str(tmp_path / "r"))
        assert refused.returncode == 2 and said in refused.stdout + refused.stderr, (args, refused.stdout,
                                                                                    refused.stderr)
        assert "Traceback" not in refused.stderr
    assert not (tmp_path / "r").exists()


@pytest.mark.docker
def test_a_new_backends_options_are_recorded_and_kept_on_resume(toy_cli, tmp_path):
    run_dir = tmp_path / "run"
    first = toy_cli("--backend", "toy", "--speed", "5", "--rounds", "1", "--candidates", "0", "--run-dir", str(run_dir))
    out = first.stdout + first.stderr
    assert first.returncode == 1 and "the toy trained nothing (speed=5, mode=calm)" in out, out[-3000:]
    recorded = json.loads((run_dir / "run.json").read_text())
    assert recorded["backend"] == "toy" and recorded["backend_options"] == {"speed": 5, "mode": "calm"}

    changed = toy_cli("--resume", "--run-dir", str(run_dir), "--speed", "6")
    assert changed.returncode == 2 and ("cannot change --speed (run.json has speed: 5)"
                                        in changed.stdout + changed.stderr)
    same = toy_cli("--resume", "--run-dir", str(run_dir), "--speed", "5", "--mode", "calm")
    assert same.returncode == 1 and "speed=5, mode=calm" in same.stdout + same.stderr
    assert json.loads((run_dir / "run.json").read_text()) == recorded


def test_run_json_from_before_backend_options_loads_with_them_moved(tmp_path):
    """run.json files written when verl's and the endpoint's options were top-level fields."""
    legacy = {"gpus": 1, "nodes": 1, "ray_address": None, "ray_job_address": None, "policy_api_base": None,
              "policy_model": None}
    cases = [
        ({"backend": "local"}, {}),  # the unused defaults a local run recorded are dropped
        ({"backend": "verl", "gpus": 8, "nodes": 2, "ray_address": "ray://head:10001"},
         {"gpus": 8, "nodes": 2, "ray_address": "ray://head:10001", "ray_job_address": None, "engine": "vllm",
          "save_freq": 0, "exam_device": "auto", "job_python": None}),
        ({"backend": "endpoint", "domain": "swe", "policy_api_base": "http://h/v1", "policy_model": "m"},
         {"policy_api_base": "http://h/v1", "policy_model": "m"}),
    ]
    for n, (fields, options) in enumerate(cases):
        path = tmp_path / str(n) / "run.json"
        path.parent.mkdir()
        path.write_text(json.dumps({"run_id": "old"} | legacy | fields))
        config = load_run_config(path)
        assert config.backend_options == options
        assert "gpus" not in config.to_json() and RunConfig.model_validate(config.to_json()) == config
