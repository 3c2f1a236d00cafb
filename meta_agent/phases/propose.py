"""The propose phase: the agent reads the digest and commits candidate interventions on branches.

A resumed phase keeps the branches already committed for this round, parks a stopped agent's unfinished work and
asks the agent only for the rest."""

from __future__ import annotations

import json
from pathlib import Path

from harness_repo.failpoints import failpoint
from meta_agent.agents.base import AgentContext, Proposal, unaddressed_modes
from meta_agent.backtest import make_preview
from meta_agent.generation_preview import for_round as generation_preview_for
from meta_agent.phases.parts import RoundParts
from meta_agent.phases.refused import pretrain_branches
from meta_agent.run.unfinished import park_unfinished
from meta_agent.run_dir import write_json_atomic
from meta_agent.skills import load_skills


class ProposePhase(RoundParts):
    def phase_propose(self, n: int, rdir: Path, info: dict) -> None:
        """Ask for round ``n``'s proposals and name the digest's failure modes none of them addresses."""
        self._propose(n, rdir, info)
        info["unaddressed"] = unaddressed_modes(rdir)
        for line in info["unaddressed"]:
            self.events.message(f"not addressed: {line}")

    def _propose(self, n: int, rdir: Path, info: dict) -> None:
        if (rdir / "proposals.json").exists():  # the agent had finished before the stop
            return
        # resumed inside a propose phase: keep the proposals committed, park a stopped agent's unfinished work
        # (a branch without the proposal commit is not a proposal) and ask only for the rest
        parked = park_unfinished(self.repo, n)
        if parked:
            self.events.message(f"resuming: {len(parked)} unfinished candidate(s) of round {n} kept as drafts "
                                f"({', '.join(parked)}), not judged")
        before = set(pretrain_branches(info))  # judged before the round trained, not the gate's proposals
        existing = [iv for iv in self.repo.interventions() if iv.round == n and iv.branch not in before]
        wanted = max(self.candidates - len(existing), 0)
        if existing:
            self.events.message(f"resuming: {len(existing)} proposal(s) of round {n} already committed; "
                                f"asking {self.agent.name} for {wanted} more")
        digest = json.loads((rdir / "digest.json").read_text())
        history = [iv.__dict__ for iv in self.repo.interventions()]
        ctx = AgentContext(round=n, digest=digest, digest_markdown=(rdir / "digest.md").read_text(),
                           history=history, skills=load_skills(self.domain.name), repo=self.repo,
                           worktree_root=self.run.path / "worktrees",
                           max_candidates=wanted, round_dir=rdir, archive=self.archive,
                           generation_preview=generation_preview_for(self, n),  # knob/prompt edits (issue 44)
                           preview=make_preview(self.repo, self.archive, self.sandbox, rdir / "agent" / "previews",
                                                domain=self.domain, thresholds=self.thresholds,
                                                settings=self.settings))
        proposals = self.agent.propose(ctx) if wanted else []
        kept = [Proposal(iv.branch, iv.hypothesis, iv.predicted_effects, self.repo.changed_paths(iv.branch),
                         iv.skill, (iv.trailers.get("Agent") or [""])[0]) for iv in existing]
        write_json_atomic(rdir / "proposals.json", [p.__dict__ for p in kept + proposals])
        failpoint("propose.proposals_written")
        if self.candidates == 0:
            self.events.message("no interventions asked for (--candidates 0): the harness stays as it is")
        else:
            self.events.message(f"{self.agent.name} proposed {len(proposals)} intervention(s)")
