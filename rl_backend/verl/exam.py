"""The held-out exam of a verl round: trusted code, on the round's exported HF weights, after the job.

verl's validation cannot be the exam: it generates with the training budget
(``data.max_response_length``, the harness's ``max_completion_length``; 0.9.1 has no
validation-only length, ``rollout.val_kwargs`` holds only ``n``, ``temperature``,
``top_p``, ``top_k`` and ``do_sample``), so a harness raising its budget would move the
exam.  The job therefore never validates (``trainer.test_freq=-1``) and the exam runs
here, as the local backend runs it (``rl_backend.exam_loop.heldout_eval``; no TRL): greedy, the domain's own
prompt (``domain.exam_messages``) and budget (``spec.heldout_max_tokens`` or
``domain.exam_max_tokens``), scored by the domain's verifier; rows of split ``heldout``.
Nothing of the harness is read.

    plan = exam_plan(spec)                    # (budget, chat messages per held-out task)
    rows = run_exam(spec, Path(".../ckpt/global_step_8/actor/huggingface"), step=8)

The weights are loaded with transformers, on the GPU when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rl_backend.base import RoundSpec


@dataclass(frozen=True)
class ExamPlan:
    """What the exam asks and how long an answer may be: fixed by trusted code only."""

    max_tokens: int
    messages: list[list[dict]]
    """The chat prompt of each held-out task, in draw order."""


def exam_plan(spec: RoundSpec) -> ExamPlan:
    """The exam of ``spec``'s round: the domain's held-out draw, prompt and budget (never the harness's)."""
    domain = spec.load_domain()
    tasks = domain.tasks("heldout", spec.heldout_specs or domain.eval_specs, spec.heldout_size, spec.heldout_seed)
    return ExamPlan(max_tokens=spec.heldout_max_tokens or domain.exam_max_tokens,
                    messages=[domain.exam_messages(t) for t in tasks])


def run_exam(spec: RoundSpec, policy: Path, step: int, device: str = "auto") -> list[dict]:
    """Sit the exam with the HF checkpoint ``policy``; trajectory rows of split ``heldout`` at ``step``.
    ``device`` ``auto``: this host's GPU when it has one (``preflight`` refused a cluster run without one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl_backend.exam_loop import heldout_eval  # the local backend's exam, without TRL: one exam for both

    device = "cuda" if device == "auto" and torch.cuda.is_available() else "cpu"
    tokenizer = AutoTokenizer.from_pretrained(policy, padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.bfloat16 if device == "cuda" else torch.float32)
    return heldout_eval(spec, model.to(device), tokenizer, str(policy), step)


def mode_note(domain: Any) -> str | None:
    """Said plainly where training and the exam run in different modes; None where they are the same."""
    if not hasattr(domain, "agent_messages"):
        return None
    return ("modes: training rolls out agent-mode episodes (a bash tool, the domain's agent system prompt), while the "
            "held-out exam is patch mode (one reply of edits to the domain's exam prompt, as on every backend): exam "
            "accuracy measures the policy's one-reply fixes, not its agent episodes")
