"""What a verl round checks on this host before anything launches: the model folder, where the exam runs, the cluster.

    # [] or ["--model-path /m: config.json has no architectures ...", ...]
    problems = preflight(model_path, options)

verl's validators (``validate.py``) check the configuration; these check what the configuration points
at, each problem naming the option and the fix.  ``--dry-run`` reports them with the validation (and
exits non-zero), and a round refuses to launch with any of them.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from rl_backend.verl.config import LaunchOptions

PROBE_TIMEOUT_S = 3.0
JOB_PROBE_TIMEOUT_S = 120.0
"""An interpreter importing torch on a loaded node: tens of seconds."""
CHAT_TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json")


def preflight(model_path: str | Path, options: LaunchOptions, cuda_here: bool | None = None) -> list[str]:
    """Every problem of ``model_path`` and ``options`` found from this host (``cuda_here``: None asks torch)."""
    return model_problems(model_path, submitted=bool(options.ray_job_address)) + cluster_problems(options) + \
        exam_problems(options, cuda_here)


def model_problems(model_path: str | Path, submitted: bool = False) -> list[str]:
    """A Hugging Face causal LM folder: ``config.json`` naming a ``...ForCausalLM`` architecture, a tokenizer, and a
    chat template (verl's agent loop applies it to every prompt: the data rows are chat messages).  A folder this
    host cannot see is a problem unless the job is submitted (``submitted``), whose nodes read it themselves."""
    folder = Path(model_path)
    where = f"--model-path {model_path}"
    if not folder.is_dir():
        if submitted and not folder.exists():
            return []  # only the cluster's nodes need it; the job reports it missing there
        return [f"{where} is not a folder: give a Hugging Face model folder (config.json, weights, tokenizer)"]
    problems = []
    try:
        config = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as exc:
        config = None
        problems.append(f"{where}: config.json is missing or not JSON ({type(exc).__name__}); a Hugging Face model "
                        "folder has one, as `save_pretrained` writes it")
    if config is not None:
        architectures = config.get("architectures") if isinstance(config, dict) else None
        if not architectures or not isinstance(architectures, list):
            problems.append(f"{where}: config.json names no architectures, so verl cannot tell which model to build; "
                            "give a folder saved by `save_pretrained` of a causal LM (e.g. Qwen3ForCausalLM)")
        elif not any(isinstance(a, str) and a.endswith("ForCausalLM") for a in architectures):
            problems.append(f"{where}: {architectures} is not a causal LM (no ...ForCausalLM architecture); GRPO "
                            "trains a text-generating policy: give a causal LM's folder")
    tokenizer_config = _json(folder / "tokenizer_config.json")
    if not (folder / "tokenizer.json").exists() and tokenizer_config is None:
        problems.append(f"{where}: no tokenizer (tokenizer.json or tokenizer_config.json); save the tokenizer with "
                        "the model (`tokenizer.save_pretrained(folder)`)")
    elif not (isinstance(tokenizer_config, dict) and tokenizer_config.get("chat_template")) and not any(
            (folder / name).exists() for name in CHAT_TEMPLATE_FILES):
        problems.append(f"{where}: the tokenizer has no chat template, and verl renders every prompt with it (the "
                        "data rows are chat messages); use an instruct/chat model, or add a chat_template.jinja")
    return problems


def cluster_problems(options: LaunchOptions) -> list[str]:
    """A Ray address that does not answer (``--ray-address host:port``, ``--ray-job-address http://host:port``)."""
    problems = []
    for flag, address in (("--ray-address", options.ray_address), ("--ray-job-address", options.ray_job_address)):
        if not address or address == "auto":
            continue
        parsed = urlparse(address if "://" in address else f"tcp://{address}")
        try:
            port = parsed.port or (8265 if flag == "--ray-job-address" else 6379)
        except ValueError:
            problems.append(f"{flag} {address}: not host:port; give the head node's address (e.g. 10.0.0.1:6379)")
            continue
        if not parsed.hostname:
            problems.append(f"{flag} {address}: no host; give the head node's address")
            continue
        try:
            socket.create_connection((parsed.hostname, port), timeout=PROBE_TIMEOUT_S).close()
        except OSError as exc:
            problems.append(f"{flag} {address} does not answer ({exc}); start the cluster (`ray start --head`) or "
                            "give the address it listens on")
    return problems


def exam_problems(options: LaunchOptions, cuda_here: bool | None = None) -> list[str]:
    """The exam runs in this controller after each job: refused when the job trains on GPUs this controller's torch
    cannot use -- on a cluster, or on this host through a ``--job-python`` whose torch sees a GPU -- unless
    ``--exam-device cpu`` says to examine on this CPU anyway (fp32, hours for a multi-billion-parameter model)."""
    if options.exam_device == "cpu":
        return []
    if cuda_here is None:
        import torch

        cuda_here = torch.cuda.is_available()
    if cuda_here:
        return []
    if options.ray_address or options.ray_job_address:
        flag = "--ray-job-address" if options.ray_job_address else "--ray-address"
        return [f"with {flag} the job trains on the cluster, but the held-out exam runs on this host after each job, "
                "and this host has no GPU: run the controller on a GPU node of the cluster, or pass --exam-device cpu "
                "to examine on this CPU (hours for a multi-billion-parameter model)"]
    if options.job_python and job_sees_cuda(options.job_python):
        return [f"the job trains on this host's GPUs (--job-python {options.job_python} sees CUDA), but the held-out "
                f"exam runs in this controller ({sys.executable}), whose torch sees no GPU: start the controller "
                f"with that interpreter ({options.job_python} -m meta_agent ...), or pass --exam-device cpu to "
                "examine on this CPU (hours for a multi-billion-parameter model)"]
    return []  # no GPU for the job either: verl refuses to train, and says so


def job_sees_cuda(python: str) -> bool:
    """Whether ``python``'s torch sees a GPU (False when it cannot say: the job then fails on its own)."""
    try:
        done = subprocess.run([python, "-c", "import torch; print(torch.cuda.is_available())"], capture_output=True,
                              text=True, timeout=JOB_PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and done.stdout.strip().splitlines()[-1:] == ["True"]


def _json(path: Path) -> object | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
