"""What a verl round checks on this host before anything launches: the model folder, where the exam runs, the cluster.

    problems = preflight(model_path, options)      # [] or ["--model-path /m: config.json has no architectures ...", ...]

verl's validators (``validate.py``) check the configuration; these check what the configuration points
at, each problem naming the option and the fix.  ``--dry-run`` reports them with the validation (and
exits non-zero), and a round refuses to launch with any of them.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from urllib.parse import urlparse

from rl_backend.verl.config import LaunchOptions

PROBE_TIMEOUT_S = 3.0
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
    """The exam runs on this host after the job: refused when the job trains on a cluster and this host has no GPU,
    unless ``--exam-device cpu`` says to examine here anyway."""
    if options.exam_device == "cpu" or not (options.ray_address or options.ray_job_address):
        return []
    if cuda_here is None:
        import torch

        cuda_here = torch.cuda.is_available()
    if cuda_here:
        return []
    return ["the held-out exam runs on this host after each job, and this host has no GPU while the job trains on "
            "the cluster: run the controller on a GPU node of the cluster, or pass --exam-device cpu to examine "
            "on this CPU (hours for a multi-billion-parameter model)"]


def _json(path: Path) -> object | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
