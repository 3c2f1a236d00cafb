"""The GPU smoke test's random model and what the machine is (``scripts/gpu_smoke.py``).

A Llama randomly initialised from a config and a byte-level tokenizer built here with a chat template, so
nothing is downloaded; HF ``generate`` over chat prompts; the device's bf16 peak for the FLOP figures; the torch
and transformers versions beside those the GPU install line gives.  Needs torch and transformers only.
"""

from __future__ import annotations

import importlib
import re
import time
from pathlib import Path

import torch

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0}
"""Dense bf16 tensor-core peaks (no sparsity) by GPU name fragment."""

CHAT_TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def build_tokenizer():
    """A byte-level BPE tokenizer without merges (256 byte tokens + specials) and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    specials = ["<|end|>", "<|pad|>", "<|system|>", "<|user|>", "<|assistant|>"]
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|end|>", pad_token="<|pad|>",
                                  additional_special_tokens=specials[2:], padding_side="left")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_model(tok, args, device: str, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tok), hidden_size=args.hidden, intermediate_size=args.hidden * 11 // 4,
                         num_hidden_layers=args.layers, num_attention_heads=max(args.hidden // 128, 2),
                         num_key_value_heads=max(args.hidden // 512, 1), max_position_embeddings=4096,
                         bos_token_id=None, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         tie_word_embeddings=False)
    torch.manual_seed(args.seed)
    with torch.device(device):  # initialised where it runs: a CPU init of ~1B parameters takes minutes
        model = LlamaForCausalLM(config).to(dtype=dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    return model


def dense_params(model) -> int:
    """Parameters every token multiplies through (the input embedding is a lookup, not a matmul)."""
    return sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()


def peak_tflops(device: str) -> tuple[float | None, str]:
    if device != "cuda":
        return None, "cpu"
    name = torch.cuda.get_device_name(0)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None), name


@torch.no_grad()
def generate(model, tok, messages: list[list[dict]], max_new: int, sample: bool, device: str):
    texts = [tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in messages]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
    kwargs = dict(do_sample=True, temperature=1.0, top_p=1.0, top_k=0) if sample else dict(do_sample=False)
    out = model.generate(**enc, max_new_tokens=max_new, pad_token_id=tok.pad_token_id, **kwargs)
    return enc, out[:, enc["input_ids"].shape[1]:]


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed(device: str, work):
    """``work()`` and the seconds it took, the device synchronised on both sides."""
    sync(device)
    t0 = time.perf_counter()
    result = work()
    sync(device)
    return result, time.perf_counter() - t0


def install_line_versions() -> dict[str, str | None]:
    """The torch and transformers the GPU install line gives (docs/gpu.md's torch line, the [verl] extra's
    transformers pin), read from this checkout: what a verl round on a GPU node runs on."""
    root = Path(__file__).resolve().parents[1]

    def find(path: Path, pattern: str) -> str | None:
        match = re.search(pattern, path.read_text()) if path.exists() else None
        return match.group(1) if match else None

    return {"torch": find(root / "docs" / "gpu.md", r'pip install "torch==([\d.]+)"'),
            "transformers": find(root / "pyproject.toml", r'"transformers==([\d.]+)"')}


def versions() -> dict:
    """What this run used, beside what the GPU install line gives."""
    import transformers

    line = install_line_versions()
    here = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__}
    return {"here": here, "install_line": line, "same": {k: here[k] == line[k] for k in here}}


def importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - absent or broken: either way not usable here
        return False
    return True
