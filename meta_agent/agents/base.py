"""The Agent seam: read a round's digest and history, write interventions as git branches.

An agent gets an :class:`AgentContext` and returns one :class:`Proposal` per branch
it created (``[]`` declines the round).  For each intervention it

1. creates the branch: ``wt = ctx.repo.start_intervention(ctx.round, slug, worktree_root=ctx.worktree_root)``,
2. edits harness files in ``wt.path`` (only paths in ``contract.EDITABLE_GLOBS``),
3. commits: ``ctx.repo.commit(wt, subject_and_body, trailers)`` with trailers ``Hypothesis``,
   ``Predicted-Effect`` (one per effect), ``Agent`` and optionally ``Skill``,
4. removes the worktree: ``ctx.repo.remove_worktree(wt)`` (the branch stays).

A ``Predicted-Effect`` reads ``<metric> <increase|decrease|unchanged>[: free text]``.
Metrics in ``meta_agent.gate.GATE_METRICS`` are measured by the backtest gate; any digest field
(e.g. ``truncation_rate``, ``heldout_accuracy``) is a *live* prediction, checked
after the next round trains on the merged harness.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from harness_repo.repo import HarnessRepo
    from rl_backend.archive import Archive


@dataclass
class Proposal:
    """One intervention branch an agent wrote, as the round loop records it."""

    branch: str
    hypothesis: str
    predicted_effects: list[str]
    files_changed: list[str]
    skill: str | None = None
    """Name of the skill this intervention applies, if any."""
    agent: str = ""
    model: str | None = None
    """The LLM behind the proposal (None for deterministic agents)."""
    usage: dict = field(default_factory=dict)
    """Tokens and cost spent on this proposal (LLM agents)."""


@dataclass
class AgentContext:
    """Everything an agent may read or use in one round."""

    round: int
    digest: dict
    """This round's digest (``meta_agent.digest.build_digest``)."""
    digest_markdown: str
    history: list[dict]
    """Past interventions: ``branch``, ``status``, ``trailers`` (dict of lists), ``hypothesis``, ..."""
    skills: list[dict]
    """Skills available to this run (front matter fields: ``name``, ``trigger``, ...)."""
    repo: HarnessRepo
    worktree_root: Path
    """Where intervention worktrees are checked out."""
    round_dir: Path
    """``rounds/<n>/``: agent transcripts go here."""
    max_candidates: int = 2
    """At most this many proposals per round."""
    archive: Archive | None = None
    """The run's trajectory archive (read-only for agents)."""
    preview: Callable[[str], dict] | None = None
    """``preview(branch) -> backtest report``: the branch judged against main, never merged or tagged.
    Built by the loop with the run's sandbox, domain and gate; ``None`` where no preview is offered."""
    generation_preview: Callable[[str, str | None], dict] | None = None
    """``generation_preview(branch, mode) -> dict``: the current policy generates a small batch under the branch's
    knobs and templates and under main's (same tasks, same seed); the mode's symptom rate on each (``main``,
    ``candidate``, lower is better) with a paired ``interval`` (``meta_agent.generation_preview``).  ``None``
    where the round's policy cannot be loaded here (a verl checkpoint)."""


class Agent(Protocol):
    """Writes interventions for one round.

        agent = RecipeAgent()
        proposals = agent.propose(ctx)   # [] = decline
    """

    name: str

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        """Create up to ``ctx.max_candidates`` intervention branches; return one Proposal each."""
        ...


NAME_STOPWORDS = frozenset("a an the of to in on for and as by with is it its that this from when than so be".split())


def change_slug(text: str, words: int = 5) -> str:
    """A branch slug that says what a change does, from its summary or rule.

        change_slug("Read a final \\\\boxed{} answer in the reward")  # -> "read-final-boxed-answer-reward"
    """
    kept = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in NAME_STOPWORDS]
    return "-".join(kept[:words]) or "change"


def free_branch(repo: HarnessRepo, round: int, slug: str) -> str:
    """``iv/r<round>-<slug>``, or with ``-2``, ``-3``... when that name is taken in ``repo``: by a branch of this
    run, one inherited from the parent line (``--from-branch`` clones keep the parent's ``iv/r0-*``), or a
    verdict tag.  The slug part to give :meth:`HarnessRepo.start_intervention`, which refuses a taken name."""
    base, n = slug, 2
    while repo.branch_exists(f"iv/r{round}-{slug}") or repo.tag_exists(f"verdict/iv/r{round}-{slug}"):
        slug, n = f"{base}-{n}", n + 1
    return slug


def unaddressed_modes(rdir: Path) -> list[str]:
    """Why round ``rdir``'s agent left problems without a branch: the digest's warning and error failure modes
    the recipe agent found no rule for (its transcript), and every LLM candidate that ended without a proposal
    (its transcript under ``agent/``: an unreachable endpoint, the step limit, the budget), so a round whose
    agent proposed nothing says why."""
    path = rdir / "recipe_agent.json"
    lines = list(json.loads(path.read_text()).get("unaddressed", [])) if path.exists() else []
    for transcript in sorted((rdir / "agent").glob("*.json")):
        try:
            record = json.loads(transcript.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(record, dict) and record.get("candidate") and not record.get("proposal"):
            lines.append(f"candidate {record.get('candidate')} of {record.get('agent', 'the agent')} "
                         f"({record.get('branch')}) ended without a proposal: {record.get('status')}"
                         + (f": {record['error']}" if record.get("error") else "")
                         + f" (transcript {transcript})")
    return lines
