"""A knob move the live record refuted is not proposed again without new evidence.

The loop reverts a merge whose live check refuted it (``meta_agent.live_check``), that tripped the tripwire, or whose
harness failed to train (a restore); git keeps the record: the intervention's status is ``reverted``.  A recipe's
target is recomputed from each round's evidence, so the same move comes back with a slightly different value (the
default run: temperature 0.7 -> 0.91 refuted and reverted, then 0.7 -> 0.88 proposed and merged).  Its change key
differs; what repeats is the *move*: the same knob, the same direction.

New evidence is what a round trained after the revert shows: the field the refuted merge predicted to improve
(its ``Predicted-Effect``) is worse, by more than ``NEW_EVIDENCE_MARGIN``, than in the round that first proposed it.
A round that trained on the refuted harness (the round after the proposal, whose live check reverted it) is no
evidence for the move: it measured the move itself.

    why = declined(change, ctx)            # None, or why the agent declines (its transcript says so)
    note = new_evidence(change, ctx)       # why a refuted move is proposed again anyway ("" when none was refuted)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from harness_repo.contract import HarnessConfig
from meta_agent.judge.effects import parse_effect

if TYPE_CHECKING:
    from meta_agent.agents.base import AgentContext
    from meta_agent.agents.recipe_types import Change

NEW_EVIDENCE_MARGIN = 0.05
"""How much worse (absolute) the predicted field must be after the revert than when the move was proposed."""


@dataclass(frozen=True)
class Refuted:
    """A reverted merge's knob moves: knob -> (old, new), with what it predicted and the round that proposed it."""

    branch: str
    round: int
    moves: dict[str, tuple[float, float]]
    predicted: list[tuple[str, str]]
    """(digest field, ``increase``/``decrease``) the merge predicted."""


def _grpo(text: str) -> dict[str, float]:
    """The numeric knobs as training reads them: ``yaml.safe_load`` then :class:`HarnessConfig`, as
    ``rl_backend.base.parse_harness_yaml`` does.  So "0.91", 91e-2, an alias and a flow mapping are the value
    pydantic makes of them, and an omitted knob is its default (what the trainer ran with)."""
    try:
        grpo = HarnessConfig.model_validate(yaml.safe_load(text)).grpo.model_dump()
    except Exception:  # noqa: BLE001 - a harness.yaml training refuses never ran a move: it moved no knob
        return {}
    return {k: float(v) for k, v in grpo.items() if isinstance(v, int | float) and not isinstance(v, bool)}


def knob_moves(before: str, after: str) -> dict[str, tuple[float, float]]:
    """The numeric ``grpo`` knobs that differ between two harness.yaml texts: knob -> (old, new)."""
    old, new = _grpo(before), _grpo(after)
    return {k: (old[k], new[k]) for k in sorted(set(old) & set(new)) if old[k] != new[k]}


def refuted(ctx: AgentContext) -> list[Refuted]:
    """The reverted merges of ``ctx.history`` that moved a knob, as git records them."""
    out = []
    for entry in ctx.history:
        get = entry.get if isinstance(entry, dict) else lambda k, e=entry: getattr(e, k, None)
        if get("status") != "reverted" or not get("merge_commit"):
            continue
        try:
            moves = knob_moves(ctx.repo.read_file(str(get("base")), "harness.yaml"),
                               ctx.repo.read_file(str(get("head")), "harness.yaml"))
        except Exception:  # noqa: BLE001 - a branch without harness.yaml (or gone) moved no knob
            continue
        if moves:
            predicted = [p for text in get("predicted_effects") or [] if (p := parse_effect(str(text)))]
            out.append(Refuted(str(get("branch")), int(get("round") or 0), moves, predicted))
    return out


def _direction(old: float, new: float) -> str:
    return "up" if new > old else "down"


def _digest(ctx: AgentContext, n: int) -> dict[str, Any]:
    path = ctx.round_dir.parent / str(n) / "digest.json"
    try:
        return json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        return {}


def _worse_since(ctx: AgentContext, r: Refuted) -> str | None:
    """How a field the refuted merge predicted to improve got worse since it was proposed, on a round trained after
    its revert; None when it did not (or cannot be told)."""
    if ctx.round < r.round + 2:
        return None
    then, now = _digest(ctx, r.round), ctx.digest
    for field, direction in r.predicted:
        a, b = then.get(field), now.get(field)
        if not (isinstance(a, int | float) and isinstance(b, int | float)) or direction not in ("increase",
                                                                                               "decrease"):
            continue
        worse = (b - a) if direction == "decrease" else (a - b)
        if worse > NEW_EVIDENCE_MARGIN:
            return (f"new evidence: {field} {a:.3f} -> {b:.3f} from round {r.round} to round {ctx.round}, "
                    f"trained after the revert")
    return None


def _matches(change: Change, ctx: AgentContext) -> list[tuple[Refuted, str]]:
    """The refuted merges whose knob moves ``change`` repeats (same knob, same direction), with the move named."""
    text = change.files.get("harness.yaml")
    if text is None:
        return []
    mine = knob_moves(ctx.repo.read_file("main", "harness.yaml"), text)
    out = []
    for r in refuted(ctx):
        for knob, (old, new) in mine.items():
            if knob in r.moves and _direction(old, new) == _direction(*r.moves[knob]):
                was = r.moves[knob]
                out.append((r, f"{knob} {_direction(old, new)} ({old:g} -> {new:g}; {r.branch} moved it "
                               f"{was[0]:g} -> {was[1]:g})"))
    return out


def declined(change: Change, ctx: AgentContext) -> str | None:
    """Why ``change`` is not proposed: it repeats a refuted, reverted knob move and nothing since says otherwise."""
    for r, move in _matches(change, ctx):
        if _worse_since(ctx, r) is None:
            fields = ", ".join(f"{f} {d}" for f, d in r.predicted) or "its prediction"
            return (f"{move}: refuted and reverted; no new evidence ({fields} is no worse by more than "
                    f"{NEW_EVIDENCE_MARGIN} on a round trained after the revert, round {r.round + 2} on, than in "
                    f"round {r.round})")
    return None


def new_evidence(change: Change, ctx: AgentContext) -> str:
    """For a change that repeats a refuted move and is proposed anyway: the new evidence (else "")."""
    notes = [f"{move}: {why}" for r, move in _matches(change, ctx) if (why := _worse_since(ctx, r))]
    return "; ".join(notes)
