"""The LLM meta agent: a tool-calling conversation through LiteLLM per candidate intervention.

Any provider LiteLLM knows works: hosted APIs read their keys from the usual
environment variables (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``, ...), and a local
OpenAI-compatible server (vLLM, llama.cpp, ...) is reached with ``api_base``::

    python -m meta_agent --agent llm --model anthropic/claude-sonnet-4-5
    python -m meta_agent --agent llm --model openai/Qwen2.5-7B-Instruct --api-base http://localhost:8000/v1

    agent = LLMAgent("openai/gpt-4o-mini", budget=Budget(BudgetCaps(round_cost_usd=0.5)))
    proposals = agent.propose(ctx)          # ctx: meta_agent.agents.base.AgentContext

Per round, ``ctx.max_candidates`` independent conversations each get a fresh branch
and worktree (later ones are told the earlier hypotheses).  The model reads the
digest, edits files through the tools in ``llm_tools`` and ends with ``submit``;
the agent then commits with the trailers ``Hypothesis``, ``Predicted-Effect``,
``Agent``, ``Model``, ``Tokens`` and ``Cost``.  It never decides its own fate: the
backtest gate judges the branch later.  A candidate that does not submit (step
limit, budget cap, provider failure) leaves no commit; any preview commits it made
are parked under ``refs/agent-drafts/<branch>``.  Every conversation is saved to
``rounds/<n>/agent/<branch>.json``, also when it fails.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable


from harness_repo.contract import EDITABLE_GLOBS
from harness_repo.repo import HarnessError, Worktree
from meta_agent.agents.base import AgentContext, Proposal, change_slug, free_branch
from meta_agent.agents.llm_provider import ProviderError, complete, short_error, usage_of  # noqa: F401 (public here)
from meta_agent.agents.llm_tools import TOOLS, ToolError, Workspace, git_in
from meta_agent.budget import Budget
from meta_agent.digest import TREND_FIELDS
from meta_agent.gate import GATE_METRICS
from meta_agent.run_dir import write_json_atomic
from meta_agent.templates import render
from sandboxes.base import SandboxUnavailable

LOG = logging.getLogger(__name__)
CHARS_PER_TOKEN = 4  # rough, provider-independent estimate used to fit prompts into a token budget
NO_TOOL_CALL = ("Format error: your reply called no tool. Every reply must call one of the tools; "
                "call `submit` when your change is ready.")


def fit_markdown(text: str, max_tokens: int, lead_sections: int = 2) -> str:
    """``text`` cut to about ``max_tokens`` tokens, every heading kept.

    The first ``lead_sections`` sections (title and one-screen summary) stay whole within half
    the budget; the rest share what is left, short sections whole and long ones shortened.
    """
    limit = max_tokens * CHARS_PER_TOKEN
    if len(text) <= limit:
        return text
    sections = [s for s in re.split(r"(?m)^(?=#{1,4} )", text) if s]
    allowance, remaining = {}, limit
    for i in range(min(lead_sections, len(sections))):
        allowance[i] = min(len(sections[i]), max(limit // 2 - (limit - remaining), 0))
        remaining -= allowance[i]
    rest = sorted(range(len(allowance), len(sections)), key=lambda k: len(sections[k]))
    for left, i in zip(range(len(rest), 0, -1), rest):  # short sections stay whole
        allowance[i] = min(len(sections[i]), remaining // left)
        remaining -= allowance[i]
    out = []
    for i, section in enumerate(sections):
        if allowance[i] >= len(section):
            out.append(section)
            continue
        cut = section[:max(allowance[i] - 60, 0)]
        cut = cut[:cut.rfind("\n")] if "\n" in cut else cut
        out.append(f"{cut.rstrip()}\n[... {len(section) - len(cut)} characters of this section omitted]\n\n")
    return "".join(out)


def _within(entries: list[dict], chars: int) -> tuple[list[dict], int]:
    """The leading entries whose text fits in ``chars``; and how many were left out."""
    kept, used = [], 0
    for entry in entries:
        used += len(str(entry))
        if used > chars:
            break
        kept.append(entry)
    return kept, len(entries) - len(kept)


def format_preview(report: dict) -> str:
    """The key figures of a preview backtest report, for the model."""
    lines = [f"preview decision: {report['decision']} (sample {report['sample']['trajectories']} trajectories "
             f"in {report['sample']['groups']} groups; not applied)"]
    lines += [f"- reason: {r}" for r in report.get("reasons", [])]
    for m in report.get("gate", {}).get("metrics", {}).values():
        lines.append(f"- {m['name']}: main {m['main']:.3f} -> candidate {m['candidate']:.3f} "
                     f"(delta {m['delta']:+.3f}, CI [{m['ci_low']:+.3f}, {m['ci_high']:+.3f}])")
    for arm, run in report.get("runs", {}).items():
        if run.get("failure") or run.get("errors"):
            lines.append(f"- {arm}: failure {run.get('failure')!r}, {run.get('errors')} trajectory errors")
    return "\n".join(lines)


@dataclass
class CandidateOutcome:
    """How one candidate conversation ended."""

    branch: str
    status: str  # submitted | step_limit | budget | provider_error | crashed
    transcript: Path
    error: str | None = None
    proposal: Proposal | None = None
    usage: dict = field(default_factory=dict)


class LLMAgent:
    """Writes interventions through a tool-calling LLM (any LiteLLM model string)."""

    name = "llm"

    def __init__(self, model: str, api_base: str | None = None, max_steps: int = 30, budget: Budget | None = None,
                 timeout_s: float = 60, max_retries: int = 3, *, api_key: str | None = None,
                 retry_base_s: float = 2.0, prompt_tokens: int = 8000) -> None:
        """``budget`` is shared with the loop (unlimited if None); previews come from ``AgentContext.preview``."""
        self.model, self.api_base, self.api_key = model, api_base, api_key
        self.max_steps, self.timeout_s = max_steps, timeout_s
        self.max_retries, self.retry_base_s = max_retries, retry_base_s
        self.budget = budget or Budget()
        self.prompt_tokens = prompt_tokens
        self.outcomes: list[CandidateOutcome] = []
        """One entry per candidate of the last ``propose`` call (for progress display)."""

    def propose(self, ctx: AgentContext) -> list[Proposal]:
        """Run up to ``ctx.max_candidates`` conversations; one Proposal per submitted candidate."""
        self.outcomes, proposals = [], []
        self.budget.start_round(ctx.round)  # no-op when the loop already began this round
        for index in range(ctx.max_candidates):
            if not self.budget.llm_allowed():
                LOG.warning("LLM budget reached (%s): no further candidates this round",
                            "; ".join(self.budget.reached()))
                break
            outcome = self._candidate(ctx, index, [p.hypothesis for p in proposals])
            self.outcomes.append(outcome)
            if outcome.proposal:
                proposals.append(outcome.proposal)
            if outcome.status == "provider_error":
                LOG.error("LLM agent: %s; transcript %s", outcome.error, outcome.transcript)
                break  # the next candidate would hit the same endpoint
        return proposals

    # -- one candidate ---------------------------------------------------------------

    def _candidate(self, ctx: AgentContext, index: int, earlier: list[str]) -> CandidateOutcome:
        wt = ctx.repo.start_intervention(ctx.round, self._free_slug(ctx, index), worktree_root=ctx.worktree_root)
        path = ctx.round_dir / "agent" / f"{wt.branch.replace('/', '_')}.json"
        ws = Workspace(ctx.repo, wt, round=ctx.round, digest=ctx.digest, archive=ctx.archive,
                       skills=[str(s.get("name")) for s in ctx.skills], preview=self._previewer(ctx))
        record: dict[str, Any] = {
            "agent": self.name, "model": self.model, "api_base": self.api_base, "round": ctx.round,
            "candidate": index + 1, "branch": wt.branch, "base_commit": wt.base_commit, "status": "running",
            "error": None, "started": time.time(), "calls": [], "events": [], "proposal": None,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost_usd": 0.0},
            "messages": self._opening(ctx, index, earlier),
        }
        outcome = CandidateOutcome(wt.branch, "running", path)
        try:
            outcome.status, outcome.error = self._converse(ws, record, path)
            if ws.submission:
                outcome.proposal = self._commit(ctx, wt, ws, record["usage"])
                record["proposal"] = outcome.proposal.__dict__
                record["branch"] = outcome.branch = outcome.proposal.branch  # renamed from the draft's name
                if path.exists():  # the transcript follows the branch's name
                    path = path.rename(path.with_name(f"{outcome.branch.replace('/', '_')}.json"))
                outcome.transcript = path
        except BaseException as exc:
            outcome.status, outcome.error = "crashed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            ctx.repo.remove_worktree(wt, force=True)
            if outcome.proposal is None:
                self._park_drafts(ctx, wt, record)
            record.update(status=outcome.status, error=outcome.error, finished=time.time())
            write_json_atomic(path, record)
        outcome.usage = dict(record["usage"])
        if outcome.error and outcome.status != "provider_error":
            LOG.warning("LLM candidate %s ended without a proposal: %s", wt.branch, outcome.error)
        return outcome

    def _converse(self, ws: Workspace, record: dict, path: Path) -> tuple[str, str | None]:
        messages: list[dict] = record["messages"]
        for step in range(self.max_steps):
            if not self.budget.llm_allowed():
                return "budget", "LLM budget reached (" + "; ".join(self.budget.reached()) + "): hard stop"
            started = time.time()
            retries: list[dict] = []

            def note_retry(attempt: int, delay: float, exc: Exception) -> None:
                retries.append({"attempt": attempt, "delay_s": delay,
                                "error": f"{type(exc).__name__}: {short_error(exc)}"})
                LOG.warning("LLM call failed (%s), retry %d in %.1fs", type(exc).__name__, attempt, delay)

            try:
                response = complete(self.model, messages, tools=TOOLS, api_base=self.api_base, api_key=self.api_key,
                                    timeout_s=self.timeout_s, max_retries=self.max_retries,
                                    retry_base_s=self.retry_base_s, on_retry=note_retry)
            except ProviderError as exc:
                record["events"].append({"step": step, "retries": retries, "error": str(exc)})
                return "provider_error", str(exc)
            used = usage_of(response)
            self.budget.charge_llm(used["total_tokens"], used["cost_usd"])
            for key in record["usage"]:
                record["usage"][key] += used[key]
            record["calls"].append({"step": step, **used, "retries": retries,
                                    "seconds": round(time.time() - started, 3)})
            # written before the tools run: a kill during a long tool call (a preview backtest) must not leave
            # the transcript one call behind what the budget already charged
            write_json_atomic(path, record)
            choices = getattr(response, "choices", None) or []
            self._act(ws, choices[0].message if choices else None, messages, step)
            write_json_atomic(path, record)  # a crash mid-conversation still leaves the transcript
            if ws.submission:
                return "submitted", None
        return "step_limit", f"no submit within {self.max_steps} steps"

    def _act(self, ws: Workspace, message: Any, messages: list[dict], step: int) -> None:
        calls = list(getattr(message, "tool_calls", None) or [])
        assistant: dict[str, Any] = {"role": "assistant", "content": getattr(message, "content", None)}
        if calls:
            assistant["tool_calls"] = [{"id": c.id or f"call_{step}_{k}", "type": "function",
                                        "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                       for k, c in enumerate(calls)]
        messages.append(assistant)
        if not calls:
            messages.append({"role": "user", "content": NO_TOOL_CALL})
            return
        left = self.max_steps - step - 1
        for call in assistant["tool_calls"]:
            result = ws.call(call["function"]["name"], call["function"]["arguments"])
            if left <= 2 and not ws.submission:
                result += f"\n\n[{left} replies left: call submit soon]"
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
            if ws.submission:
                break

    def _commit(self, ctx: AgentContext, wt: Worktree, ws: Workspace, usage: dict) -> Proposal:
        sub = ws.submission
        assert sub is not None
        trailers: dict[str, Any] = {"Hypothesis": sub.hypothesis, "Predicted-Effect": sub.predicted_effects,
                                    "Agent": self.name, "Model": self.model, "Skill": sub.skill,
                                    "Trigger": sub.trigger, "Tokens": str(usage["total_tokens"]),
                                    "Cost": f"{usage['cost_usd']:.6f}"}
        message = f"{sub.summary}\n\n{sub.hypothesis}"
        if git_in(wt.path, "status", "--porcelain"):
            ctx.repo.commit(wt, message, trailers)
        else:  # everything was committed by a preview: an empty commit carries the proposal's trailers
            from harness_repo.trailers import format_trailers  # noqa: PLC0415

            git_in(wt.path, "commit", "-q", "--no-verify", "--allow-empty", "-m",
                   f"{message}\n\n{format_trailers(trailers)}")
        branch = f"iv/r{ctx.round}-{free_branch(ctx.repo, ctx.round, change_slug(sub.summary))}"
        git_in(ctx.repo.path, "branch", "-m", wt.branch, branch)  # named from the change, never a counter
        return Proposal(branch=branch, hypothesis=sub.hypothesis, predicted_effects=sub.predicted_effects,
                        files_changed=sub.files_changed, skill=sub.skill, agent=self.name, model=self.model,
                        usage={"tokens": usage["total_tokens"], "cost_usd": usage["cost_usd"],
                               "prompt_tokens": usage["prompt_tokens"],
                               "completion_tokens": usage["completion_tokens"]})

    def _park_drafts(self, ctx: AgentContext, wt: Worktree, record: dict) -> None:
        """Move unsubmitted preview commits off the branch (kept under refs/agent-drafts/), so the loop skips it."""
        head = ctx.repo.head(f"refs/heads/{wt.branch}")
        if head != wt.base_commit:
            git_in(ctx.repo.path, "update-ref", f"refs/agent-drafts/{wt.branch}", head)
            git_in(ctx.repo.path, "update-ref", f"refs/heads/{wt.branch}", wt.base_commit, head)
            record["events"].append({"drafts": f"refs/agent-drafts/{wt.branch}", "commit": head})

    # -- prompts, previews, names ----------------------------------------------------------

    def _opening(self, ctx: AgentContext, index: int, earlier: list[str]) -> list[dict]:
        tools = [{"name": t["function"]["name"], "description": t["function"]["description"]} for t in TOOLS]
        system = render("agent_system.md.j2", domain=ctx.digest.get("domain", "unknown"), editable_globs=EDITABLE_GLOBS,
                        tools=tools, max_steps=self.max_steps)
        chars = self.prompt_tokens * CHARS_PER_TOKEN
        history = sorted(ctx.history, key=lambda h: -int(h.get("round", 0) or 0))
        history, history_omitted = _within([{"branch": h.get("branch", "?"), "status": h.get("status", "?"),
                                             "hypothesis": h.get("hypothesis") or "(none)",
                                             "predicted_effects": h.get("predicted_effects") or [],
                                             "verdict": h.get("verdict")} for h in history], chars // 4)
        domain = ctx.digest.get("domain")
        skills = sorted(ctx.skills, key=lambda s: domain not in (s.get("domains") or []))
        skills, skills_omitted = _within([{"name": s.get("name", "?"), "trigger": s.get("trigger", "manual"),
                                           "hits": s.get("hits", 0), "misses": s.get("misses", 0),
                                           "summary": s.get("summary", "")} for s in skills], chars // 8)
        user = render("agent_digest.md.j2", round=ctx.round, candidate=index + 1, candidates=ctx.max_candidates,
                      digest_markdown=fit_markdown(ctx.digest_markdown, self.prompt_tokens * 5 // 8),
                      history=history, history_omitted=history_omitted, skills=skills,
                      skills_omitted=skills_omitted, earlier=earlier)
        user += "\n" + render("agent_proposal.md.j2", gate_metrics=GATE_METRICS, digest_metrics=TREND_FIELDS,
                              max_steps=self.max_steps, preview=True)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _previewer(self, ctx: AgentContext) -> Callable[[Worktree], str]:
        def preview(wt: Worktree) -> str:
            if ctx.preview is None:
                raise ToolError("no backtest preview is offered in this run; submit when ready")
            try:
                return format_preview(ctx.preview(wt.branch))
            except (SandboxUnavailable, HarnessError, ValueError) as exc:
                raise ToolError(f"backtest preview failed: {exc}") from None

        return preview

    def _free_slug(self, ctx: AgentContext, index: int) -> str:
        # a draft's name until the submission says what it changes (then ``_commit`` renames it)
        return free_branch(ctx.repo, ctx.round, f"draft-{index + 1}")

