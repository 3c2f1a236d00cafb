"""Kill the real CLI anywhere, resume it, and count that nothing was lost or done twice.

Every kill is a real SIGKILL: a crash point (``harness_repo.failpoints``) armed through
``META_AGENT_FAILPOINTS`` makes the controller kill itself right after a durable write, or
the test kills it at a seeded random moment.  Training is the slow part, so round 0 is
trained once (the run is killed right after its result is saved) and every case starts
from a copy of that run: the kills land in the phases after training, and one case goes
on to train a second round.

Expected counts come from the run's knobs: ``TINY`` trains 1 step x 2 prompts x 4
completions = 8 rollouts, the exam is ``evaluation.heldout_size`` = 16 tasks, and the
run asks for 2 candidates per round.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness_repo.trailers import parse_trailers
from meta_agent.heldout_stats import format_interval, outcomes_by_task, paired_difference
from meta_agent.run_dir import RunDir, write_json_atomic
from rl_backend.archive import Archive
from test_loop import TINY, _tiny_run

pytestmark = [pytest.mark.slow, pytest.mark.docker]

ROOT = Path(__file__).resolve().parents[1]
ROLLOUTS = 1 * 2 * 4  # steps_per_round x prompts_per_step x group_size of TINY
HELDOUT = 16  # evaluation.heldout_size recorded in run.json
CANDIDATES = 2
KILLED = -signal.SIGKILL


def _env(skills: Path, failpoints: str | None = None) -> dict[str, str]:
    """The CLI's environment: the test's skills library, wide lines, and the armed crash points (if any)."""
    env = {k: v for k, v in os.environ.items() if k != "META_AGENT_FAILPOINTS"}
    env |= {"META_AGENT_SKILLS": str(skills), "COLUMNS": "1000"}
    return env | ({"META_AGENT_FAILPOINTS": failpoints} if failpoints else {})


def _resume(run_dir: Path, *args: str, failpoints: str | None = None, skills: Path,
            env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(run_dir), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=_env(skills, failpoints) | (env_extra or {}))


@pytest.fixture(scope="module")
def trained(module_dir, docker_sandbox) -> Path:
    """A one-round run killed right after round 0's training result was saved."""
    path = module_dir / "run"
    rd, _ = _tiny_run(path)
    assert (TINY["steps_per_round"], TINY["prompts_per_step"], TINY["group_size"]) == (1, 2, 4)
    assert rd.config()["candidates"] == CANDIDATES
    proc = _resume(path, failpoints="train.result_saved", skills=path.parent / "skills")
    assert proc.returncode == KILLED, proc.stderr[-3000:]
    assert (rd.round_dir(0) / "train" / "result.json").exists()
    assert rd.state().get("phase", "train") == "train"  # the state never moved on
    return path


def _copy(trained: Path, dest: Path) -> RunDir:
    shutil.copytree(trained, dest, symlinks=True)
    return RunDir(dest)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _main_commits(repo: Path) -> list[dict]:
    """Main's first-parent history, oldest first: sha, parents, trailers."""
    out = _git(repo, "log", "--first-parent", "--reverse", "--format=%H %P%x00%B%x1e", "main")
    commits = []
    for record in filter(str.strip, out.split("\x1e")):
        head, body = record.strip("\n").split("\x00", 1)
        sha, *parents = head.split()
        commits.append({"sha": sha, "parents": parents, "trailers": parse_trailers(body)})
    return commits


def _branches(repo: Path, round: int) -> list[str]:
    return _git(repo, "for-each-ref", "--format=%(refname:strip=2)", f"refs/heads/iv/r{round}-*").split()


def _assert_round_recorded_once(rd: RunDir, round: int, candidates: int | None = CANDIDATES) -> None:
    """Archive rows, proposals and their verdicts, as git and the archive hold them: each exactly once.

    ``candidates``: the proposals expected, or None when the agent may propose fewer (a later round, whose
    rules the history can block)."""
    run_id = rd.config()["run_id"]
    ids = Archive(rd.archive).read(run_id=run_id, round=round, columns=["traj_id"]).column("traj_id").to_pylist()
    assert len(ids) == ROLLOUTS + HELDOUT and len(set(ids)) == len(ids)
    parts = list((rd.archive).rglob("*.parquet"))
    assert len([p for p in parts if f"round={round}" in str(p)]) == 1  # one append per round, no half part
    assert not list(rd.path.rglob(".*.tmp"))

    harness = rd.harness
    branches = _branches(harness, round)
    assert len(branches) == candidates if candidates is not None else len(branches) <= CANDIDATES
    proposals = json.loads((rd.round_dir(round) / "proposals.json").read_text())
    assert sorted(p["branch"] for p in proposals) == sorted(branches)
    merges = [c for c in _main_commits(harness) if len(c["parents"]) == 2 and c["trailers"].get("Intervention")]
    tags = _git(harness, "tag", "--list", f"verdict/iv/r{round}-*").split()
    for branch in branches:
        base = _git(harness, "merge-base", "main", branch).strip()
        first = _git(harness, "rev-list", "--first-parent", f"{base}..{branch}").split()
        merged = [c for c in merges if c["trailers"]["Intervention"] == [branch]]
        judged = len(merged) + (f"verdict/{branch}" in tags)
        assert judged == 1, f"{branch} judged {judged} times"
        # the agent's one commit, whether main now contains it (merged) or not
        commits = _git(harness, "rev-list", f"{merged[0]['parents'][0]}..{branch}").split() if merged else first
        assert len(commits) == 1, f"{branch} has {len(commits)} commits"
    assert _git(harness, "worktree", "list", "--porcelain").count("worktree ") == 1  # main's only


def _assert_compute_charged_once(rd: RunDir, rounds: int) -> None:
    seconds = sum(json.loads((rd.round_dir(n) / "train" / "result.json").read_text())["train_seconds"]
                  for n in range(rounds))
    assert rd.state()["budget"]["compute_hours"]["cpu"] == pytest.approx(seconds / 3600, rel=1e-9)


CHAIN = [  # (crash point armed, a line the resumed controller must print about what it found)
    ("budget.charged", "training had finished before the stop"),
    ("diagnose.findings_written", "training had finished before the stop"),
    ("digest.written", "removed a temporary file of a write that never finished"),
    ("propose.branch_created", None),
    ("propose.committed", "created without a commit before the stop"),
    ("propose.committed", "1 proposal(s) of round 0 already committed; asking recipe for 1 more"),
    ("propose.proposals_written", "2 proposal(s) of round 0 already committed; asking recipe for 0 more"),
    ("backtest.report_written", None),
    ("promote.merged,promote.tagged", None),
    ("promote.merged,promote.tagged", None),
    ("state.saved", None),
]


def test_a_kill_at_every_crash_point_resumes_exactly(trained, tmp_path):
    rd = _copy(trained, tmp_path / "run")
    skills = tmp_path / "skills"
    for point, found in CHAIN:
        if point == "digest.written":  # beside the round's part, a staging file of a writer killed mid-stream
            (part,) = rd.archive.rglob("*.parquet")
            shutil.copyfile(part, part.with_name(".part-killed.parquet.tmp"))
        proc = _resume(rd.path, failpoints=point, skills=skills)
        assert proc.returncode == KILLED, f"{point}: not reached\n{proc.stderr[-3000:]}"
        assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
        if found:
            assert found in proc.stderr, f"{point}: the resume did not say {found!r}\n{proc.stderr[-3000:]}"
        if point == "propose.branch_created":  # the defect this guards: an empty branch bricked every resume
            assert len(_branches(rd.harness, 0)) == 1
    done = _resume(rd.path, skills=skills)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "finished 1 rounds" in done.stderr
    state = rd.state()
    assert (state["round"], state["phase"], state["status"]) == (1, "train", "finished")
    _assert_round_recorded_once(rd, 0)
    _assert_compute_charged_once(rd, 1)


def test_random_kills_then_resume(trained, tmp_path):
    """A seeded sweep: SIGKILL the controller at random moments of the round, resume, again."""
    rd = _copy(trained, tmp_path / "run")
    skills = tmp_path / "skills"
    rng = random.Random(20261123)
    outcomes = []
    for _ in range(6):
        proc = subprocess.Popen([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(rd.path)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(skills))
        try:
            proc.wait(timeout=rng.uniform(3.0, 30.0))  # the moment of the kill, not a wait for a result
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
        err = proc.communicate()[1]
        assert "Traceback" not in err, err[-3000:]
        outcomes.append(proc.returncode)
        if proc.returncode == 0:
            break
    if outcomes[-1] != 0:
        done = _resume(rd.path, skills=skills)
        assert done.returncode == 0, done.stderr[-3000:]
    assert rd.state()["status"] == "finished"
    _assert_round_recorded_once(rd, 0)
    _assert_compute_charged_once(rd, 1)


def test_two_rounds_carry_the_policy_and_live_check_what_merged(trained, tmp_path):
    """The README's default command, reduced to two tiny rounds: round 1 trains from round 0's policy, live-checks
    round 0's merges, records skills or reverts, and archive, state, git and ``history`` agree."""
    rd = _copy(trained, tmp_path / "run")
    skills = tmp_path / "skills"
    run_id = rd.config()["run_id"]
    # a kill in round 1's training after the backend committed its archive part, before result.json was written
    parted = _resume(rd.path, "--rounds", "2", failpoints="archive.part_written", skills=skills)
    assert parted.returncode == KILLED, parted.stderr[-3000:]
    assert len(Archive(rd.archive).parts(run_id, 1)) == 1
    assert not (rd.round_dir(1) / "train" / "result.json").exists()
    # then a kill in round 1's live checks, wherever one writes first (which one depends on the trained data)
    first = _resume(rd.path, failpoints="skill.recorded,live_check.reverted,tripwire.reverted", skills=skills)
    assert first.returncode in (0, KILLED), first.stderr[-3000:]
    assert "removed archive rows of round 1, whose training was killed before its result was saved" in first.stderr
    done = _resume(rd.path, skills=skills) if first.returncode == KILLED else first
    assert done.returncode == 0, done.stderr[-3000:]
    assert "finished 2 rounds" in done.stderr
    state = rd.state()
    assert (state["round"], state["status"]) == (2, "finished")

    results = [json.loads((rd.round_dir(n) / "train" / "result.json").read_text()) for n in (0, 1)]
    log1 = (rd.round_dir(1) / "train" / "train.log").read_text()
    assert f"policy {results[0]['policy_ref']}," in log1  # round 1 started from round 0's checkpoint
    assert "optimizer state carried over" in log1  # ... and continued its optimizer
    # the end-of-run time line reports the training this process did: round 1's, unless a kill left it to `first`
    grpo = results[1]["eval"]["seconds"]["grpo"] if done is first else 0
    assert f"GRPO training {grpo:.0f} s (" in done.stderr
    # the exam's change since round 0, paired over the archived held-out answers, in the digest and the end table
    r0, r1 = (outcomes_by_task(Archive(rd.archive).rows(run_id=run_id, round=n, split="heldout")) for n in (0, 1))
    since = json.loads((rd.round_dir(1) / "digest.json").read_text())["heldout"]["vs_first"]
    expected = paired_difference(r0, r1)
    assert (since["n"], since["gained"], since["lost"]) == (HELDOUT, expected.gained, expected.lost)
    assert "vs round 0" in done.stderr and format_interval(*expected[:3], signed=True) in done.stderr
    # round 1 is judged on whether it moved the policy (main:policy_stalled): its exam answers against round 0's
    exams = [{r["task_id"]: r["response"] for r in Archive(rd.archive).rows(run_id=run_id, round=n, split="heldout")}
             for n in (0, 1)]
    same = sum(exams[1][t] == exams[0].get(t) for t in exams[1])
    stall = json.loads((rd.round_dir(1) / "digest.json").read_text())["main_checks"]["policy_stalled"]
    assert stall["detail"].startswith(f"{same} of {HELDOUT} exam answers word for word"), stall
    assert state["policy_ref"] == results[1]["policy_ref"] != results[0]["policy_ref"]
    assert Archive(rd.archive).rounds(rd.config()["run_id"]) == [0, 1]
    _assert_round_recorded_once(rd, 0)
    _assert_round_recorded_once(rd, 1, candidates=None)
    _assert_compute_charged_once(rd, 2)

    # live checks judged exactly the round-0 branches that git shows merged into main
    main = _main_commits(rd.harness)
    merged0 = sorted(c["trailers"]["Intervention"][0] for c in main if len(c["parents"]) == 2
                     and c["trailers"].get("Intervention", [""])[0].startswith("iv/r0-"))
    checks = json.loads((rd.round_dir(1) / "digest.json").read_text())["live_checks"]
    tripwire = json.loads((rd.round_dir(1) / "digest.json").read_text()).get("tripwire_reverted", [])
    # training is metered: round 1's harness CPU per trajectory is compared with round 0's, both measured
    cost = {a["metric"]: a for a in json.loads((rd.round_dir(1) / "digest.json").read_text())["tripwire"]}
    per_traj = [r["eval"]["harness_cost"]["cpu_s"] / r["eval"]["harness_cost"]["trajectories"] for r in results]
    assert (cost["harness_cpu_s"]["before"], cost["harness_cpu_s"]["after"]) == pytest.approx(per_traj), cost
    assert sorted([c["branch"] for c in checks] + tripwire) == merged0
    if tripwire or any(c["outcome"] != "unconfirmed" for c in checks):  # a live check wrote: the crash point fired
        assert first.returncode == KILLED
    for check in checks:
        confirmed = [c for c in main if c["trailers"].get("Confirmed-By") == [check["branch"]]]
        reverts = [c for c in main if check["branch"] in c["trailers"].get("Reverts-Intervention", [])]
        assert (len(confirmed), len(reverts)) == {"confirmed": (1, 0), "refuted": (0, 1),
                                                  "unconfirmed": (0, 0)}[check["outcome"]], check
        if confirmed:  # the skill: in the harness repo and the library, counted once
            name = confirmed[0]["trailers"]["Skill"][0]
            library = (skills / f"{name}.md").read_text()
            assert "hits: 1\n" in library and library == _git(rd.harness, "show", f"main:skills/{name}.md")
    assert state["rounds"]["1"]["main_after"] == _git(rd.harness, "rev-parse", "main").strip()

    history = subprocess.run([sys.executable, "-m", "meta_agent", "history", "--run-dir", str(rd.path), "--json"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120, env=_env(skills))
    shown = {iv["branch"]: iv["status"] for iv in json.loads(history.stdout)}
    assert sorted(shown) == sorted(_branches(rd.harness, 0) + _branches(rd.harness, 1))
    for branch in merged0:
        undone = any(branch in c["trailers"].get("Reverts-Intervention", []) for c in main)
        assert shown[branch] == ("reverted" if undone else "merged")


def test_a_run_folder_from_before_rows_streamed_still_resumes(trained, tmp_path):
    """An older run kept every row in result.json (``rollouts``, ``heldout``) and saved its state at the ``archive``
    phase before appending them: the resume appends them from there, once, and finishes the round."""
    rd = _copy(trained, tmp_path / "run")
    run_id = rd.config()["run_id"]
    archive = Archive(rd.archive)
    rows = archive.read(run_id=run_id, round=0).to_pylist()
    result_path = rd.round_dir(0) / "train" / "result.json"
    result = json.loads(result_path.read_text())
    result |= {"rollouts": [r for r in rows if r["split"] == "train"],
               "heldout": [r for r in rows if r["split"] == "heldout"]}
    result_path.write_text(json.dumps(result))
    (part,) = archive.parts(run_id, 0)
    part.unlink()
    state = rd.state()
    state |= {"phase": "archive", "rounds": {"0": {k: result[k] for k in ("policy_ref", "eval", "harness_commit",
                                                                       "train_seconds")}}}
    rd.save_state(state)
    done = _resume(rd.path, skills=tmp_path / "skills")
    assert done.returncode == 0, done.stderr[-3000:]
    assert rd.state()["status"] == "finished"
    _assert_round_recorded_once(rd, 0)


def test_an_llm_candidate_killed_after_its_preview_commit_is_parked_then_the_round_asks_for_all(trained, tmp_path):
    """Issue 22 item 7 through the real CLI and a real HTTP stand-in for the provider: the agent edits reward.py,
    previews (the ``WIP: backtest preview`` commit), edits JOURNAL.md, and the controller is SIGKILLed while it waits
    for the next reply.  ``--resume`` must not judge that branch: its work (the commit and the uncommitted edit) is
    kept as a draft, the agent is asked for the full number of candidates, and the transcripts add up to what the
    budget charged."""
    from llm_server import ScriptedLLMServer, delayed, text, tool_call

    rd = _copy(trained, tmp_path / "run")
    skills = tmp_path / "skills"
    edited_reward = (rd.harness / "reward.py").read_text() + "# boxed answers are read as well (stopped)\n"
    journal = "# Journal\n\nHalf-written when the controller stopped.\n"
    with ScriptedLLMServer() as server:
        write_json_atomic(rd.run_json, rd.config() | {"agent": "llm", "model": "openai/gpt-4o-mini",
                                                      "api_base": server.api_base})
        server.script(tool_call("write_file", {"path": "reward.py", "content": edited_reward}),
                      tool_call("backtest_preview", {}),
                      tool_call("write_file", {"path": "JOURNAL.md", "content": journal}),
                      delayed(text("never read"), 600))  # the controller is killed while it waits for this
        env = _env(skills) | {"OPENAI_API_KEY": "test"}
        proc = subprocess.Popen([sys.executable, "-m", "meta_agent", "--resume", "--run-dir", str(rd.path)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        while proc.poll() is None and len(server.requests) < 4:  # until it waits on the fourth reply
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
        proc.send_signal(signal.SIGKILL)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == KILLED and len(server.requests) == 4, err[-3000:]

        [branch] = _branches(rd.harness, 0)
        assert _git(rd.harness, "log", "-1", "--format=%s", branch).strip() == "WIP: backtest preview"
        stopped = json.loads((rd.round_dir(0) / "agent" / f"{branch.replace('/', '_')}.json").read_text())
        charged, charged_usd = rd.state()["budget"]["run_tokens"], rd.state()["budget"]["run_cost_usd"]
        assert len(stopped["calls"]) == 3 and stopped["usage"]["total_tokens"] == charged > 0
        assert stopped["usage"]["cost_usd"] == pytest.approx(charged_usd, rel=1e-9, abs=1e-12)

        submit = {"hypothesis": "A journal note changes nothing the gate measures",
                  "predicted_effects": ["mean_reward unchanged"], "summary": "Add a journal note"}
        server.script(tool_call("write_file", {"path": "JOURNAL.md", "content": "# Journal\n\nFirst note.\n"}),
                      tool_call("submit", submit),
                      tool_call("write_file", {"path": "JOURNAL.md", "content": "# Journal\n\nSecond note.\n"}),
                      tool_call("submit", submit | {"summary": "Add another journal note"}))
        done = _resume(rd.path, skills=skills, env_extra={"OPENAI_API_KEY": "test"})
        assert done.returncode == 0, done.stderr[-3000:]
    assert f"{branch} was stopped before its proposal commit" in done.stderr
    assert "asking llm for" not in done.stderr  # nothing counted as already proposed: the full number was asked
    assert server.pending == 0 and len(server.requests) == 8
    _assert_round_recorded_once(rd, 0)  # exactly two proposals, each judged once, neither the stopped branch's
    proposals = json.loads((rd.round_dir(0) / "proposals.json").read_text())
    assert [p["hypothesis"] for p in proposals] == [submit["hypothesis"]] * CANDIDATES
    draft = f"refs/agent-drafts/{branch}"
    assert _git(rd.harness, "show", f"{draft}:reward.py") == edited_reward  # the preview commit's work
    assert _git(rd.harness, "show", f"{draft}:JOURNAL.md") == journal  # the edit never committed before the kill
    assert _git(rd.harness, "log", "-1", "--format=%s", f"{draft}~1").strip() == "WIP: backtest preview"
    # every call the budget charged is in exactly one transcript, the stopped one's included
    transcripts = sorted((rd.round_dir(0) / "agent").glob("*.json"))
    kept = json.loads((rd.round_dir(0) / "agent" / f"{branch.replace('/', '_')}.stopped.json").read_text())
    assert kept["status"] == "stopped" and kept["usage"] == stopped["usage"]
    assert sum(json.loads(p.read_text())["usage"]["total_tokens"] for p in transcripts) \
        == rd.state()["budget"]["run_tokens"] == charged + 4 * 120
    assert sum(json.loads(p.read_text())["usage"]["cost_usd"] for p in transcripts) \
        == pytest.approx(rd.state()["budget"]["run_cost_usd"], rel=1e-9, abs=1e-12)


def test_a_damaged_part_stops_the_resume_before_training_and_a_moved_out_one_is_a_shown_loss(trained, tmp_path):
    """The held-out kill test's three findings through the real CLI: a truncated part of a finished round is
    refused before anything trains, named with how to restore it; moved out, it is a loss history and report show."""
    rd = _copy(trained, tmp_path / "run")
    run_id = rd.config()["run_id"]
    (part,) = Archive(rd.archive).parts(run_id, 0)
    whole = part.read_bytes()
    part.write_bytes(whole[: len(whole) // 2])
    refused = _resume(rd.path, "--rounds", "2", skills=tmp_path / "skills")
    said = refused.stdout + refused.stderr
    assert refused.returncode not in (0, KILLED), said[-3000:]
    assert part.name in said and "restore" in said and "nothing trains" in said, said[-3000:]
    assert not rd.round_dir(1).exists() and rd.state().get("phase", "train") == "train"

    moved = tmp_path / "moved-out.parquet"
    part.write_bytes(whole)
    part.rename(moved)
    # killed at its first state save after the recovery: the loss is recorded before anything else happens
    resumed = _resume(rd.path, "--rounds", "2", failpoints="state.saved", skills=tmp_path / "skills")
    assert resumed.returncode == KILLED, (resumed.stdout + resumed.stderr)[-3000:]
    assert "missing from the archive" in resumed.stdout + resumed.stderr
    env = _env(tmp_path / "skills")
    history = subprocess.run([sys.executable, "-m", "meta_agent", "history", "--run-dir", str(rd.path)], cwd=ROOT,
                             capture_output=True, text=True, env=env, timeout=300)
    assert history.returncode == 0 and "archive part lost: " in history.stdout and part.name in history.stdout, \
        history.stdout[-3000:] + history.stderr[-3000:]
    report = subprocess.run([sys.executable, "-m", "meta_agent", "report", "--run-dir", str(rd.path)], cwd=ROOT,
                            capture_output=True, text=True, env=env, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    assert part.name in report.stdout + report.stderr and part.name in (rd.path / "report" / "report.md").read_text()
