"""What a verl round checks before anything launches (``rl_backend.verl.preflight``): each bad input named with its
option and fix.  No verl needed: these run on the controller before verl is imported."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path

import pytest

from rl_backend.base import INFRASTRUCTURE, BackendOptionError, RoundSpec, TrainingFailed
from rl_backend.model import ensure_base_model
from rl_backend.verl.backend import VerlBackend
from rl_backend.verl.config import LaunchOptions
from rl_backend.verl.preflight import cluster_problems, exam_problems, model_problems

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def real_model() -> Path:
    return ensure_base_model()


def model_like(tmp_path: Path, real_model: Path, config: object, chat_template: bool = True) -> Path:
    """A copy of the real model folder's small files with ``config.json`` replaced (weights are not read)."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (real_model / name).exists():
            shutil.copy(real_model / name, folder / name)
    tok = json.loads((folder / "tokenizer_config.json").read_text())
    if not chat_template:
        tok.pop("chat_template", None)
    (folder / "tokenizer_config.json").write_text(json.dumps(tok))
    for name in ("chat_template.jinja", "chat_template.json"):
        if chat_template and (real_model / name).exists():
            shutil.copy(real_model / name, folder / name)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_the_real_causal_lm_folder_passes(real_model):
    assert model_problems(real_model) == []


@pytest.mark.parametrize("config, problem", [
    ({}, "names no architectures"),  # the `{}` config.json the issue found accepted
    ({"architectures": "Qwen3ForCausalLM"}, "names no architectures"),  # a string, not a list
    ({"architectures": ["BertForMaskedLM"]}, "is not a causal LM"),
    ({"architectures": ["FooForCausalLMHead"]}, "is not a causal LM"),  # the name only contains the suffix
    (["not", "a", "mapping"], "names no architectures"),
])
def test_a_folder_that_is_not_a_causal_lm_is_refused(tmp_path, real_model, config, problem):
    problems = model_problems(model_like(tmp_path, real_model, config))
    assert len(problems) == 1 and problem in problems[0] and problems[0].startswith("--model-path ")


def test_a_tokenizer_without_a_chat_template_is_refused(tmp_path, real_model):
    folder = model_like(tmp_path, real_model, {"architectures": ["LlamaForCausalLM"]}, chat_template=False)
    [problem] = model_problems(folder)
    assert "no chat template" in problem and "chat_template.jinja" in problem


def test_a_missing_folder_config_or_tokenizer_is_refused(tmp_path):
    assert "is not a folder" in model_problems(tmp_path / "nope")[0]
    assert model_problems(tmp_path / "nope", submitted=True) == []  # a submitted job's nodes read it themselves
    (tmp_path / "bare").mkdir()
    problems = model_problems(tmp_path / "bare")
    assert any("config.json is missing" in p for p in problems) and any("no tokenizer" in p for p in problems)


def test_a_ray_address_that_does_not_answer_is_refused():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert cluster_problems(LaunchOptions(ray_address=f"127.0.0.1:{port}")) == []
        assert cluster_problems(LaunchOptions(ray_job_address=f"http://127.0.0.1:{port}")) == []
    [problem] = cluster_problems(LaunchOptions(ray_address=f"127.0.0.1:{port}"))  # closed now
    assert problem.startswith(f"--ray-address 127.0.0.1:{port} does not answer") and "ray start --head" in problem
    [problem] = cluster_problems(LaunchOptions(ray_job_address="http://127.0.0.1:notaport"))
    assert "not host:port" in problem


def test_the_exam_is_refused_on_a_controller_without_a_gpu_when_the_job_trains_on_a_cluster():
    cluster = LaunchOptions(ray_job_address="http://head:8265")
    [problem] = exam_problems(cluster, cuda_here=False)
    assert "--exam-device cpu" in problem and "GPU node" in problem
    assert exam_problems(cluster, cuda_here=True) == []
    assert exam_problems(LaunchOptions(ray_job_address="http://head:8265", exam_device="cpu"), cuda_here=False) == []
    assert exam_problems(LaunchOptions(), cuda_here=False) == []  # a local job: the exam runs where it trained


def gpu_job_python(tmp_path: Path) -> Path:
    """A job interpreter whose torch sees a GPU while this controller's is CPU-only (a GPU venv's python named by
    --job-python): this interpreter, with ``torch.cuda.is_available`` answering True, the one fact the check asks."""
    site = tmp_path / "gpu_site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import torch\ntorch.cuda.is_available = lambda: True\n")
    script = tmp_path / "gpu-python"
    script.write_text(f"#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} \"$@\"\n")
    script.chmod(0o755)
    return script


def test_a_local_launch_that_would_examine_on_the_cpu_is_refused_at_the_start(tmp_path, real_model):
    gpu = gpu_job_python(tmp_path)
    with pytest.raises(BackendOptionError, match="--exam-device cpu") as refused:
        VerlBackend(base_model=str(real_model), job_python=str(gpu))
    assert str(gpu) in str(refused.value) and "sees no GPU" in str(refused.value)
    VerlBackend(base_model=str(real_model), job_python=str(gpu), exam_device="cpu")  # the option it names is taken
    # a job that sees no GPU either trains nowhere: not the exam's problem (verl reports it)
    assert exam_problems(LaunchOptions(job_python=sys.executable), cuda_here=False) == []


def test_a_round_with_a_bad_model_launches_nothing(tmp_path, real_model):
    out = tmp_path / "rounds" / "0" / "train"
    spec = RoundSpec(run_id="r", round=0, harness_dir=REPO / "harness_repo" / "seeds" / "math", harness_commit="c" * 40,
                     policy_in=None, out_dir=out, domain="domains.math:MathDomain")
    backend = VerlBackend(base_model=str(model_like(tmp_path, real_model, {})))
    with pytest.raises(TrainingFailed, match="(?s)nothing launched.*names no architectures") as failed:
        backend.train_round(spec)
    assert failed.value.party == INFRASTRUCTURE
    assert not (out / "launches").exists() and not (out / "data").exists()


def test_a_cluster_run_from_a_controller_without_a_gpu_is_refused_at_the_start_naming_the_option(tmp_path, real_model):
    import os
    import subprocess
    import sys

    def cli(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "meta_agent", "--backend", "verl", "--model-path", str(real_model),
                               "--ray-job-address", "http://127.0.0.1:9", "--run-dir", str(tmp_path / "run"),
                               "--rounds", "1", *extra], cwd=REPO, capture_output=True, text=True, timeout=300,
                              env=os.environ | {"COLUMNS": "1000", "CUDA_VISIBLE_DEVICES": ""})  # no GPU here

    refused = cli()
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert "with --ray-job-address the job trains on the cluster" in refused.stderr
    assert "pass --exam-device cpu" in refused.stderr and "GPU node" in refused.stderr
    assert not (tmp_path / "run").exists()  # refused before any file was written
    # the option it names is accepted: the dry run gets past it (to the cluster that does not answer)
    accepted = cli("--exam-device", "cpu", "--dry-run")
    out = accepted.stdout + accepted.stderr
    assert accepted.returncode == 1 and "--ray-job-address http://127.0.0.1:9 does not answer" in out, out[-3000:]
    assert "--exam-device cpu" not in out
