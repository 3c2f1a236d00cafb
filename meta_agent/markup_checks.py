"""main's prompts as the trainer sees them: what it does to them before the policy generates.

The trainer does two things to a rendered prompt that no reading of the templates or of the archive's text shows:

- it keeps only prompts whose chat-templated length fits ``max_prompt_length`` (``rl_backend.local``'s fitting
  tasks, as verl's ``filter_overlong_prompts``), so a kind of main's mix whose prompts are longer never trains, and
  nothing fails while enough others fit (``main:prompt_length``, the name training's refusal gives the same
  limit: ``main_checks.refusal_finding``);
- it wraps the rendered messages in the policy's chat template, so markup a template writes by hand (the
  tokenizer's own special tokens, ``<|im_start|>user``) is wrapped again: a user turn inside a user turn
  (``main:chat_markup``).

Both are measured with the policy's own tokenizer (the rows' ``policy_ref``).  The kinds' lengths come from fresh
tasks of each kind of main's mix (the trusted generator), chat-templated and counted as the trainer counts them.
Where the digest has main's harness and a sandbox (``constructed_checks``), main's templates render those tasks in
the sandboxed runtime (:func:`rendered_length_check`): a template that branches on the task (``task.name``) and
lengthens only a kind the archive never holds is measured as training renders it.  Without them, the fresh
questions are put in place of the question in main's archived messages (:func:`kind_lengths`), which sees no such
branch.  No harness code runs here: rendering is the caller's ``render``.

    checks, findings = trainer_prompt_checks(rows, train_tasks, knobs, domain)
    check, finding = rendered_length_check(rows, config, domain, session.render)
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

LOG = logging.getLogger(__name__)
PREFIX = "main:"
SOURCE = "markup_checks"
BUDGET_MODE, MARKUP_MODE = "main:prompt_length", "main:chat_markup"
PER_KIND = 8
"""Fresh tasks drawn of each kind of main's mix to measure its prompts' lengths."""
MAX_DROPPED = 0.5
"""A kind whose prompts the trainer drops for length more often than this trains mostly (or wholly) without it."""
HEADROOM = 1.25
"""A budget fitted to the kinds' measured prompts leaves this room over the longest (other tasks run longer)."""


@lru_cache(maxsize=4)
def load_tokenizer(ref: str) -> Any:
    """The policy's tokenizer at ``ref`` (a local folder the trainer loaded it from); files only, no network."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ref, local_files_only=True)


def tokenizer_of(rows: list[dict], load: Callable[[str], Any] = load_tokenizer) -> tuple[Any, str]:
    """(the tokenizer of the rows' policy, "") or (None, why not)."""
    refs = sorted({str(r.get("policy_ref")) for r in rows if r.get("policy_ref")})
    if not refs:
        return None, "the rows record no policy_ref"
    try:
        return load(refs[0]), ""
    except Exception as exc:  # noqa: BLE001 - no tokenizer here (a remote policy): the check is said, not run
        return None, f"the policy's tokenizer at {refs[0]} could not be loaded: {type(exc).__name__}: {exc}"[:300]


def special_tokens(tokenizer: Any) -> list[str]:
    """The tokenizer's special tokens that read as markup (``<|im_start|>``, ``</s>``), longest first."""
    found = set(getattr(tokenizer, "all_special_tokens", None) or [])
    for tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(tok, "special", False):
            found.add(str(tok))
    return sorted((t for t in found if len(t) > 1 and not t.isalnum()), key=lambda t: (-len(t), t))


def prompt_messages(row: dict) -> list[dict] | None:
    """The rendered messages the row's prompt was built from (its archived messages less the reply)."""
    msgs = row.get("messages")
    msgs = json.loads(msgs) if isinstance(msgs, str) else msgs
    if not isinstance(msgs, list) or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in msgs):
        return None
    return msgs[:-1] if msgs and msgs[-1].get("role") == "assistant" else msgs


def markup_in(messages: list[dict], tokens: list[str]) -> list[str]:
    """The special tokens the messages' own text holds (the chat template adds its own around them)."""
    text = "\n".join(m["content"] for m in messages)
    return [t for t in tokens if t in text]


def markup_check(rows: list[dict], tokenizer: Any) -> tuple[dict, dict | None]:
    """``main:chat_markup``: main's rendered prompts hold the policy's chat-template markup, which the trainer's
    chat template wraps again; rate = the share of training prompts that do."""
    tokens = special_tokens(tokenizer)
    seen: dict[str, list[str]] = {}
    for r in rows:
        msgs = prompt_messages(r) if r.get("split", "train") == "train" else None
        if msgs is not None:
            seen.setdefault(str(r.get("task_id") or r.get("traj_id")), markup_in(msgs, tokens))
    marked = {k: v for k, v in seen.items() if v}
    names = sorted({t for v in marked.values() for t in v})
    detail = (f"{len(marked)} of {len(seen)} rendered prompts hold the policy's chat-template tokens {names}: the "
              "trainer applies the chat template over them, so the policy reads a turn nested in a turn"
              if marked else f"no rendered prompt of {len(seen)} holds the policy's chat-template tokens")
    check = {"name": "chat_markup", "passed": not marked, "detail": detail}
    if not marked:
        return check, None
    examples = [r for r in rows if str(r.get("task_id") or r.get("traj_id")) in marked][:3]
    return check, {"name": MARKUP_MODE, "source": SOURCE, "severity": "error", "rate": len(marked) / len(seen),
                   "message": f"main fails the chat_markup check: {detail}"[:400],
                   "examples": [{"traj_id": r.get("traj_id"), "prompt": str(r.get("prompt"))[:400],
                                 "response": str(r.get("response"))[:200], "reward": r.get("reward"),
                                 "verified": r.get("verified")} for r in examples],
                   "evidence": {"tokens": names}}


def _question(row: dict) -> str:
    task = row.get("task")
    task = json.loads(task) if isinstance(task, str) else task
    return str(task.get("question") or "") if isinstance(task, dict) else ""


def kind_lengths(rows: list[dict], train_tasks: list[dict], domain: Any, tokenizer: Any,
                 seed: int = 0) -> tuple[dict[str, list[int]], str]:
    """Each kind of main's mix: the trainer's token counts of its fresh tasks' prompts (main's archived messages,
    the question replaced), or ({}, why not)."""
    from harness_repo.contract import TaskSpec

    base = next(((m, q) for r in rows if (m := prompt_messages(r)) and (q := _question(r))
                 and any(q in x["content"] for x in m)), None)
    if base is None:
        return {}, "no archived prompt shows its question whole (main's messages cannot be re-filled)"
    msgs, question = base
    out: dict[str, list[int]] = {}
    for entry in train_tasks:
        if not isinstance(entry, dict) or not entry.get("name"):
            continue
        spec = TaskSpec.model_validate(entry)
        tasks = domain.tasks("train", [spec], PER_KIND, seed)
        for t in tasks:
            filled = [{**m, "content": m["content"].replace(question, t.question)} for m in msgs]
            text = tokenizer.apply_chat_template(filled, tokenize=False, add_generation_prompt=True)
            out.setdefault(spec.name, []).append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    return out, ""


def fresh_items(train_tasks: list[dict], domain: Any, seed: int = 0) -> list[tuple[str, dict]]:
    """(kind, render item) for :data:`PER_KIND` fresh tasks of each kind of main's mix, as a template sees them."""
    from harness_repo.contract import TaskSpec
    from meta_agent.prompt_checks import template_item

    out = []
    for entry in train_tasks:
        if isinstance(entry, dict) and entry.get("name"):
            spec = TaskSpec.model_validate(entry)
            out += [(spec.name, template_item(t.question, t.template_vars()))
                    for t in domain.tasks("train", [spec], PER_KIND, seed)]
    return out


def _not_run(why: str) -> tuple[dict, None]:
    return {"name": "prompt_length", "passed": True, "detail": f"not run: {why}"[:400]}, None


def rendered_length_check(rows: list[dict], config: dict, domain: Any, render: Callable[[list[dict]], list],
                          load: Callable[[str], Any] = load_tokenizer) -> tuple[dict, dict | None]:
    """``main:prompt_length`` on the prompts main's templates render from fresh tasks of each kind of its mix
    (``config``: main's harness.yaml, its limit the trainer's default where it sets none; ``render``: items -> chat
    messages or the render error as text, a sandboxed session's), counted with the policy's tokenizer and chat
    template as the trainer counts them.  A prompt that fails to render is the gate's ``prompt_render`` check's,
    not counted here."""
    from harness_repo.contract import GRPOKnobs

    default = GRPOKnobs.model_fields["max_prompt_length"].default  # what the trainer applies where main sets none
    limit = (config.get("grpo") or {}).get("max_prompt_length", default) if isinstance(config, dict) else None
    if not isinstance(limit, int | float) or isinstance(limit, bool) or not config.get("tasks") or domain is None:
        return _not_run("main's mix, the domain or max_prompt_length is unknown")
    tokenizer, why = tokenizer_of(rows, load)
    if tokenizer is None:
        return _not_run(why)
    items = fresh_items(config["tasks"], domain)
    if not items:
        return _not_run("main's mix names no kind")
    lengths: dict[str, list[int]] = {}
    failed = 0
    for (kind, _), chat in zip(items, render([item for _, item in items]), strict=True):
        if isinstance(chat, str):
            failed += 1
            continue
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        lengths.setdefault(kind, []).append(len(tokenizer(text, add_special_tokens=False)["input_ids"]))
    if not lengths:
        return _not_run(f"none of main's {len(items)} fresh prompts rendered (the prompt_render check's)")
    check, finding = budget_check(lengths, int(limit))
    how = "main's templates rendered in the sandboxed runtime from fresh tasks of each kind"
    check["detail"] = f"{check['detail']} [{how}" + (f"; {failed} failed to render]" if failed else "]")
    if finding is not None:
        finding["evidence"]["measured_by"] = f"the policy's tokenizer and chat template, {how}"
    return check, finding


def budget_check(lengths: dict[str, list[int]], limit: int) -> tuple[dict, dict | None]:
    """``main:prompt_length`` as the trainer measures it: a kind of main's mix whose prompts the trainer drops for
    length more often than :data:`MAX_DROPPED`; rate = the worst kind's dropped share; evidence as ``fit-limit``
    reads it (the knob, the measured lengths, a ``target`` over the longest)."""
    dropped = {k: sum(x > limit for x in v) / len(v) for k, v in lengths.items() if v}
    worst = {k: s for k, s in dropped.items() if s > MAX_DROPPED}
    shares = ", ".join(f"{k} {s:.2f} (longest {max(lengths[k])})" for k, s in sorted(dropped.items()))
    detail = (f"share of each kind's prompts over max_prompt_length={limit} tokens (the trainer keeps only those "
              f"that fit): {shares}" + (f"; {', '.join(sorted(worst))} mostly never trains" if worst else ""))
    check = {"name": "prompt_length", "passed": not worst, "detail": detail}
    if not worst:
        return check, None
    every = sorted(x for v in lengths.values() for x in v)
    target = -(-int(every[-1] * HEADROOM) // 16) * 16
    return check, {"name": BUDGET_MODE, "source": SOURCE, "severity": "error", "rate": max(worst.values()),
                   "message": f"main fails the prompt_length check (the trainer's count): {detail}"[:400],
                   "examples": [{"task": k, "dropped": round(s, 3), "longest": max(lengths[k])}
                                for k, s in sorted(worst.items())][:3],
                   "evidence": {"knob": "max_prompt_length", "limit": limit, "lengths": every,
                                "longest": every[-1], "target": target, "dropped": dropped,
                                "measured_by": "the policy's tokenizer and chat template, fresh tasks of each kind"}}


def trainer_prompt_checks(rows: list[dict], train_tasks: list[dict] | None, knobs: dict | None, domain: Any,
                          load: Callable[[str], Any] = load_tokenizer) -> tuple[list[dict], list[dict]]:
    """Both checks on main's round (each said, not run, where its inputs are missing)."""
    tokenizer, why = tokenizer_of(rows, load)
    if tokenizer is None:
        return [{"name": "chat_markup", "passed": True, "detail": f"not run: {why}"}], []
    checks, found = [], []
    check, finding = markup_check(rows, tokenizer)
    checks, found = checks + [check], found + ([finding] if finding else [])
    limit = (knobs or {}).get("max_prompt_length")
    if not train_tasks or domain is None or not isinstance(limit, int | float):
        return checks + [{"name": "prompt_length", "passed": True, "detail": "not run: main's mix, the domain "
                          "or max_prompt_length is unknown"}], found
    try:
        lengths, why = kind_lengths(rows, train_tasks, domain, tokenizer)
    except Exception as exc:  # noqa: BLE001 - a mix the generator refuses is training's to report
        lengths, why = {}, f"{type(exc).__name__}: {exc}"[:300]
    if not lengths:
        return checks + [{"name": "prompt_length", "passed": True, "detail": f"not run: {why}"}], found
    check, finding = budget_check(lengths, int(limit))
    return checks + [check], found + ([finding] if finding else [])


_ROLE = r"(?:system|user|assistant|human|model)"


def strip_markup(text: str, tokens: list[str]) -> str:
    """``text`` without the special tokens in it, nor the role name that follows an opening one (``<|im_start|>user``
    and its line break go; the text between the markers stays)."""
    for t in tokens:
        text = re.sub(re.escape(t) + rf"(?:[ \t]*{_ROLE}\b[ \t]*(?:\n|(?={'|'.join(map(re.escape, tokens))})))?", "",
                      text)
    return text.strip("\n") + "\n"
