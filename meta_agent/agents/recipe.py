"""The recipe agent: deterministic rules from digest signals to harness interventions.

The default agent when no model is configured.  It runs the rules of
``meta_agent.agents.recipes`` (and, on SWE rounds, ``swe_recipes``) over the digest;
each proposes one known-good change (a reward fix, a knob, a filter, a prompt line)
when its signal crosses a threshold.  Per round each rule fires at most once, the
strongest signals first, at most ``ctx.max_candidates`` of them, and no two of them
editing the same file (they would conflict when the second one merges).  A warning
of the digest that no branch addresses is reported, not passed over.

A rule does not fire when its change is already in ``main``'s files, when a branch
of the same rule is still open, or when the very same change (the
``Recipe-Change`` trailer) was already merged, rejected or reverted: a
deterministic agent that re-proposed a refuted change would loop forever.

    from meta_agent.agents.recipe import RecipeAgent
    proposals = RecipeAgent().propose(ctx)      # ctx: meta_agent.agents.base.AgentContext
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path

from meta_agent.agents import refuted
from meta_agent.agents.base import AgentContext, Proposal, free_branch
from meta_agent.agents.recipe_evidence import gather
from meta_agent.agents.recipe_predict import fit
from meta_agent.agents.recipes import REMEDIES as RULE_REMEDIES
from meta_agent.agents.recipes import NO_SAFE_EDIT, RULES, Change, HarnessFiles, Rule
from meta_agent.agents.swe_recipes import SWE_REMEDIES, SWE_RULES
from meta_agent.agents.code_recipes import CODE_REMEDIES, CODE_RULES
from meta_agent.heldout_stats import HELDOUT_REGRESSION
from meta_agent.live_check import claimed_benefits

TRANSCRIPT = "recipe_agent.json"
CHANGE_TRAILER = "Recipe-Change"
# The digest's failure modes and the rules that work on them, SWE ones included.  A warning or error
# mode that no branch of the round addresses is reported, never dropped.
REMEDIES: dict[str, tuple[str, ...]] = {mode: RULE_REMEDIES.get(mode, ()) + SWE_REMEDIES.get(mode, ())
                                        for mode in {**RULE_REMEDIES, **SWE_REMEDIES}}
REMEDIES |= {mode: REMEDIES.get(mode, ()) + rules for mode, rules in CODE_REMEDIES.items()}
LOG = logging.getLogger(__name__)


def _get(entry: object, name: str) -> object:
    return entry.get(name) if isinstance(entry, Mapping) else getattr(entry, name, None)


def _blocked(change: Change, history: list) -> str | None:
    """Why the history forbids ``change``, or None."""
    for entry in history:
        trailers = _get(entry, "trailers") or {}
        keys = trailers.get(CHANGE_TRAILER, []) if isinstance(trailers, Mapping) else []
        keys = [keys] if isinstance(keys, str) else list(keys)
        branch, status = str(_get(entry, "branch") or ""), _get(entry, "status")
        slug = _get(entry, "slug") or (m.group(1) if (m := re.match(r"iv/r\d+-(.+)$", branch)) else "")
        rules = {k.split(":", 1)[0] for k in keys} | {slug}
        if status == "open" and change.rule in rules:
            return f"{branch} of the same rule is still open"
        if change.key in keys:
            return f"the same change was already tried on {branch} ({status})"
    return None


def _unaddressed(digest: dict, log: list[dict]) -> list[str]:
    """The digest's warning and error failure modes that no branch of this round works on, each with why."""
    branched = {e["rule"] for e in log if e.get("branch")}
    reasons = {e["rule"]: e.get("reason", "") for e in log}
    out = []
    for mode in digest.get("failure_modes") or []:
        if mode.get("severity") not in ("warning", "error"):
            continue
        rules = REMEDIES.get(str(mode.get("name")), ())
        if branched & set(rules):
            continue
        rate = mode.get("rate")
        why = "; ".join(f"{r}: {reasons.get(r, 'not run by this agent')}" for r in rules)
        if not why:
            safe = NO_SAFE_EDIT.get(str(mode.get("name")))
            why = f"no safe edit: {safe}" if safe else "no recipe addresses it"
        line = (f"{mode.get('name')} ({mode.get('severity')}"
                + (f", rate {rate:.3f}" if isinstance(rate, int | float) else "") + f"): {why}")
        if line not in out:  # a mode both the trusted digest and a harness diagnostic report, at the same rate
            out.append(line)
    return out


class RecipeAgent:
    """Deterministic agent: :data:`RULES` over the digest, root causes first, then the strongest signals."""

    name = "recipe"

    def __init__(self, rules: tuple[Rule, ...] = RULES) -> None:
        self.rules = rules

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        """Commit one branch per fired rule (at most ``ctx.max_candidates``); the transcript says why.

        A warning or error failure mode of the digest that no branch addresses is logged as a
        warning and listed under ``unaddressed`` in the transcript, with each rule's reason.
        """
        files = HarnessFiles.read(ctx.repo)
        # the knob recipes aim at what the round's rollouts and exam show (recipe_evidence), not at a seed value
        found = gather(ctx.archive, ctx.round) if "evidence" not in ctx.digest else ctx.digest["evidence"]
        digest = {**ctx.digest, "evidence": found} if found else ctx.digest
        log: list[dict] = []
        fired: list[Change] = []
        unshown: dict[str, list[tuple[str, str]]] = {}  # change key -> predictions left out, with why
        # a SWE round also gets the SWE recipes (meta_agent.agents.swe_recipes); the rest apply to any domain
        for rule in self.rules + (SWE_RULES if ctx.digest.get("domain") == "swe" else ()) \
                + (CODE_RULES if ctx.digest.get("domain") == "code" else ()):
            decision = rule(digest, files)
            if isinstance(decision, str):
                log.append({"rule": getattr(rule, "__name__", str(rule)).replace("_", "-"), "fired": False,
                            "reason": decision})
            elif reason := _blocked(decision, ctx.history):
                log.append({"rule": decision.rule, "fired": False, "reason": reason, "key": decision.key})
            elif reason := refuted.declined(decision, ctx):  # a refuted knob move, back with another value
                log.append({"rule": decision.rule, "fired": False, "reason": reason, "key": decision.key})
            else:
                # promise the gate only what the round's groups can show (recipe_predict), where more remains
                decision.effects, unshown[decision.key] = fit(decision.effects, found or {})
                fired.append(decision)
        # a policy whose exam fell rambles, is cut off and flattens its groups: what else the digest shows is
        # downstream of the fall, so its remedies come first; then causes (a cut-off, unpaid or filtered-out
        # answer makes groups flat and lines missing), then the strongest signal; stable: ties keep rule order
        fell = any(m.get("name") == HELDOUT_REGRESSION for m in ctx.digest.get("failure_modes") or [])
        first = set(RULE_REMEDIES[HELDOUT_REGRESSION]) if fell else set()
        fired.sort(key=lambda c: (c.rule not in first, not c.root_cause, -c.strength))
        proposals: list[Proposal] = []
        taken: dict[str, str] = {}  # path -> rule that edits it this round
        claimed: dict[str, str] = {}  # benefit field -> rule that predicts it this round
        for change in fired:
            entry = {"rule": change.rule, "fired": True, "key": change.key, "strength": round(change.strength, 4)}
            if despite := refuted.new_evidence(change, ctx):
                entry["despite"] = despite
            if unshown.get(change.key):
                entry["unshown"] = [f"{text} ({why})" for text, why in unshown[change.key]]
            shared = sorted(set(change.files) & set(taken))
            both = sorted(claimed_benefits(change.effects) & set(claimed))
            if len(proposals) >= ctx.max_candidates:
                entry["reason"] = f"outranked (max_candidates={ctx.max_candidates})"
            elif shared:
                # two branches of one round editing the same file would conflict when the
                # second merges; the weaker one waits for a later round
                entry["reason"] = f"deferred: {', '.join(shared)} already edited by {taken[shared[0]]} this round"
            elif both:
                # the next round's change in that field could be credited to neither (live_check: shared), and
                # a merge on probation would be reverted for it; the weaker one waits for a later round
                entry["reason"] = (f"deferred: {', '.join(both)} is already the predicted benefit of "
                                   f"{claimed[both[0]]} this round")
            elif isinstance(proposal := self._propose_fired(ctx, change), str):
                entry["reason"] = proposal  # the search agent withheld it (no preview evidence): the next may go
            else:
                proposals.append(proposal)
                taken.update(dict.fromkeys(change.files, change.rule))
                claimed.update(dict.fromkeys(claimed_benefits(change.effects), change.rule))
                entry["branch"] = proposals[-1].branch
            log.append(entry)
        unaddressed = _unaddressed(ctx.digest, log)
        if unaddressed:
            LOG.warning("recipe agent, round %d: %d proposal(s); not addressed: %s", ctx.round, len(proposals),
                        " | ".join(unaddressed))
        ctx.round_dir.mkdir(parents=True, exist_ok=True)
        shown = {k: v for k, v in (found or {}).items() if not k.endswith("_tokens")} | {
            k: len(v) for k, v in (found or {}).items() if k.endswith("_tokens")}  # counts, not every length
        (ctx.round_dir / TRANSCRIPT).write_text(json.dumps({"agent": self.name, "round": ctx.round, "rules": log,
                                                            "unaddressed": unaddressed, "evidence": shown}, indent=2))
        return proposals

    def _propose_fired(self, ctx: AgentContext, change: Change) -> Proposal | str:
        """Commit a fired rule's change as its branch (the search agent first previews it: it may withhold the
        change, and then says why instead)."""
        return self._commit(ctx, change)

    def _commit(self, ctx: AgentContext, change: Change) -> Proposal:
        skill = next((s["name"] for s in ctx.skills if s.get("name") == change.rule), None)
        trailers: dict[str, str | list[str]] = {
            "Hypothesis": change.hypothesis, "Predicted-Effect": change.effects, "Agent": self.name,
            "Trigger": change.trigger, CHANGE_TRAILER: change.key,
        }
        if skill:
            trailers["Skill"] = skill
        wt = ctx.repo.start_intervention(ctx.round, free_branch(ctx.repo, ctx.round, change.rule),
                                         worktree_root=ctx.worktree_root)
        try:
            for rel, text in change.files.items():
                path = Path(wt.path) / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
            ctx.repo.commit(wt, f"{change.subject}\n\n{change.evidence}", trailers)
        finally:
            ctx.repo.remove_worktree(wt, force=True)
        return Proposal(branch=wt.branch, hypothesis=change.hypothesis, predicted_effects=list(change.effects),
                        files_changed=sorted(change.files), skill=skill, agent=self.name)
