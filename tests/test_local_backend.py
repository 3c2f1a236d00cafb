"""The local TRL backend with the real SmolLM2-135M (converted once into the cache), real TRL steps on CPU.

Rounds are tiny (1-2 optimizer steps, 1 prompt x 2 completions of 8 tokens) but nothing is mocked:
the harness is the real math seed (``harness_repo/seeds/math``), with files swapped in where a test
needs a reward with variance, a filter that drops everything, or a reward that crashes.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from domains.math import MathDomain
from rl_backend.archive import validate_rows
from rl_backend.base import Backend, RoundResult, RoundSpec, TrainingFailed, out_of_space
from rl_backend.base import HarnessCodeError
from rl_backend.local import LocalBackend, read_harness_config
from rl_backend.local_trainer import OPTIMIZER_STATE, carry_optimizer_state
from rl_backend.model import ModelUnavailable, ensure_base_model, resolve_model
from sandboxes.harness_client import HarnessFailed, HarnessSession, trajectory_view
from trajectory.schema import TRAJECTORY_SCHEMA

MATH = "domains.math:MathDomain"  # RoundSpec carries the domain by import reference

SEED = Path(__file__).resolve().parents[1] / "harness_repo" / "seeds" / "math"
TINY = {"group_size": 2, "prompts_per_step": 1, "steps_per_round": 1, "max_completion_length": 8}

# Scores alternate within every group, so advantages are never zero; sampling at temperature 1.5 makes two
# identical completions (whose opposite advantages would cancel) practically impossible.
ALTERNATING_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    return {"score": float(extra_info["sample_idx"] % 2), "n_chars": len(solution_str)}
'''
SIGNAL = {"learning_rate": 1e-3, "temperature": 1.5}
# Drops everything, and checks on the way what harness filters may and may not see.
DROP_ALL_FILTERS = '''
def keep_trajectory(traj):
    assert "verified" not in traj and "verifier_info" not in traj, "the trusted verdict leaked to the harness"
    assert isinstance(traj["ground_truth"], dict) and isinstance(traj["reward"], float)
    return False

def keep_group(group):
    assert len(group) == 2 and len({t["group_id"] for t in group}) == 1
    return False
'''
RAISING_REWARD = '''
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    raise ZeroDivisionError("harness reward bug 4711")
'''


def make_harness(root: Path, knobs: dict | None = None, files: dict[str, str] | None = None) -> Path:
    """A copy of the real math seed with knobs overridden and files replaced."""
    shutil.copytree(SEED, root)
    config = yaml.safe_load((root / "harness.yaml").read_text())
    config["grpo"].update({**TINY, **(knobs or {})})
    (root / "harness.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name, text in (files or {}).items():
        (root / name).write_text(text)
    return root


def spec_for(tmp: Path, name: str, harness: Path, policy_in: str | None, round: int = 0,
             out_dir: Path | None = None) -> RoundSpec:
    return RoundSpec(run_id="test", round=round, harness_dir=harness, harness_commit=f"commit-{name}",
                     policy_in=policy_in, out_dir=out_dir or tmp / name / "train", domain=MATH, seed=round,
                     heldout_size=2, heldout_max_tokens=12)


def load_weights(policy: str) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(policy) / "model.safetensors"))


# --------------------------------------------------------------------------- fast: no model needed


@pytest.mark.docker
def test_filters_and_dynamic_sampling_make_the_keep_mask(tmp_path: Path, docker_sandbox) -> None:
    """The sandboxed runtime's one order: rewards, trajectory filter, group filter, dynamic sampling."""
    filters = '''
def keep_trajectory(traj):
    return not traj["truncated"]

def keep_group(group):
    return group[0]["task_id"] != "drop-me"
'''
    harness = make_harness(tmp_path / "h", files={"filters.py": filters})

    def row(task: str, idx: int, answer: str, truncated: bool) -> dict:
        return {"traj_id": f"{task}-{idx}", "run_id": "t", "round": 0, "group_id": task, "sample_idx": idx,
                "task_id": task, "data_source": "reasoning_gym/chain_sum", "prompt": "p", "split": "train",
                "response": f"Answer: {answer}", "response_tokens": 3, "truncated": truncated,
                "finish_reason": "length" if truncated else "stop", "ground_truth": json.dumps({"answer": "1"})}

    rows = [row("a", 0, "1", False), row("a", 1, "0", True),          # one truncated
            row("drop-me", 0, "1", False), row("drop-me", 1, "0", False),  # group filter
            row("flat", 0, "0", False), row("flat", 1, "0", False)]   # zero variance
    views = [trajectory_view(r) for r in rows]
    with HarnessSession(docker_sandbox, harness) as session:
        plain = session.score(views, reward_range=(0.0, 1.0))
        dynamic = session.score(views, reward_range=(0.0, 1.0), dynamic_sampling=True)
    assert [s.reward for s in plain] == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # the seed reward: Answer line vs gold 1
    assert [s.keep for s in plain] == [True, False, False, False, True, True]
    # group "a" keeps one member (reward 1.0 only): no variance left among the kept, so it goes too
    assert [s.keep for s in dynamic] == [False, False, False, False, False, False]
    assert all(s.error is None for s in plain + dynamic)
    with HarnessSession(docker_sandbox, make_harness(tmp_path / "keep_all")) as session:  # the seed keeps all
        masked = session.score(views, reward_range=(0.0, 1.0), mask_truncated=True)
    assert [s.keep for s in masked] == [True, False, True, True, True, True]  # only the truncated one goes


@pytest.mark.docker
def test_harness_errors_name_the_broken_file(tmp_path: Path, docker_sandbox) -> None:
    bad_yaml = make_harness(tmp_path / "yaml")
    (bad_yaml / "harness.yaml").write_text("domain: math\ntasks: []\n")
    spec = spec_for(tmp_path, "yaml", bad_yaml, policy_in=None)
    with pytest.raises(HarnessCodeError, match="harness.yaml"):
        read_harness_config(spec)
    task = MathDomain().tasks("train", read_harness_config(spec_for(tmp_path, "ok", make_harness(tmp_path / "ok"),
                                                                    None)).tasks, 1, 0)[0]
    item = {"question": task.question, "task": task.template_vars()}
    bad_import = make_harness(tmp_path / "imp", files={"filters.py": "import no_such_module_here\n"})
    with HarnessSession(docker_sandbox, bad_import) as session, \
            pytest.raises(HarnessFailed, match="cannot import filters.py.*no_such_module_here"):
        session.render([item])
    undefined = make_harness(tmp_path / "tpl", files={"prompts/user.j2": "{{ question }} {{ answer_key }}"})
    with HarnessSession(docker_sandbox, undefined) as session:
        (rendered,) = session.render([item])
    assert isinstance(rendered, str) and "rendering prompts" in rendered and "answer_key" in rendered
    no_system = make_harness(tmp_path / "nosys")
    (no_system / "prompts" / "system.j2").unlink()
    with HarnessSession(docker_sandbox, no_system) as session:
        (messages,) = session.render([item])
    assert [m["role"] for m in messages] == ["user"] and task.question in messages[0]["content"]


def test_resolve_model_refuses_a_folder_without_config(tmp_path: Path) -> None:
    with pytest.raises(ModelUnavailable, match="no config.json"):
        resolve_model(tmp_path)
    (tmp_path / "config.json").write_text("{}")
    assert resolve_model(str(tmp_path)) == tmp_path


# --------------------------------------------------------------------------- slow: real SmolLM2 + TRL


@pytest.fixture(scope="module")
def base_model() -> Path:
    path = ensure_base_model()
    assert ensure_base_model() == path  # the second call is a cache hit
    assert (path / "config.json").is_file() and (path / "model.safetensors").is_file()
    return path


@pytest.fixture(scope="module")
def workdir(module_dir: Path) -> Path:
    return module_dir


@pytest.fixture(scope="module")
def seed_round(base_model: Path, workdir: Path) -> tuple[RoundSpec, RoundResult, list]:
    """Round 0 from the base model with the unmodified seed reward and filters, 2 steps, laid out as a run's."""
    harness = make_harness(workdir / "seed_harness", knobs={"steps_per_round": 2})
    spec = spec_for(workdir, "seed", harness, policy_in=None, out_dir=workdir / "run" / "rounds" / "0" / "train")
    calls: list = []
    result = LocalBackend().train_round(spec, progress=lambda step, total, m: calls.append((step, total, m)))
    return spec, result, calls


@pytest.fixture(scope="module")
def resumed_round(seed_round, workdir: Path) -> tuple[RoundSpec, RoundResult]:
    """Round 1 from round 0's checkpoint, with a reward that has variance and a large learning rate.

    Round 0's optimizer state is read before the round trains and deleted when it is done: kept here."""
    harness = make_harness(workdir / "char_harness", knobs=SIGNAL,
                           files={"reward.py": ALTERNATING_REWARD})
    spec = spec_for(workdir, "resumed", harness, policy_in=seed_round[1].policy_ref, round=1,
                    out_dir=workdir / "run" / "rounds" / "1" / "train")
    saved = Path(seed_round[1].policy_ref) / OPTIMIZER_STATE
    shutil.copy(saved, workdir / "round0_optimizer_state.pt")
    return spec, LocalBackend().train_round(spec)


@pytest.mark.slow
def test_round_archives_every_rollout_with_harness_reward_and_verifier(seed_round) -> None:
    spec, result, calls = seed_round
    assert isinstance(LocalBackend(), Backend)
    rows = result.rollouts
    assert len(rows) == 2 * 1 * 2  # steps * prompts_per_step * group_size
    table = validate_rows(rows + result.heldout, "local backend test")
    assert table.schema.equals(TRAJECTORY_SCHEMA) and table.num_rows == 6
    assert len({r["traj_id"] for r in rows}) == 4
    assert [(r["step"], r["sample_idx"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {r["group_id"] for r in rows} == {"s0-g0", "s1-g0"}
    assert rows[0]["task_id"] == rows[1]["task_id"]  # one group = one prompt's samples

    spec_reward = importlib.util.spec_from_file_location("seed_reward_for_test", SEED / "reward.py")
    seed_reward = importlib.util.module_from_spec(spec_reward)
    spec_reward.loader.exec_module(seed_reward)
    domain = MathDomain()
    system = (SEED / "prompts" / "system.j2").read_text().strip()
    for r in rows:
        gt = json.loads(r["ground_truth"])
        expected = seed_reward.compute_score(r["data_source"], r["response"], gt)
        assert r["reward"] == expected["score"] and json.loads(r["reward_info"]) == expected
        assert r["verified"] == domain.verify(r["data_source"], r["response"], gt)[0]
        messages = json.loads(r["messages"])
        assert [m["role"] for m in messages] == ["system", "user", "assistant"]
        assert messages[0]["content"] == system and messages[-1]["content"] == r["response"]
        assert messages[1]["content"] in r["prompt"] and r["prompt"].endswith("assistant\n")
        assert r["split"] == "train" and r["domain"] == "math" and r["harness_commit"] == "commit-seed"
        assert r["policy_ref"] == str(ensure_base_model())
        assert 1 <= r["response_tokens"] <= 8
        assert r["finish_reason"] == ("length" if r["truncated"] else "stop")
        assert not r["truncated"] or r["response_tokens"] == 8
        assert r["kept"] is True  # the seed keeps every judged trajectory; the trainer records it per row
    assert [h["kept"] for h in result.heldout] == [None, None]  # an exam answer never trains

    # metrics: one entry per optimizer step, in memory, on disk and through the progress callback
    assert [m["step"] for m in result.metrics] == [1, 2]
    on_disk = [json.loads(line) for line in (spec.out_dir / "metrics.jsonl").read_text().splitlines()]
    assert on_disk == result.metrics
    assert [(s, t) for s, t, _ in calls] == [(1, 2), (2, 2)]
    for m in result.metrics:
        assert {"loss", "reward", "reward_std", "entropy"} <= set(m)
        assert m["harness/kept_trajectories"] == 2 and m["harness/loss_trajectories"] == 2
        assert m["harness/loss_tokens"] > 0
    assert (spec.out_dir / "train.log").read_text().count(" step ") == 2


@pytest.mark.slow
def test_heldout_eval_is_scored_by_the_verifier_only(seed_round) -> None:
    spec, result, _ = seed_round
    policy = Path(result.policy_ref)
    assert policy == spec.out_dir / "policy"
    assert (policy / "config.json").is_file() and (policy / "tokenizer.json").is_file()
    assert not (spec.out_dir / "policy.tmp").exists()
    assert len(result.heldout) == 2
    domain = MathDomain()
    heldout_ids = {t.task_id for t in domain.tasks("heldout", domain.eval_specs, 2, 0)}
    for r in result.heldout:
        assert r["split"] == "heldout" and r["reward"] is None and r["reward_info"] is None
        assert r["task_id"] in heldout_ids and r["policy_ref"] == result.policy_ref
        assert r["verified"] == domain.verify(r["data_source"], r["response"], json.loads(r["ground_truth"]))[0]
        # the eval's generation budget is the trusted one (12), not the harness's max_completion_length (8)
        assert r["response_tokens"] <= spec.heldout_max_tokens
    assert any(r["response_tokens"] > 8 for r in result.heldout) or not any(r["truncated"] for r in result.heldout)
    accuracy = sum(r["verified"] for r in result.heldout) / 2
    assert result.eval["n"] == 2 and result.eval["heldout_accuracy"] == accuracy
    assert set(result.eval["by_source"]) <= {"reasoning_gym/chain_sum", "reasoning_gym/products"}


@pytest.mark.slow
def test_base_policy_sits_the_exam_once_before_training(seed_round, resumed_round) -> None:
    """Round 0 starts from no policy: the untrained model answers the same held-out tasks first, so the
    change training made is paired task by task; a round that starts from a checkpoint has no base exam."""
    _, first, _ = seed_round
    _, later = resumed_round
    assert set(first.eval["base_outcomes"]) == {r["task_id"] for r in first.heldout}  # the same 2 tasks
    assert set(first.eval["base_outcomes"].values()) <= {0.0, 1.0}
    assert first.eval["base"]["n"] == 2
    assert "base" not in later.eval and "base_exam" not in later.eval["seconds"]
    assert {"grpo", "exam"} <= set(later.eval["seconds"])


@pytest.mark.slow
def test_next_round_resumes_from_the_checkpoint_and_moves_the_weights(seed_round, resumed_round) -> None:
    _, first, _ = seed_round
    spec, result = resumed_round
    assert {r["policy_ref"] for r in result.rollouts} == {first.policy_ref}  # generated by round 0's policy
    assert {r["round"] for r in result.rollouts} == {1}
    info = json.loads(result.rollouts[0]["reward_info"])
    assert info["n_chars"] == len(result.rollouts[0]["response"])
    (metrics,) = result.metrics
    assert metrics["reward_std"] > 0 and metrics["grad_norm"] > 0
    before, after = load_weights(first.policy_ref), load_weights(result.policy_ref)
    assert before.keys() == after.keys()
    changed = [k for k in before if not before[k].equal(after[k])]
    assert changed, "a step with lr 1e-3 and non-zero advantages left every weight unchanged"


@pytest.mark.slow
def test_filter_that_drops_everything_leaves_nothing_in_the_loss(resumed_round, workdir: Path) -> None:
    _, previous = resumed_round
    harness = make_harness(workdir / "drop_harness", knobs=SIGNAL,
                           files={"reward.py": ALTERNATING_REWARD, "filters.py": DROP_ALL_FILTERS})
    # weights without the optimizer state: a carried-over Adam keeps moving on its momentum with zero gradients
    fresh = workdir / "drop_policy"
    shutil.copytree(previous.policy_ref, fresh, ignore=shutil.ignore_patterns(OPTIMIZER_STATE))
    result = LocalBackend().train_round(spec_for(workdir, "drop", harness, str(fresh), round=2))
    assert len(result.rollouts) == 2  # still archived: filters mask the loss, not the record
    assert [r["kept"] for r in result.rollouts] == [False, False]
    (metrics,) = result.metrics
    assert metrics["harness/kept_trajectories"] == 0 and metrics["harness/loss_trajectories"] == 0
    assert metrics["harness/loss_tokens"] == 0 and metrics["harness/dropped"] == 2
    assert metrics["reward_std"] > 0  # there was signal, and the filter removed it
    assert metrics["loss"] == 0 and metrics["grad_norm"] == 0
    before, after = load_weights(previous.policy_ref), load_weights(result.policy_ref)
    assert all(before[k].equal(after[k]) for k in before)  # a fresh Adam with zero gradients and no decay moves nothing


@pytest.mark.docker
def test_a_lone_kept_member_of_its_group_trains_nothing(resumed_round, workdir: Path) -> None:
    """rl_backend.grpo_rule on a real TRL step: each group keeps one member, so no baseline is left and nothing
    trains (TRL alone would count the dropped one in the baseline and train the survivor on it)."""
    _, previous = resumed_round
    keep_first = "def keep_trajectory(traj):\n    return traj[\"sample_idx\"] == 0\n"
    harness = make_harness(workdir / "lone_harness", knobs=SIGNAL,
                           files={"reward.py": ALTERNATING_REWARD, "filters.py": keep_first})
    fresh = workdir / "lone_policy"
    shutil.copytree(previous.policy_ref, fresh, ignore=shutil.ignore_patterns(OPTIMIZER_STATE))
    result = LocalBackend().train_round(spec_for(workdir, "lone", harness, str(fresh), round=2))
    (metrics,) = result.metrics
    assert metrics["harness/kept_trajectories"] == 1 and metrics["harness/loss_trajectories"] == 0
    assert metrics["reward_std"] > 0 and metrics["loss"] == 0 and metrics["grad_norm"] == 0
    lone = [r for r in result.rollouts if r["sample_idx"] == 0]
    assert len(lone) == 1 and "only kept member of its group" in json.loads(lone[0]["reward_info"])["dropped"]
    # kept as kept_share counts it (the filters let it in), though the GRPO rule then trains nothing on it
    assert [r["kept"] for r in result.rollouts] == [r["sample_idx"] == 0 for r in result.rollouts]
    before, after = load_weights(previous.policy_ref), load_weights(result.policy_ref)
    assert all(before[k].equal(after[k]) for k in before)


@pytest.mark.slow
def test_next_round_continues_the_previous_rounds_optimizer(seed_round, resumed_round, workdir: Path) -> None:
    """Round 0 took 2 AdamW steps and round 1 one more: round 1 saves moments that have seen all 3, and
    deletes round 0's state (the run keeps its newest only)."""
    _, first, _ = seed_round
    spec, result = resumed_round
    assert not (Path(first.policy_ref) / OPTIMIZER_STATE).exists()
    assert (Path(first.policy_ref) / "model.safetensors").exists()
    saved = torch.load(workdir / "round0_optimizer_state.pt", weights_only=True)
    carried = torch.load(Path(result.policy_ref) / OPTIMIZER_STATE, weights_only=True)
    assert {float(s["step"]) for s in saved["state"].values()} == {2.0}
    assert {float(s["step"]) for s in carried["state"].values()} == {3.0}
    assert {g["lr"] for g in carried["param_groups"]} == {SIGNAL["learning_rate"]}  # this round's rate, not round 0's
    assert "optimizer state carried over" in (spec.out_dir / "train.log").read_text()


@pytest.mark.slow
def test_reward_that_raises_fails_the_round_naming_the_log(base_model: Path, tmp_path: Path, capfd) -> None:
    harness = make_harness(tmp_path / "h", files={"reward.py": RAISING_REWARD})
    spec = spec_for(tmp_path, "boom", harness, policy_in=None)
    with pytest.raises(TrainingFailed) as failure:
        LocalBackend().train_round(spec)
    log = spec.out_dir / "train.log"
    message = str(failure.value)
    assert str(log) in message and "could not judge 2 of 2" in message and "ZeroDivisionError" in message
    assert "harness reward bug 4711" in log.read_text()
    assert not (spec.out_dir / "policy").exists()
    out, err = capfd.readouterr()
    assert out == "" and "Warning" not in err  # libraries talk to train.log, not the terminal


@pytest.mark.slow
def test_prompt_that_does_not_render_fails_before_training(base_model: Path, tmp_path: Path) -> None:
    harness = make_harness(tmp_path / "h", files={"prompts/user.j2": "{{ question }} {{ task.answer }}"})
    spec = spec_for(tmp_path, "tpl", harness, policy_in=None)
    with pytest.raises(TrainingFailed, match="rendering prompts"):
        LocalBackend().train_round(spec)
    assert "metrics.jsonl" not in {p.name for p in spec.out_dir.iterdir()}  # no step was attempted
    too_long = make_harness(tmp_path / "long", knobs={"max_prompt_length": 16})
    with pytest.raises(TrainingFailed, match="max_prompt_length=16"):
        LocalBackend().train_round(spec_for(tmp_path, "long", too_long, policy_in=None))


# Records everything harness code is shown, in the reward and in both filters (through reward_info and
# a module-level log the filters append to and the next reward call reports).
RECORDING_REWARD = '''
import hashlib, json, sys

def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    log = sys.modules.get("filters_log")
    digest = hashlib.sha256(json.dumps([data_source, solution_str, ground_truth], sort_keys=True).encode())
    seen = {"args": [digest.hexdigest()[:16], extra_info, sorted(kwargs)],
            "filters_before": list(log.CALLS) if log else []}
    return {"score": float(extra_info["sample_idx"] % 2), "seen": json.dumps(seen, sort_keys=True)}
'''
RECORDING_FILTERS = '''
import hashlib, json, sys, types
log = sys.modules.setdefault("filters_log", types.ModuleType("filters_log"))
log.CALLS = getattr(log, "CALLS", [])

def _digest(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:12]

def keep_trajectory(traj):
    log.CALLS.append(["traj", _digest(traj)])
    return True

def keep_group(group):
    log.CALLS.append(["group", _digest(group)])
    return True
'''


@pytest.mark.slow
@pytest.mark.docker
def test_training_and_backtest_show_harness_code_the_same_things(base_model: Path, tmp_path: Path,
                                                                 docker_sandbox) -> None:
    """Parity: a harness that records what it is shown records the same in training and in a backtest."""
    from harness_repo.repo import HarnessRepo
    from meta_agent.backtest import SampleData, run_harness
    from meta_agent.config import BacktestSettings

    files = {"filters.py": RECORDING_FILTERS, "reward.py": RECORDING_REWARD}
    repo = HarnessRepo.create(tmp_path / "repo", "math")
    config = yaml.safe_load(repo.read_file("main", "harness.yaml"))
    config["grpo"].update({**TINY, "steps_per_round": 2, "prompts_per_step": 2})
    commit = repo.commit_files({**files, "harness.yaml": yaml.safe_dump(config, sort_keys=False)},
                               "A harness that records what it is shown")
    harness = repo.export(commit, tmp_path / "export")
    spec = RoundSpec(run_id="parity", round=0, harness_dir=harness, harness_commit=commit, policy_in=None,
                     out_dir=tmp_path / "train", domain=MATH, seed=0, heldout_size=1,
                     heldout_max_tokens=4)
    result = LocalBackend(sandbox=docker_sandbox).train_round(spec)
    assert len(result.rollouts) == 2 * 2 * 2

    table = validate_rows(result.rollouts, "parity")
    replay = run_harness(repo, commit, SampleData.of(table), docker_sandbox, tmp_path / "cache",
                         BacktestSettings(), (0.0, 1.0))
    assert replay.failure is None
    def shown(info: dict) -> list:  # the ids harness code saw are opaque, drawn per request (issue 45)
        seen = json.loads(info["seen"])
        return [seen["args"][0], {k: v for k, v in seen["args"][1].items() if k not in ("traj_id", "group_id")},
                seen["args"][2]]

    for row in result.rollouts:
        trained = json.loads(row["reward_info"])
        backtested = replay.results[row["traj_id"]]
        assert backtested["reward"] == row["reward"]
        assert shown(backtested["reward_info"]) == shown(trained)  # same args, same extra_info
    seen = json.loads(json.loads(result.rollouts[-1]["reward_info"])["seen"])
    assert seen["args"][1]["split"] == "train" and "verified" not in json.dumps(seen)
    # one group at a time, in a fresh process per request: training's last request (step 1: groups 2 and 3,
    # one per score lane) showed its last reward no filter call before it; the backtest's one request did
    # show group 1's (its lane's earlier group): counts within a request follow the request's size
    assert seen["filters_before"] == []
    replayed = json.loads(replay.results[result.rollouts[-1]["traj_id"]]["reward_info"]["seen"])
    assert [kind for kind, _ in replayed["filters_before"]] == ["traj", "traj", "group"]


def adamw_after_steps(model: torch.nn.Module, steps: int, lr: float) -> torch.optim.AdamW:
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    for _ in range(steps):
        model(torch.ones(1, model.in_features)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    return optimizer


def test_carried_optimizer_state_keeps_moments_and_takes_this_rounds_hyperparameters() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    saved = adamw_after_steps(model, 2, lr=1e-3).state_dict()
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-2, weight_decay=0.5)
    assert carry_optimizer_state(optimizer, saved)
    assert optimizer.param_groups[0]["lr"] == 5e-2 and optimizer.param_groups[0]["weight_decay"] == 0.5
    for i, param in enumerate(model.parameters()):
        assert optimizer.state[param]["exp_avg"].equal(saved["state"][i]["exp_avg"])
        assert float(optimizer.state[param]["step"]) == 2.0


def test_optimizer_state_of_other_parameters_is_not_carried() -> None:
    saved = adamw_after_steps(torch.nn.Linear(3, 2), 1, lr=1e-3).state_dict()
    other = torch.nn.Linear(4, 2)  # same number of tensors, other shapes
    optimizer = torch.optim.AdamW(other.parameters(), lr=1e-3)
    assert not carry_optimizer_state(optimizer, saved)
    assert not optimizer.state  # left fresh
    two_layers = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    assert not carry_optimizer_state(torch.optim.AdamW(two_layers.parameters()), saved)


def test_a_full_disk_is_the_infrastructures_failure_not_the_harnesss(tmp_path: Path) -> None:
    """A round that runs out of disk (the live bench filled one: torch's writer said only "unexpected pos") is an
    infrastructure failure naming the disk and the fix, so the loop keeps the harness; other errors are not."""
    try:
        with open("/dev/full", "wb") as full:  # a device that is always full: a real ENOSPC
            full.write(b"policy weights")
            full.flush()
    except OSError as exc:
        enospc = exc
    try:
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos") from enospc
    except RuntimeError as exc:
        wrapped = exc
    failed = out_of_space(wrapped, tmp_path / "rounds" / "1" / "train")
    assert failed is not None and failed.party == "infrastructure"
    assert "is full" in str(failed) and "--resume" in str(failed) and "unexpected pos" in str(failed)
    assert out_of_space(RuntimeError("a bug"), tmp_path) is None  # this disk has room: not a full disk
