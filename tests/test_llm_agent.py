"""The LLM agent driving the real LiteLLM client over HTTP against a scripted local provider.

Real git (``HarnessRepo.create``), a real Parquet archive of synthetic math rollouts, a real
digest; only the model is scripted (``tests/llm_server.py``).
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
from pathlib import Path

import pytest
from llm_server import ScriptedLLMServer, delayed, status, text, tool_call, tool_calls

from domains.math import MathDomain
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.base import unaddressed_modes
from meta_agent.agents.llm import LLMAgent, fit_markdown
from meta_agent.agents.llm_tools import Workspace
from meta_agent.backtest import make_preview
from meta_agent.budget import Budget, BudgetCaps
from meta_agent.config import BacktestSettings, GateThresholds
from meta_agent.digest import build_digest, render_digest_markdown
from rl_backend.archive import Archive
from rl_backend.synthetic import synthetic_math_rows

MODEL = "openai/gpt-4o-mini"  # priced in LiteLLM's bundled cost map, so Cost is non-zero
OLD_LINE = 'ANSWER_LINE = re.compile('
NEW_REWARD_NOTE = "# boxed answers are read as well (intervention)\n"
EFFECTS = ["miss_rate decrease: boxed answers are paid", "reward_auc increase"]
SUBMIT = {"hypothesis": "Correct boxed answers get reward 0; reading \\boxed{} fixes the misses.",
          "predicted_effects": EFFECTS, "summary": "Reward reads boxed answers", "trigger": "miss_rate > 0.2"}


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], dict, str]:
    """Round-1 rollouts (seed reward: only 'Answer:' lines pay), archived once, and their digest."""
    rows = synthetic_math_rows("t", 1, n_groups=12, group_size=4, seed=3, verify=MathDomain().verify)
    for row in rows:
        row["reward"] = 1.0 if json.loads(row["reward_info"])["behaviour"] == "right_answer_line" else 0.0
    parsed = [r | {k: json.loads(r[k]) for k in ("ground_truth", "reward_info", "verifier_info", "messages")}
              for r in rows]
    digest = build_digest(1, parsed, metrics=[], findings=[], eval={"heldout_accuracy": 0.4}, previous=[])
    digest["domain"] = "math"
    return rows, digest, render_digest_markdown(digest)


@pytest.fixture()
def ctx(tmp_path: Path, archived: tuple[list[dict], dict, str]) -> AgentContext:
    rows, digest, markdown = archived
    run = tmp_path / "run"
    Archive(run / "archive").append_round("t", 1, rows)
    repo = HarnessRepo.create(run / "harness", "math")
    return AgentContext(round=1, digest=digest, digest_markdown=markdown, history=[], skills=[], repo=repo,
                        worktree_root=run / "worktrees", round_dir=run / "rounds" / "1", max_candidates=1,
                        archive=Archive(run / "archive"))


@pytest.fixture()
def server() -> ScriptedLLMServer:
    with ScriptedLLMServer() as s:
        yield s


def agent(server: ScriptedLLMServer, **kw: object) -> LLMAgent:
    kw.setdefault("retry_base_s", 0.01)
    return LLMAgent(MODEL, api_base=server.api_base, api_key="test", **kw)  # type: ignore[arg-type]


def transcript(ctx: AgentContext, branch: str) -> dict:
    return json.loads((ctx.round_dir / "agent" / f"{branch.replace('/', '_')}.json").read_text())


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def assert_no_trace(ctx: AgentContext, main_before: str, branch: str) -> None:
    """No commit anywhere: main unchanged, the branch still at its base, its worktree gone."""
    assert ctx.repo.head("main") == main_before
    assert ctx.repo.head(f"refs/heads/{branch}") == main_before
    assert not (ctx.worktree_root / branch.replace("/", "_")).exists()
    status = subprocess.run(["git", "-C", str(ctx.repo.path), "status", "--porcelain"], capture_output=True,
                            text=True, check=True)
    assert status.stdout == ""


def test_full_proposal_commits_the_edit_with_trailers_and_saves_the_transcript(
        ctx: AgentContext, server: ScriptedLLMServer) -> None:
    server.script(
        tool_call("list_files", {}),
        tool_calls(("read_file", {"path": "reward.py"}),
                   ("query_trajectories", {"kind": "disagreement", "limit": 2})),
        tool_call("replace_text", {"path": "reward.py", "old": OLD_LINE, "new": NEW_REWARD_NOTE + OLD_LINE}),
        tool_call("submit", SUBMIT, usage={"prompt_tokens": 1000, "completion_tokens": 50}),
    )
    main_before = ctx.repo.head("main")
    budget = Budget()
    llm = agent(server, budget=budget)
    proposals = llm.propose(ctx)

    assert [p.branch for p in proposals] == ["iv/r1-reward-reads-boxed-answers"]  # named from the change
    proposal = proposals[0]
    assert proposal.agent == "llm" and proposal.model == MODEL
    assert proposal.files_changed == ["reward.py"] and proposal.predicted_effects == EFFECTS
    assert proposal.usage["tokens"] == 3 * 120 + 1050 == budget.run_tokens
    assert proposal.usage["cost_usd"] > 0 and proposal.usage["cost_usd"] == pytest.approx(budget.run_cost_usd)

    iv = ctx.repo.intervention(proposal.branch)
    assert iv.trailers["Agent"] == ["llm"] and iv.trailers["Model"] == [MODEL]
    assert iv.trailers["Tokens"] == ["1410"] and float(iv.trailers["Cost"][0]) > 0
    assert iv.predicted_effects == EFFECTS and iv.trailers["Trigger"] == ["miss_rate > 0.2"]
    assert iv.subject == "Reward reads boxed answers" and iv.hypothesis.startswith("Correct boxed")
    assert NEW_REWARD_NOTE in ctx.repo.read_file(proposal.branch, "reward.py")
    assert NEW_REWARD_NOTE not in ctx.repo.read_file("main", "reward.py")
    assert ctx.repo.head("main") == main_before and ctx.repo.contract_violations(proposal.branch) == []
    assert not (ctx.worktree_root / "iv_r1-draft-1").exists()

    # what the model was given: the tools, the contract, the digest, then real tool results
    first = server.requests[0]
    assert first["model"] == "gpt-4o-mini" and len(first["tools"]) == 8
    assert "prompts/*.j2" in first["messages"][0]["content"]
    assert "Round 1 rollout digest" in first["messages"][1]["content"]
    listing, reward_src, trajectories = tool_results(server.requests[2])
    assert "reward.py" in listing and "editable" in listing
    assert "def compute_score" in reward_src
    cards = json.loads(trajectories.split("\n", 1)[1])
    assert len(cards) == 2 and all((c["reward"] >= 0.5) != (c["verified"] >= 0.5) for c in cards)

    saved = transcript(ctx, proposal.branch)
    assert saved["status"] == "submitted" and saved["error"] is None and len(saved["calls"]) == 4
    assert saved["proposal"]["branch"] == proposal.branch and saved["usage"]["total_tokens"] == 1410
    assert [m["role"] for m in saved["messages"]].count("tool") == 5
    assert llm.outcomes[0].status == "submitted"


def test_writes_outside_the_worktree_or_the_contract_are_refused_and_leave_no_trace(
        ctx: AgentContext, server: ScriptedLLMServer, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    server.script(
        tool_call("write_file", {"path": "../x", "content": "escaped"}),
        tool_call("write_file", {"path": str(outside), "content": "escaped"}),
        tool_call("write_file", {"path": "setup.py", "content": "import os"}),
        tool_call("replace_text", {"path": "../../harness/reward.py", "old": "def", "new": "xdef"}),
        tool_call("write_file", {"path": ".git/hooks/post-commit", "content": "#!/bin/sh\n"}),
        tool_call("read_file", {"path": "../harness/.git/config"}),
        tool_call("submit", SUBMIT),
    )
    main_before = ctx.repo.head("main")
    proposals = agent(server, max_steps=7).propose(ctx)

    assert proposals == []
    results = [tool_results(r)[-1] for r in server.requests[1:]] + [
        transcript(ctx, "iv/r1-draft-1")["messages"][-1]["content"]]
    assert "../x resolves outside your worktree" in results[0]
    assert "is absolute" in results[1]
    assert "setup.py is outside the harness contract" in results[2]
    assert "resolves outside your worktree" in results[3]
    assert "not a harness file" in results[4]
    assert "resolves outside your worktree" in results[5]
    assert "not submitted" in results[6] and "nothing changed" in results[6]
    assert all(r.startswith("Error: ") for r in results)
    assert not outside.exists() and not (ctx.worktree_root / "x").exists()
    assert not (ctx.repo.path / ".git" / "hooks" / "post-commit").exists()
    assert "xdef" not in (ctx.repo.path / "reward.py").read_text()
    assert_no_trace(ctx, main_before, "iv/r1-draft-1")
    assert transcript(ctx, "iv/r1-draft-1")["status"] == "step_limit"


def test_malformed_calls_get_format_errors_the_model_can_correct(
        ctx: AgentContext, server: ScriptedLLMServer) -> None:
    diag = "def diagnose(rollouts):\n    return []\n"
    server.script(
        tool_call("write_file", '{"path": "diagnostics/boxed.py", "content": '),  # cut-off JSON
        tool_call("delete_file", {"path": "reward.py"}),
        tool_call("write_file", {"path": "diagnostics/boxed.py"}),
        text("I will now write the diagnostic."),
        tool_call("write_file", {"path": "diagnostics/boxed.py", "content": diag}),
        tool_call("submit", SUBMIT | {"predicted_effects": ["accuracy goes up"]}),
        tool_call("submit", SUBMIT | {"predicted_effects": ["reward_auc unchanged"]}),
    )
    proposals = agent(server).propose(ctx)

    assert len(proposals) == 1 and proposals[0].files_changed == ["diagnostics/boxed.py"]
    assert ctx.repo.read_file(proposals[0].branch, "diagnostics/boxed.py") == diag
    assert ctx.repo.intervention(proposals[0].branch).predicted_effects == ["reward_auc unchanged"]
    answers = [r["messages"][-1]["content"] for r in server.requests[1:]]
    assert answers[0].startswith("Format error: the arguments of write_file are not valid JSON")
    assert answers[1].startswith("Format error: there is no tool 'delete_file'")
    assert answers[2].startswith("Format error: write_file needs") and "missing ['content']" in answers[2]
    assert answers[3].startswith("Format error: your reply called no tool")
    assert answers[4] == f"wrote {len(diag)} characters to diagnostics/boxed.py"
    assert "not submitted" in answers[5] and "'accuracy goes up' is not '<metric>" in answers[5]
    # the malformed call went back to the provider as it was sent, and the conversation stayed valid
    assert server.requests[1]["messages"][2]["tool_calls"][0]["function"]["arguments"].endswith(": ")
    assert transcript(ctx, proposals[0].branch)["status"] == "submitted"


def test_rate_limits_and_timeouts_are_retried(ctx: AgentContext, server: ScriptedLLMServer) -> None:
    write = tool_call("write_file", {"path": "JOURNAL.md", "content": "# Journal\n\nround 1\n"})
    submit = tool_call("submit", SUBMIT | {"predicted_effects": ["mean_reward unchanged"]})
    server.script(status(429), status(429), write, delayed(submit, 3.0), submit)
    proposals = agent(server, timeout_s=0.5, max_retries=2).propose(ctx)

    assert len(proposals) == 1 and proposals[0].files_changed == ["JOURNAL.md"]
    assert len(server.requests) == 5 and server.pending == 0
    calls = transcript(ctx, proposals[0].branch)["calls"]
    assert len(calls) == 2
    assert [r["error"].split(":")[0] for r in calls[0]["retries"]] == ["RateLimitError", "RateLimitError"]
    assert [r["error"].split(":")[0] for r in calls[1]["retries"]] == ["Timeout"]
    assert [r["delay_s"] for r in calls[0]["retries"]] == [0.01, 0.02]  # exponential backoff


def test_unreachable_endpoint_ends_the_round_without_a_proposal(
        ctx: AgentContext, caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx.max_candidates = 2
    main_before = ctx.repo.head("main")
    llm = LLMAgent(MODEL, api_base=f"http://127.0.0.1:{port}/v1", api_key="test", max_retries=1, retry_base_s=0.01)
    with caplog.at_level(logging.WARNING, logger="meta_agent.agents.llm"):
        proposals = llm.propose(ctx)

    assert proposals == []
    assert [o.status for o in llm.outcomes] == ["provider_error"]  # the second candidate is not tried
    assert f"127.0.0.1:{port}" in llm.outcomes[0].error and "after 2 attempt(s)" in llm.outcomes[0].error
    assert any(r.levelno == logging.ERROR and f"127.0.0.1:{port}" in r.getMessage() for r in caplog.records)
    assert_no_trace(ctx, main_before, "iv/r1-draft-1")
    assert [iv.branch for iv in ctx.repo.interventions()] == ["iv/r1-draft-1"]
    assert transcript(ctx, "iv/r1-draft-1")["status"] == "provider_error"
    # what the round prints and records under "not addressed": why nothing was proposed
    (said,) = unaddressed_modes(ctx.round_dir)
    assert said.startswith("candidate 1 of llm (iv/r1-draft-1) ended without a proposal: provider_error: ")
    assert f"127.0.0.1:{port}" in said and "iv_r1-draft-1.json" in said


def test_bad_key_is_not_retried_and_says_what_to_fix(ctx: AgentContext, server: ScriptedLLMServer) -> None:
    server.script(status(401, "Incorrect API key provided"))
    llm = agent(server)
    assert llm.propose(ctx) == []
    assert len(server.requests) == 1
    assert "authentication failed" in llm.outcomes[0].error and "Incorrect API key" in llm.outcomes[0].error


def test_a_model_that_never_submits_stops_at_the_step_limit_without_a_commit(
        ctx: AgentContext, server: ScriptedLLMServer) -> None:
    server.default = tool_call("write_file", {"path": "prompts/user.j2", "content": "{{ question }}\n"})
    main_before = ctx.repo.head("main")
    llm = agent(server, max_steps=4)
    assert llm.propose(ctx) == []

    assert len(server.requests) == 4
    saved = transcript(ctx, "iv/r1-draft-1")
    assert saved["status"] == "step_limit" and "no submit within 4 steps" in saved["error"]
    assert "[1 replies left: call submit soon]" in saved["messages"][-3]["content"]
    assert_no_trace(ctx, main_before, "iv/r1-draft-1")


def test_budget_overrun_is_a_hard_stop(ctx: AgentContext, server: ScriptedLLMServer) -> None:
    ctx.max_candidates = 2
    server.script(tool_call("write_file", {"path": "JOURNAL.md", "content": "x\n"},
                            usage={"prompt_tokens": 550, "completion_tokens": 50}),
                  tool_call("submit", SUBMIT))
    budget = Budget(BudgetCaps(round_tokens=500))
    budget.start_round(1)
    main_before = ctx.repo.head("main")
    llm = agent(server, budget=budget)
    assert llm.propose(ctx) == []

    assert len(server.requests) == 1 and server.pending == 1
    assert [o.status for o in llm.outcomes] == ["budget"]
    assert "round_tokens: spent 600 of 500" in llm.outcomes[0].error
    assert budget.round_tokens == 600 and not budget.llm_allowed()
    assert [iv.branch for iv in ctx.repo.interventions()] == ["iv/r1-draft-1"]
    assert_no_trace(ctx, main_before, "iv/r1-draft-1")
    assert transcript(ctx, "iv/r1-draft-1")["usage"]["total_tokens"] == 600


def test_later_candidates_see_earlier_hypotheses_and_get_their_own_branch(
        ctx: AgentContext, server: ScriptedLLMServer) -> None:
    ctx.max_candidates = 2
    server.script(
        tool_call("write_file", {"path": "JOURNAL.md", "content": "a\n"}), tool_call("submit", SUBMIT),
        tool_call("write_file", {"path": "filters.py", "content": "def keep_group(g):\n    return True\n"}),
        tool_call("submit", SUBMIT | {"hypothesis": "Flat groups carry no signal."}),
    )
    proposals = agent(server).propose(ctx)
    assert [p.branch for p in proposals] == ["iv/r1-reward-reads-boxed-answers", "iv/r1-reward-reads-boxed-answers-2"]
    assert [p.files_changed for p in proposals] == [["JOURNAL.md"], ["filters.py"]]
    second_prompt = server.requests[2]["messages"][1]["content"]
    assert "Already proposed this round" in second_prompt and SUBMIT["hypothesis"] in second_prompt
    assert "Already proposed" not in server.requests[0]["messages"][1]["content"]


def test_digest_is_fitted_into_the_token_budget_keeping_every_heading() -> None:
    text = "# Digest\n\nshort intro\n\n## Failure modes\n\n" + "x" * 9000 + "\n\n## Trends\n\nup\n"
    fitted = fit_markdown(text, 500)
    assert len(fitted) <= 500 * 4 + 100
    assert "## Failure modes" in fitted and "## Trends\n\nup" in fitted and "short intro" in fitted
    assert "characters of this section omitted" in fitted
    assert fit_markdown("tiny", 500) == "tiny"


@pytest.mark.docker
def test_backtest_preview_reports_gate_figures_without_merging(
        ctx: AgentContext, server: ScriptedLLMServer, docker_sandbox) -> None:
    boxed = ("def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
             "    import re\n    m = re.findall(r'\\\\boxed\\{([^}]*)\\}|Answer:\\s*(\\S+)', solution_str or '')\n"
             "    got = [a or b for a, b in m]\n"
             "    return 1.0 if got and got[-1].strip() == str(ground_truth['answer']) else 0.0\n")
    server.script(tool_call("write_file", {"path": "reward.py", "content": boxed}),
                  tool_call("backtest_preview", {}),
                  tool_call("submit", SUBMIT))
    main_before = ctx.repo.head("main")
    # the preview the loop builds: the run's gate on a small sample, never merging
    ctx.preview = make_preview(ctx.repo, ctx.archive, docker_sandbox, ctx.round_dir / "agent" / "previews",
                               domain=MathDomain(), thresholds=GateThresholds(), settings=BacktestSettings())
    proposals = agent(server).propose(ctx)

    preview = tool_results(server.requests[2])[-1]
    assert preview.startswith("preview decision: ") and "not applied" in preview
    assert "miss_rate: main" in preview and "reward_auc: main" in preview
    assert len(proposals) == 1
    iv = ctx.repo.intervention(proposals[0].branch)
    assert iv.status == "open" and iv.verdict is None  # previewed, never merged or tagged
    assert ctx.repo.head("main") == main_before
    assert iv.trailers["Agent"] == ["llm"] and iv.predicted_effects == EFFECTS
    assert ctx.repo.read_file(iv.branch, "reward.py") == boxed
    log = [c["subject"] for c in ctx.repo.log(iv.branch, n=3)]
    assert log[:2] == ["Reward reads boxed answers", "WIP: backtest preview"]


def test_trajectory_queries_follow_the_digest_and_never_show_the_held_out_split(
        ctx: AgentContext, archived: tuple[list[dict], dict, str]) -> None:
    rows = archived[0]
    heldout = [r | {"traj_id": f"h-{r['traj_id']}", "split": "heldout", "truncated": True} for r in rows[:8]]
    Archive(ctx.round_dir.parents[1] / "archive").append_round("t", 1, heldout)
    wt = ctx.repo.start_intervention(1, "query", worktree_root=ctx.worktree_root)
    ws = Workspace(ctx.repo, wt, round=1, digest=ctx.digest, archive=ctx.archive)

    def query(**args: object) -> tuple[int, list[dict]]:
        header, body = ws.call("query_trajectories", json.dumps(args)).split("\n", 1)
        return int(header.split()[0]), json.loads(body)

    n_truncated, cards = query(kind="failure", failure_mode="truncation", limit=20)
    assert n_truncated == sum(bool(r["truncated"]) for r in rows) > 0
    assert {(bool(c["truncated"]), c["traj_id"].startswith("h-")) for c in cards} == {(True, False)}
    n_misses, cards = query(kind="failure", failure_mode="reward_misses", limit=3)
    assert len(cards) == 3 and all(c["reward"] == 0.0 and c["verified"] == 1.0 for c in cards)
    assert n_misses == round(ctx.digest["miss_rate"] * sum(r["verified"] >= 0.5 for r in rows))
    n_all, cards = query(kind="random", limit=50)
    assert n_all == len(rows) and len(cards) == 20  # the limit is clamped
    assert not any(c["traj_id"].startswith("h-") for c in cards)
    assert "response" in cards[0] and "verified" in cards[0] and "ground_truth" in cards[0]
    unknown = ws.call("query_trajectories", '{"kind": "failure", "failure_mode": "typos"}')
    assert unknown.startswith("Error: failure_mode 'typos' is unknown") and "reward_misses" in unknown
    assert ws.call("query_trajectories", '{"kind": "all"}').startswith("Format error: kind must be")
    ctx.repo.remove_worktree(wt)


KILLED_CHILD = '''
import sys
from pathlib import Path
from harness_repo.repo import HarnessRepo
from meta_agent.agents.base import AgentContext
from meta_agent.agents.llm import LLMAgent
from rl_backend.archive import Archive

run, api_base, markdown = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]).read_text()
ctx = AgentContext(round=1, digest={"domain": "math"}, digest_markdown=markdown, history=[], skills=[],
                   repo=HarnessRepo.open(run / "harness"), worktree_root=run / "worktrees",
                   round_dir=run / "rounds" / "1", max_candidates=2, archive=Archive(run / "archive"),
                   preview=lambda branch: {"decision": "merge"})
LLMAgent("openai/gpt-4o-mini", api_base=api_base, api_key="test", retry_base_s=0.01).propose(ctx)
'''


def test_a_candidate_killed_after_its_preview_commit_is_parked_not_judged(
        ctx: AgentContext, server: ScriptedLLMServer, tmp_path: Path) -> None:
    """Kill the controller right after the preview tool's ``WIP`` commit (a real SIGKILL), then resume."""
    from meta_agent.recovery import recover
    from meta_agent.run.unfinished import park_unfinished
    from meta_agent.run_dir import RunDir

    edited = ctx.repo.read_file("main", "reward.py") + NEW_REWARD_NOTE
    server.script(tool_call("write_file", {"path": "reward.py", "content": edited}),
                  tool_call("backtest_preview", {}))
    script, digest = tmp_path / "child.py", tmp_path / "digest.md"
    script.write_text(KILLED_CHILD)
    digest.write_text(ctx.digest_markdown)
    env = {k: v for k, v in __import__("os").environ.items()} | {"META_AGENT_FAILPOINTS": "propose.committed"}
    proc = subprocess.run([__import__("sys").executable, str(script), str(ctx.repo.path.parent), server.api_base,
                           str(digest)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr  # killed at the WIP commit, no finally ran
    [iv] = [iv for iv in ctx.repo.interventions() if iv.round == 1]
    assert [c["subject"] for c in ctx.repo.log(iv.branch, 1)] == ["WIP: backtest preview"] and not iv.hypothesis

    # the transcript holds both calls the budget charged (the second was charged before its preview ran)
    record = transcript(ctx, iv.branch)
    assert len(record["calls"]) == len(server.requests) == 2
    assert record["usage"]["total_tokens"] == sum(c["total_tokens"] for c in record["calls"]) > 0

    # what resume runs first: recovery, which used to remove the worktree (and its uncommitted edits) before
    # the loop parked the branch; an edit the agent made after its preview commit must survive too
    wt = ctx.worktree_root / iv.branch.replace("/", "_")
    (wt / "JOURNAL.md").write_text("written after the preview, never committed\n")
    lines = recover(RunDir(ctx.repo.path.parent), ctx.repo, ctx.archive, "t", {"round": 1, "phase": "propose"})
    assert any(iv.branch in line and "stopped before its proposal commit" in line for line in lines), lines
    assert [iv for iv in ctx.repo.interventions() if iv.round == 1] == []  # the round asks for the full number
    draft = f"refs/agent-drafts/{iv.branch}"
    assert ctx.repo.read_file(draft, "reward.py") == edited  # the work is kept
    assert ctx.repo.read_file(draft, "JOURNAL.md") == "written after the preview, never committed\n"
    assert not wt.exists()
    kept = json.loads((ctx.round_dir / "agent" / f"{iv.branch.replace('/', '_')}.stopped.json").read_text())
    assert kept["status"] == "stopped" and kept["usage"] == record["usage"]  # the charged calls, kept aside
    assert park_unfinished(ctx.repo, 1) == []


def test_parking_keeps_uncommitted_edits_and_leaves_proposals_alone(ctx: AgentContext, server: ScriptedLLMServer):
    from meta_agent.run.unfinished import park_unfinished

    server.script(tool_call("write_file", {"path": "reward.py", "content": ctx.repo.read_file("main", "reward.py")
                                           + NEW_REWARD_NOTE}), tool_call("submit", SUBMIT))
    [proposal] = agent(server).propose(ctx)
    stopped = ctx.repo.start_intervention(1, "stopped", worktree_root=ctx.worktree_root)
    (stopped.path / "JOURNAL.md").write_text("half-written\n")  # never committed: the agent was killed first
    empty = ctx.repo.start_intervention(1, "empty", worktree_root=ctx.worktree_root)
    assert sorted(park_unfinished(ctx.repo, 1)) == sorted([stopped.branch, empty.branch])
    assert [iv.branch for iv in ctx.repo.interventions()] == [proposal.branch]
    assert ctx.repo.read_file(f"refs/agent-drafts/{stopped.branch}", "JOURNAL.md") == "half-written\n"
    assert subprocess.run(["git", "-C", str(ctx.repo.path), "rev-parse", "-q", "--verify",
                           f"refs/agent-drafts/{empty.branch}"], capture_output=True).returncode != 0
