"""The strip-markup recipe: main's templates write the policy's chat markup by hand -> the markup goes.

``main:chat_markup`` (``meta_agent.markup_checks``) names rendered prompts that hold the policy tokenizer's special
tokens (``<|im_start|>user ... <|im_end|>``): the trainer applies the chat template over the rendered messages, so
the policy reads a turn nested in a turn.  The rule removes those tokens (and the role name an opening one carries)
from every template under prompts/, keeping the text between them; the chat template adds the turns.  Its
evidence is the check re-read on the branch's templates (:func:`markup_evidence`): none of the tokens is left.

    decision = strip_markup(digest, HarnessFiles.read(repo))   # a Change, or why not
"""

from __future__ import annotations

from meta_agent.agents.recipe_types import Change, Decision, HarnessFiles
from meta_agent.markup_checks import MARKUP_MODE
from meta_agent.markup_checks import strip_markup as strip_text

RULE = "strip-markup"
TEMPLATES = ("prompts/system.j2", "prompts/user.j2")


def stripped(f: HarnessFiles, tokens: list[str]) -> dict[str, str]:
    """The templates that hold any of ``tokens``, without them."""
    out = {}
    for path, text in zip(TEMPLATES, (f.system_prompt, f.user_prompt)):
        if text and any(t in text for t in tokens):
            out[path] = strip_text(text, tokens)
    return out


def markup_evidence(digest: dict, change: Change) -> str | None:
    """For a strip-markup change: "" when the branch's templates hold none of the finding's tokens, else which;
    None for any other change."""
    named = [m for m in digest.get("failure_modes") or [] if m.get("name") == MARKUP_MODE]
    if change.rule != RULE or not named:
        return None
    tokens = list((named[0].get("evidence") or {}).get("tokens") or [])
    left = sorted({t for text in change.files.values() for t in tokens if t in text})
    return f"the branch's templates still hold {left}" if left else ""


def strip_markup(d: dict, f: HarnessFiles) -> Decision:
    """main's templates without the policy's chat markup they write by hand."""
    found = [m for m in d.get("failure_modes") or [] if m.get("name") == MARKUP_MODE]
    if not found:
        return f"no {MARKUP_MODE} finding (main's rendered prompts hold none of the policy's chat-template tokens)"
    tokens = [str(t) for t in (found[0].get("evidence") or {}).get("tokens") or [] if t]
    if not tokens:
        return f"{MARKUP_MODE} names no token to remove"
    files = stripped(f, tokens)
    if not files:
        return (f"the rendered prompts hold {tokens}, but neither template's own text does (template code or a "
                "question writes them): fix by hand or with the LLM agent")
    rate = float(found[0].get("rate") or 0.0)
    return Change(
        RULE, f"{RULE}:" + ",".join(sorted(files)), min(1.0, max(0.5, rate)),
        "Remove the hand-written chat markup from the prompt templates",
        f"{MARKUP_MODE} rate {rate:.3f}: the rendered prompts hold the policy's chat-template tokens {tokens}.",
        "The trainer applies the policy's chat template over the rendered messages, so markup a template writes "
        "by hand puts a turn inside the user's turn (and an empty assistant turn before the policy's own), a "
        "context the exam never shows; without it the policy trains on the prompt the exam asks.",
        ["heldout_accuracy increase: the policy trains under the turns the exam's prompts show"],
        files, f"{MARKUP_MODE} named", root_cause=True)
