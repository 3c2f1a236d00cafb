"""The README's GPU install line brings everything the verl path imports.

``test_the_verl_extra_installs_alone_and_imports_the_verl_path`` builds ``pip install ".[verl]"`` -- the first
part of the README's line; the rollout engine (``verl[vllm,fsdp]``) needs CUDA wheels -- in a fresh venv
without the local extras and imports every module the job, the reward entry, the sampler and the exam import.
It downloads and installs torch, verl-core, Ray and TRL (minutes), so it runs when ``META_AGENT_INSTALL_TEST=1``
(with ``PIP_CACHE_DIR`` shared between runs it re-installs from the cache).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VERL_PATH_MODULES = [
    "verl.trainer.main_ppo", "transfer_queue",  # the job (the V1 trainer needs TransferQueue)
    "rl_backend.verl.reward_entry", "rl_backend.verl.sampler", "rl_backend.verl.agent_loop",
    "rl_backend.verl.exam", "rl_backend.local",  # the exam shares the local backend's exam code (TRL)
    "rl_backend.verl.backend", "rl_backend.verl.validate", "meta_agent.domains.math",
    "reasoning_gym", "math_verify",  # the math domain's generator and symbolic verifier
]


def readme_install_line() -> list[str]:
    """The README's `pip install ...` line of the verl section, as argv."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## GPU training with verl"):]
    line = next(line for line in section.splitlines() if line.startswith("pip install "))
    return shlex.split(line.split("#")[0])


def test_the_readme_line_installs_the_extra_with_an_engine():
    argv = readme_install_line()
    assert argv[:3] == ["pip", "install", ".[verl]"] and re.fullmatch(r"verl\[(vllm|sglang),fsdp\]==0\.9\.1", argv[3])


def test_the_verl_extra_pins_what_the_verl_path_needs():
    text = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^verl = \[(.*?)\]$", text, re.S | re.M).group(1)
    for requirement in ("verl[verl-core]==0.9.1", "trl==1.16.0", "reasoning-gym==0.1.25", "math-verify==0.9.0"):
        assert f'"{requirement}"' in extra, requirement


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("META_AGENT_INSTALL_TEST") != "1",
                    reason="builds a fresh venv from the package index (minutes): META_AGENT_INSTALL_TEST=1")
def test_the_verl_extra_installs_alone_and_imports_the_verl_path(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "torch==2.13.0"], check=True, timeout=1800)  # the CPU wheel, as scripts/setup.sh
    argv = readme_install_line()
    subprocess.run([*pip, *argv[2:3]], check=True, cwd=ROOT, timeout=1800)  # ".[verl]": the engine needs CUDA
    code = "import importlib, sys\n" + "".join(f"importlib.import_module({m!r})\n" for m in VERL_PATH_MODULES) + \
        "import trl; assert trl.__version__ == '1.16.0', trl.__version__\n"
    done = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr[-4000:]
