"""The random-edit baseline of the repair benchmark: random edits drawn from the agents' own edit vocabulary.

(Called "best-of-n" until 2026-12-06: it keeps every edit it draws, so it is no best-of-N; that baseline draws
N and keeps the best preview, ``meta_agent.agents.search``.)

Every recipe of ``meta_agent.agents.recipes`` is one edit the agents know (a reward that applies the
verifier's rules, a prompt line, a knob, a filter...).  This agent ignores what the digest says: it asks
every rule for its change on a digest in which every signal fires, and commits ``max_candidates`` of them
drawn at random (keyed by the benchmark cell, the run seed and the round: each flaw and seed draws
its own edits, and the same cell draws the same edits again), each with the rule's own hypothesis and predictions, so
the same gate judges them as it judges the recipe agent's.  As many candidates per round as the agents get.

    agent = RandomEditAgent(seed=0, cell="short-budget")
    proposals = agent.propose(ctx)     # ctx: meta_agent.agents.base.AgentContext
"""

from __future__ import annotations

import json
import random

from meta_agent.agents.base import AgentContext, Proposal
from meta_agent.agents.recipe import TRANSCRIPT, RecipeAgent, _blocked
from meta_agent.agents.recipes import RULES, Change, HarnessFiles
from meta_agent.agents.search import SearchAgent, family_of


def everything_fires(digest: dict, files: HarnessFiles) -> dict:
    """A digest in which every recipe's signal is past its threshold (the edit vocabulary, not evidence)."""
    tasks = [t.get("name") for t in files.config.get("tasks", []) if isinstance(t, dict)]
    return {
        "round": digest.get("round"), "domain": digest.get("domain") or files.config.get("domain"),
        "miss_rate": 1.0, "hack_rate": 1.0, "zero_variance_share": 0.6, "truncation_rate": 1.0,
        "no_final_answer_rate": 1.0, "kept_share": 0.0,
        "disagreements": {"miss": [{"response": "\\boxed{1}"}], "hack": [{"response": "Answer: 2/2"}]},
        "per_task": {f"reasoning_gym/{name}": {"accuracy": 1.0, "count": 99} for name in tasks},
        "trends": {"reward_mean": {"delta": 1.0}, "heldout_accuracy": {"delta": -1.0}}, "heldout": {},
        "failure_modes": [{"name": "heldout_regression", "source": "trusted", "severity": "error", "rate": 1.0,
                           "message": "every signal fires", "examples": []}],
    }


class RandomEditAgent(RecipeAgent):
    """``max_candidates`` edits of the recipe vocabulary at random, never two on one file in a round."""

    name = "random-edit"

    def __init__(self, seed: int = 0, cell: str = "") -> None:
        """``cell`` names the benchmark cell (the flaw): without it every flaw drew the same edits."""
        super().__init__(RULES)
        self.seed = seed
        self.cell = cell

    def draw_key(self, round: int) -> str:
        """The random draw's seed: a string, which ``random`` hashes the same way in every process."""
        return f"{self.name}/{self.cell}/seed{self.seed}/round{round}"

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        """Commit the drawn edits as branches; the transcript lists the vocabulary and what was drawn."""
        files = HarnessFiles.read(ctx.repo)
        digest = everything_fires(ctx.digest, files)
        vocabulary: list[Change] = []
        skipped = {}
        for rule in self.rules:
            decision = rule(digest, files)
            if isinstance(decision, str):
                skipped[rule.__name__.replace("_", "-")] = decision
            elif reason := _blocked(decision, ctx.history):
                skipped[decision.rule] = reason
            else:
                vocabulary.append(decision)
        random.Random(self.draw_key(ctx.round)).shuffle(vocabulary)
        proposals, taken = [], set()
        for change in vocabulary:
            if len(proposals) >= ctx.max_candidates:
                break
            if taken & set(change.files):
                continue
            proposals.append(self._commit(ctx, change))
            taken |= set(change.files)
        ctx.round_dir.mkdir(parents=True, exist_ok=True)
        (ctx.round_dir / TRANSCRIPT).write_text(json.dumps({
            "agent": self.name, "round": ctx.round, "draw_key": self.draw_key(ctx.round),
            "vocabulary": [c.rule for c in vocabulary],
            "drawn": [p.branch for p in proposals], "not_available": skipped}, indent=2))
        return proposals


class BestOfNAgent(SearchAgent):
    """The true best-of-N baseline: N random edits of the recipe vocabulary (drawn as ``RandomEditAgent`` draws),
    each previewed (``SearchAgent.best_previewed``), the best kept, up to ``max_candidates``."""

    name = "best-of-n"

    def __init__(self, seed: int, cell: str = "", n: int = 4) -> None:
        super().__init__()
        self.seed, self.cell, self.n = seed, cell, n

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        files = HarnessFiles.read(ctx.repo)
        digest = everything_fires(ctx.digest, files)
        drawn = [c for rule in RULES if isinstance(c := rule(digest, files), Change)]
        random.Random(f"best-of-n/{self.cell}/{self.seed}/{ctx.round}").shuffle(drawn)
        return self.best_previewed(ctx, [(family_of(c), c) for c in drawn[:self.n]], ctx.max_candidates)
