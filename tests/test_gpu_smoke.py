"""``scripts/gpu_smoke.py`` runs its whole path on a CPU at tiny sizes, so the script a lent GPU runs is tested --
in an interpreter where, as on the lent machine, only torch and transformers (and the stdlib) are importable."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ABSENT_ON_THE_DEVICE = ["pydantic", "trl", "verl", "ray", "vllm", "pyarrow", "docker", "datasets",
                        "accelerate", "reasoning_gym", "math_verify", "litellm"]
SITECUSTOMIZE = """
import importlib.machinery, sys
ABSENT = set({absent!r})


class DeviceFinder(importlib.machinery.PathFinder):
    # sys.path as the lent machine sees it: these packages are not installed there

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if name.partition(".")[0] in ABSENT else super().find_spec(name, path, target)


sys.meta_path[:] = [DeviceFinder if f is importlib.machinery.PathFinder else f for f in sys.meta_path]
"""


def device_env(tmp_path: Path) -> dict:
    """This interpreter's environment with the project's stack hidden by a ``sitecustomize``."""
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE.format(absent=ABSENT_ON_THE_DEVICE))
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    return os.environ | {"PYTHONPATH": path}


def test_the_device_stand_in_hides_the_projects_stack(tmp_path):
    import importlib.util

    here = {m for m in ABSENT_ON_THE_DEVICE if importlib.util.find_spec(m)}
    assert {"pydantic", "trl", "pyarrow", "docker"} <= here  # installed in this venv (verl is in .venv-verl)
    code = ("import importlib.util, json; import torch, transformers\n"
            f"print(json.dumps([m for m in {ABSENT_ON_THE_DEVICE!r} if importlib.util.find_spec(m)]))")
    done = subprocess.run([sys.executable, "-c", code], env=device_env(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout) == []  # and none can be found behind the stand-in


def test_gpu_smoke_runs_on_cpu_with_torch_and_transformers_only(tmp_path):
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_smoke.py"), "--device", "cpu", "--tiny"],
                          capture_output=True, text=True, timeout=300, env=device_env(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("json: "))[6:])
    step = report["step"]
    assert report["failures"] == [] and report["device"] == "cpu"
    # 3 prompts x 4: every third dropped, the last group cut to one kept member, which then trains nothing
    assert (step["trajectories"], step["kept"], step["trained"]) == (12, 7, 6)
    exam = report["exam"]  # the exam loop's shared-prefix cache and plain generate: the same greedy answers (fp32, CPU)
    assert (exam["tasks"], exam["plain_generate"]["same_answers"]) == (4, 4)
    assert step["params_changed"] and step["generated_tokens"] > 0 and step["train_tokens"] > step["generated_tokens"]
    exam = report["exam"]
    assert exam["tasks"] == 4 and exam["budget"] == 16 and exam["tokens"] > 0
    assert exam["which"].startswith("rl_backend.exam_loop.sit_exam")  # the exam loop both backends run
    assert "TRL: absent" in done.stdout and "verl: absent" in done.stdout
    assert "tokens/s" in done.stdout and "advantage rule: held" in done.stdout


def test_gpu_smoke_refuses_cuda_without_a_gpu():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the script would run on it")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_smoke.py")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2 and "--device cpu --tiny" in done.stderr


def test_gpu_smoke_runs_on_the_transformers_the_gpu_install_line_gives(tmp_path):
    """In .venv-verl, built from the GPU install line minus the engine, so it runs verl[vllm]'s transformers: the
    script's path works on that version, and it reports the versions it ran on beside the line's."""
    import pytest

    verl_python = REPO / ".venv-verl" / "bin" / "python"
    if not verl_python.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{verl_python} is missing: scripts/setup.sh makes it", pytrace=False)
        pytest.skip(f"{verl_python} is missing: run scripts/setup.sh")
    done = subprocess.run([str(verl_python), str(REPO / "scripts" / "gpu_smoke.py"), "--device", "cpu", "--tiny"],
                          capture_output=True, text=True, timeout=300, env=device_env(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("json: "))[6:])
    used = report["versions"]
    assert used["install_line"] == {"torch": "2.11.0", "transformers": "5.9.0"}
    assert used["here"]["transformers"] == "5.9.0" and used["same"]["transformers"] is True
    assert report["failures"] == [] and "versions: torch" in done.stdout
