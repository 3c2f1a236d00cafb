"""HarnessRepo against real git repositories in tmp_path (no global git config)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness_repo import HarnessError, HarnessRepo, Worktree, format_trailers, parse_trailers
from harness_repo.contract import HarnessConfig


@pytest.fixture(autouse=True)
def no_global_git_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run as on a fresh machine: no global or system git config, no identity in the env."""
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "no-global-gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def repo(tmp_path: Path) -> HarnessRepo:
    return HarnessRepo.create(tmp_path / "harness", "math")


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def is_ancestor(cwd: Path, a: str, b: str) -> bool:
    return subprocess.run(["git", "merge-base", "--is-ancestor", a, b], cwd=cwd).returncode == 0


def edit(wt: Worktree, path: str, old: str, new: str) -> None:
    file = wt.path / path
    text = file.read_text()
    assert old in text, f"{old!r} not in {path}"
    file.write_text(text.replace(old, new))


def propose(repo: HarnessRepo, round: int, slug: str, old: str, new: str, effect: str) -> Worktree:
    """An intervention that edits one line of harness.yaml, committed with proposal trailers."""
    wt = repo.start_intervention(round, slug)
    edit(wt, "harness.yaml", old, new)
    repo.commit(wt, f"Change {slug}", {"Hypothesis": f"{slug} helps", "Predicted-Effect": [effect]})
    return wt


def test_create_open_read(repo: HarnessRepo, tmp_path: Path) -> None:
    assert (repo.path / "reward.py").is_file() and (repo.path / "diagnostics" / "zero_variance.py").is_file()
    assert not list(repo.path.rglob("__pycache__"))
    assert git(repo.path, "branch", "--show-current").strip() == "main"
    assert (git(repo.path, "log", "-1", "--format=%an <%ae>|%cn").strip()
            == "meta-agent <meta-agent@localhost>|meta-agent")
    assert git(repo.path, "status", "--porcelain") == ""
    log = repo.log()
    assert len(log) == 1 and log[0]["sha"] == repo.head() and log[0]["subject"] == "Seed math harness"
    assert isinstance(repo.config(), HarnessConfig) and repo.config().domain == "math"
    assert "compute_score" in repo.read_file("main", "reward.py")
    assert HarnessRepo.open(repo.path).head() == repo.head()

    with pytest.raises(HarnessError, match="available: .*math"):
        HarnessRepo.create(tmp_path / "other", "chess")
    with pytest.raises(HarnessError, match="not an empty directory"):
        HarnessRepo.create(repo.path, "math")
    with pytest.raises(HarnessError, match="not a harness repo"):
        HarnessRepo.open(tmp_path)
    with pytest.raises(HarnessError, match="does not exist"):
        repo.read_file("main", "nope.py")
    with pytest.raises(HarnessError, match="does not name a commit"):
        repo.head("no-such-branch")


def test_opening_a_configured_repo_takes_no_config_lock(repo: HarnessRepo) -> None:
    """Re-scoring workers open one repo side by side; while one holds git's config lock the others still open it."""
    lock = repo.path / ".git" / "config.lock"
    lock.write_text("")  # another process is writing .git/config right now
    try:
        assert HarnessRepo.open(repo.path).head() == repo.head()
    finally:
        lock.unlink()
    git(repo.path, "config", "--unset", "user.email")  # a repo that lost its identity gets it back on open
    HarnessRepo.open(repo.path)
    assert git(repo.path, "config", "--local", "--get", "user.email").strip() == "meta-agent@localhost"


def test_intervention_commits_and_trailers(repo: HarnessRepo) -> None:
    main = repo.head()
    wt = repo.start_intervention(1, "Boxed Answers!")
    assert wt.branch == "iv/r1-boxed-answers" and wt.base_commit == main
    assert wt.path == repo.path.parent / "harness.worktrees" / "iv_r1-boxed-answers"
    assert git(wt.path, "branch", "--show-current").strip() == wt.branch

    with pytest.raises(HarnessError, match="nothing changed"):
        repo.commit(wt, "empty", {"Hypothesis": "x"})
    edit(wt, "reward.py", "boxed", "boxed (soon)")
    (wt.path / "diagnostics" / "boxed.py").write_text("def diagnose(rollouts):\n    return []\n")
    (wt.path / "diagnostics" / "__pycache__").mkdir()
    (wt.path / "diagnostics" / "__pycache__" / "boxed.cpython-311.pyc").write_bytes(b"\0")
    first = repo.commit(wt, "Read \\boxed{} answers\n\nLonger explanation.", {
        "Hypothesis": "boxed answers are scored 0\neven when right",
        "Predicted-Effect": ["format_failures down", "reward_acc up"],
        "Skill": "answer-format", "Agent": "recipe",
    })
    edit(wt, "harness.yaml", "temperature: 0.7", "temperature: 0.9")
    second = repo.commit(wt, "Cooler sampling", {"Predicted-Effect": "truncation down"})
    assert git(wt.path, "rev-parse", "HEAD").strip() == second != first
    assert repo.head() == main, "committing on a branch must not move main"

    assert repo.changed_paths(wt.branch) == ["diagnostics/boxed.py", "harness.yaml", "reward.py"]
    assert repo.contract_violations(wt.branch) == []
    (iv,) = repo.interventions()
    assert (iv.branch, iv.round, iv.slug, iv.status) == (wt.branch, 1, "boxed-answers", "open")
    assert (iv.head, iv.base, iv.subject) == (second, main, "Read \\boxed{} answers")
    assert iv.hypothesis == "boxed answers are scored 0 even when right"
    assert iv.predicted_effects == ["format_failures down", "reward_acc up", "truncation down"]
    assert iv.skill == "answer-format" and iv.trailers["Agent"] == ["recipe"]
    assert (iv.verdict, iv.evidence, iv.merge_commit) == (None, {}, None)
    assert repo.intervention(wt.branch) == iv

    with pytest.raises(HarnessError, match="already exists"):
        repo.start_intervention(1, "boxed answers")
    with pytest.raises(HarnessError, match="no intervention branch"):
        repo.intervention("iv/r9-missing")
    with pytest.raises(HarnessError, match="no letters or digits"):
        repo.start_intervention(2, "!!!")

    (wt.path / "JOURNAL.md").write_text("uncommitted\n")
    with pytest.raises(HarnessError, match="commit the changes first"):
        repo.remove_worktree(wt)
    repo.remove_worktree(wt, force=True)
    assert not wt.path.exists() and repo.head(wt.branch) == second


def test_merge_carries_evidence(repo: HarnessRepo) -> None:
    main = repo.head()
    wt = propose(repo, 1, "fewer-steps", "steps_per_round: 3", "steps_per_round: 2", "reward up")
    merge = repo.merge(wt.branch, {"Backtest": "reward_acc +0.10 [0.02, 0.18]", "Verdict": "merged; passes"},
                       "Merge iv/r1-fewer-steps: fewer steps")
    assert repo.head() == merge and git(repo.path, "status", "--porcelain") == ""
    parents = git(repo.path, "log", "-1", "--format=%P", merge).split()
    assert parents == [main, repo.head(wt.branch)]
    assert "steps_per_round: 2" in (repo.path / "harness.yaml").read_text()
    assert repo.config().grpo.steps_per_round == 2

    trailers = repo.log(n=1)[0]["trailers"]
    assert trailers["Intervention"] == [wt.branch] and trailers["Verdict"] == ["merged; passes"]
    iv = repo.intervention(wt.branch)
    assert (iv.status, iv.merge_commit, iv.verdict) == ("merged", merge, "merged; passes")
    assert iv.evidence == {"Backtest": ["reward_acc +0.10 [0.02, 0.18]"], "Verdict": ["merged; passes"]}
    assert iv.base == main and iv.subject == "Change fewer-steps" and iv.predicted_effects == ["reward up"]
    with pytest.raises(HarnessError, match="already contained in main"):
        repo.merge(wt.branch, {}, "again")


def test_reject_keeps_branch_and_tags_it(repo: HarnessRepo) -> None:
    main = repo.head()
    wt = propose(repo, 2, "hot", "temperature: 0.7", "temperature: 1.5", "entropy up")
    tag = repo.reject(wt.branch, "rejected: reward_acc -0.2", {"Backtest": "reports/x.json"})
    assert tag == "verdict/iv/r2-hot"
    assert git(repo.path, "cat-file", "-t", tag).strip() == "tag", "must be an annotated tag"
    assert git(repo.path, "rev-parse", f"{tag}^{{commit}}").strip() == repo.head(wt.branch)
    assert repo.head() == main and repo.branch_exists(wt.branch)
    iv = repo.intervention(wt.branch)
    assert (iv.status, iv.verdict, iv.merge_commit) == ("rejected", "rejected: reward_acc -0.2", None)
    assert iv.evidence["Backtest"] == ["reports/x.json"]
    with pytest.raises(HarnessError, match="already has a verdict"):
        repo.reject(wt.branch, "again", {})


def test_merge_conflict_leaves_main_untouched(repo: HarnessRepo) -> None:
    a = propose(repo, 1, "a", "learning_rate: 2.0e-5", "learning_rate: 1.0e-5", "x")
    b = propose(repo, 1, "b", "learning_rate: 2.0e-5", "learning_rate: 5.0e-6", "y")
    merged = repo.merge(a.branch, {"Verdict": "merged"}, "Merge a")
    with pytest.raises(HarnessError, match="harness.yaml.*main is unchanged"):
        repo.merge(b.branch, {"Verdict": "merged"}, "Merge b")
    assert repo.head() == merged
    assert git(repo.path, "status", "--porcelain") == ""
    assert not (repo.path / ".git" / "MERGE_HEAD").exists()
    assert "learning_rate: 1.0e-5" in (repo.path / "harness.yaml").read_text()
    assert repo.intervention(b.branch).status == "open"

    (repo.path / "JOURNAL.md").write_text("hand edit\n")
    with pytest.raises(HarnessError, match="uncommitted changes"):
        repo.merge(b.branch, {}, "dirty")


def test_revert_merge_and_restore_keep_history(repo: HarnessRepo) -> None:
    seed = repo.head()
    a = propose(repo, 1, "a", "steps_per_round: 3", "steps_per_round: 5", "x")
    merge_a = repo.merge(a.branch, {"Verdict": "merged"}, "Merge a")
    b = propose(repo, 2, "b", "group_size: 4", "group_size: 8", "y")
    merge_b = repo.merge(b.branch, {"Verdict": "merged"}, "Merge b")

    with pytest.raises(HarnessError, match="not an intervention merge"):
        repo.revert_merge(seed, "not a merge")
    revert = repo.revert_merge(merge_a, "effect did not hold", {"Live-Check": "reward down"})
    assert repo.head() == revert and git(repo.path, "log", "-1", "--format=%P").split() == [merge_b]
    config = repo.config()
    assert (config.grpo.steps_per_round, config.grpo.group_size) == (3, 8)  # a's 5 reverted to the seed's 3
    assert repo.log(n=1)[0]["trailers"]["Reverts-Intervention"] == [a.branch]
    iv_a = repo.intervention(a.branch)
    assert (iv_a.status, iv_a.merge_commit, iv_a.revert_commit) == ("reverted", merge_a, revert)
    assert iv_a.verdict == "merged" and iv_a.base == seed and iv_a.subject == "Change a"
    with pytest.raises(HarnessError, match="already been reverted"):
        repo.revert_merge(merge_a, "twice")

    restored = repo.restore(seed, "round 3 failed to train", {"Round-Failed": "3"})
    assert git(repo.path, "rev-parse", f"{restored}^{{tree}}") == git(repo.path, "rev-parse", f"{seed}^{{tree}}")
    assert git(repo.path, "log", "-1", "--format=%P", restored).split() == [revert]
    assert (repo.path / "harness.yaml").read_text() == repo.read_file(seed, "harness.yaml")
    assert git(repo.path, "status", "--porcelain") == ""
    trailers = repo.log(n=1)[0]["trailers"]
    assert trailers["Restores"] == [seed] and trailers["Round-Failed"] == ["3"]
    assert trailers["Reverts-Intervention"] == [b.branch], "a was already reverted"
    for old in (merge_a, merge_b, revert):
        assert is_ancestor(repo.path, old, "main"), "history must be kept"
    statuses = {iv.branch: iv.status for iv in repo.interventions()}
    assert statuses == {a.branch: "reverted", b.branch: "reverted"}
    assert [iv.round for iv in repo.interventions()] == [1, 2]
    c = propose(repo, 3, "c", "epsilon: 0.2", "epsilon: 0.1", "z")
    with pytest.raises(HarnessError, match="not in main's history"):
        repo.restore(repo.head(c.branch), "an unmerged branch is not a main state")


def test_contract_violations(repo: HarnessRepo) -> None:
    wt = repo.start_intervention(3, "sneaky")
    (wt.path / "setup.py").write_text("import os\n")
    (wt.path / "reward.py").unlink()
    (wt.path / "prompts" / "deep").mkdir()
    (wt.path / "prompts" / "deep" / "x.j2").write_text("{{ question }}\n")
    (wt.path / "prompts" / "link.j2").symlink_to("../../outside.txt")
    (wt.path / "skills" / "ok.md").write_text("# fine\n")
    repo.commit(wt, "Sneaky edits", {"Hypothesis": "none"})
    violations = repo.contract_violations(wt.branch)
    assert len(violations) == 4, violations
    joined = "\n".join(violations)
    assert "setup.py: outside the harness contract" in joined
    assert "reward.py: required harness file deleted" in joined
    assert "prompts/deep/x.j2: outside" in joined and "prompts/link.j2: symlink" in joined
    assert "skills/ok.md" not in joined
    with pytest.raises(HarnessError, match="refusing to export.*link.j2"):
        repo.export(wt.branch, repo.path.parent / "export-sneaky")
    assert not (repo.path.parent / "export-sneaky").exists(), "nothing is written before the check"

    # A tree entry named ".." cannot come from a checkout; build the commit by hand.
    blob = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo.path, input="x\n",
                          capture_output=True, text=True, check=True).stdout.strip()
    inner = subprocess.run(["git", "mktree"], cwd=repo.path, input=f"100644 blob {blob}\tx\n",
                           capture_output=True, text=True, check=True).stdout.strip()
    listing = git(repo.path, "ls-tree", "main") + f"040000 tree {inner}\t..\n"
    tree = subprocess.run(["git", "mktree"], cwd=repo.path, input=listing,
                          capture_output=True, text=True, check=True).stdout.strip()
    evil = git(repo.path, "commit-tree", tree, "-p", "main", "-m", "escape").strip()
    git(repo.path, "update-ref", "refs/heads/iv/r3-escape", evil)
    assert repo.changed_paths("iv/r3-escape") == ["../x"]
    assert repo.contract_violations("iv/r3-escape") == ["../x: path escapes the harness repo"]
    with pytest.raises(HarnessError, match="refusing to export"):
        repo.export("iv/r3-escape", repo.path.parent / "export-evil")
    assert not (repo.path.parent / "x").exists() and not (repo.path.parent / "export-evil").exists()


def test_clone_line_promotes_branch(repo: HarnessRepo, tmp_path: Path) -> None:
    merged = propose(repo, 1, "merged", "steps_per_round: 3", "steps_per_round: 6", "x")
    repo.merge(merged.branch, {"Verdict": "merged"}, "Merge it")
    rejected = propose(repo, 1, "rejected", "beta: 0.0", "beta: 0.1", "y")
    repo.reject(rejected.branch, "rejected: worse", {})
    source_main = repo.head()

    line = HarnessRepo.clone_line(repo.path, rejected.branch, tmp_path / "line2")
    assert line.head("main") == repo.head(rejected.branch)
    assert line.config().grpo.beta == 0.1 and git(line.path, "status", "--porcelain") == ""
    assert git(line.path, "branch", "--show-current").strip() == "main"
    assert line.head("parent-main") == source_main
    assert line.head(merged.branch) == repo.head(merged.branch)
    assert line.head("verdict/iv/r1-rejected") == repo.head(rejected.branch), "tags are kept"
    assert [iv.branch for iv in line.interventions()] == [merged.branch]
    assert repo.head() == source_main, "the source line is untouched"
    wt = line.start_intervention(2, "next", worktree_root=tmp_path / "wts")
    edit(wt, "JOURNAL.md", "# Journal", "# Journal of line 2")
    sha = line.commit(wt, "Journal", {"Hypothesis": "none"})
    assert git(line.path, "log", "-1", "--format=%an", sha).strip() == "meta-agent"

    same = HarnessRepo.clone_line(repo.path, "main", tmp_path / "line3")
    assert same.head() == source_main and same.head(rejected.branch) == repo.head(rejected.branch)
    with pytest.raises(HarnessError, match="does not name a commit"):
        HarnessRepo.clone_line(repo.path, "iv/r7-none", tmp_path / "line4")


def test_config_errors_name_the_field(repo: HarnessRepo) -> None:
    wt = repo.start_intervention(4, "bad-knobs")
    edit(wt, "harness.yaml", "group_size: 4", "group_size: 1000\n  warmup: 3")
    repo.commit(wt, "Bigger groups", {})
    with pytest.raises(HarnessError) as err:
        repo.config(wt.branch)
    message = str(err.value)
    assert "grpo.group_size" in message and "1000" in message and "grpo.warmup" in message
    assert repo.config().grpo.group_size == 4, "main is unaffected"

    (wt.path / "harness.yaml").write_text("domain: math\ntasks: [\n")
    repo.commit(wt, "Broken YAML", {})
    with pytest.raises(HarnessError, match="not valid YAML"):
        repo.config(wt.branch)
    (wt.path / "harness.yaml").write_text("domain: chess\n")
    repo.commit(wt, "No tasks", {})
    with pytest.raises(HarnessError, match=r"domain: .*(?s:.*)tasks: Field required"):
        repo.config(wt.branch)


def test_export_and_commit_files(repo: HarnessRepo, tmp_path: Path) -> None:
    out = repo.export("main", tmp_path / "export")
    assert out == (tmp_path / "export").resolve()
    assert (out / "reward.py").read_text() == (repo.path / "reward.py").read_text()
    assert (out / "prompts" / "user.j2").is_file() and not (out / ".git").exists()
    with pytest.raises(HarnessError, match="not an empty directory"):
        repo.export("main", out)

    sha = repo.commit_files({"skills/answer-format.md": "---\nname: answer-format\n---\n"}, "Skill answer-format",
                            {"Skill": "answer-format"})
    assert repo.head() == sha and repo.log(n=1)[0]["trailers"] == {"Skill": ["answer-format"]}
    assert repo.read_file("main", "skills/answer-format.md").startswith("---")
    with pytest.raises(HarnessError, match="outside the harness contract"):
        repo.commit_files({"../escape.md": "x"}, "nope")


def test_git_hooks_never_run(repo: HarnessRepo, tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    for hook in ("pre-commit", "commit-msg", "post-commit", "pre-merge-commit", "post-merge"):
        path = repo.path / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
        path.chmod(0o755)
    wt = propose(repo, 1, "hooked", "epsilon: 0.2", "epsilon: 0.3", "x")
    repo.merge(wt.branch, {"Verdict": "merged"}, "Merge hooked")
    assert not marker.exists()
    assert repo.config().grpo.epsilon == 0.3


@pytest.mark.parametrize("message", [
    "Subject\n\nBody text.\n\nHypothesis: a b\nPredicted-Effect: x down\nPredicted-Effect: y up\n",
    "Subject\n\nKey : spaced\nLong: first\n  continued line\n",
    "Subject only",
    "Key: only one paragraph",
    "Subject\n\nnot a trailer line\nKey: v\n",
    "Subject\n\nurl http://x.y/z\n\nSee: http://x.y/z\n",
])
def test_trailers_parse_like_git(message: str, tmp_path: Path) -> None:
    out = subprocess.run(["git", "interpret-trailers", "--parse"], input=message, capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout
    expected: dict[str, list[str]] = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        expected.setdefault(key, []).append(value.strip())
    assert parse_trailers(message) == expected


def test_trailers_format_roundtrip() -> None:
    block = format_trailers({"Hypothesis": "multi\nline  value", "Predicted-Effect": ["a", "b"],
                             "Skill": None, "Backtest": ""})
    assert block == "Hypothesis: multi line value\nPredicted-Effect: a\nPredicted-Effect: b"
    assert parse_trailers("Subject\n\n" + block) == {"Hypothesis": ["multi line value"],
                                                     "Predicted-Effect": ["a", "b"]}
    with pytest.raises(ValueError, match="not valid"):
        format_trailers({"Bad Key": "x"})


def test_a_relative_worktree_root_is_relative_to_the_caller_not_the_repo(repo, tmp_path, monkeypatch):
    """`bench/compare_arms.py --out runs/compare` handed the loop a relative run folder: git, run in the repo,
    put the worktree under harness/runs/compare/..., and removing it then failed ("is not a working tree")."""
    from meta_agent.run_dir import RunDir

    monkeypatch.chdir(tmp_path)
    rd = RunDir(Path("runs/r1"))
    assert rd.path == tmp_path / "runs" / "r1"
    wt = repo.start_intervention(1, "relative", worktree_root=Path("runs/r1/worktrees"))
    assert wt.path == tmp_path / "runs" / "r1" / "worktrees" / "iv_r1-relative"
    assert (wt.path / "harness.yaml").is_file()
    edit(wt, "harness.yaml", "temperature: 0.7", "temperature: 0.6")
    repo.commit(wt, "Cooler sampling", {"Hypothesis": "less rambling"})
    repo.remove_worktree(wt)
    assert not wt.path.exists() and not (repo.path / "runs").exists()
    assert "iv/r1-relative" in git(repo.path, "branch", "--list", "iv/*")
