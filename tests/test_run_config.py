"""The typed run configuration (run.json), the registry of domains / backends / agents, and the CLI over them.

The CLI is run for real, in a subprocess; only the test that starts a run needs Docker.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from meta_agent import registry
from meta_agent.budget import Budget, BudgetCaps
from meta_agent.config import BacktestSettings, EvaluationSettings, GateThresholds, TripwireThresholds
from meta_agent.errors import UserError
from meta_agent.registry import UnknownName
from meta_agent.run_config import LineSource, RunConfig, RunConfigError, load_run_config, save_run_config

ROOT = Path(__file__).resolve().parents[1]
OLD_RUN_JSON = {  # what run_cli wrote before run.json was a RunConfig
    "run_id": "old", "domain": "math", "backend": "local", "rounds": 4, "model_path": None, "agent": "recipe",
    "model": None, "api_base": None, "candidates": 1,
    "backtest": {"sample_groups": 32, "max_sample_groups": 512, "seed": 0, "timeout_s": 300.0, "memory_mb": 1024,
                 "cpus": 1.0, "pids": 64},
    "max_agent_steps": 30,
    "budget": {"run_tokens": None, "run_cost_usd": 2.5, "round_tokens": None, "round_cost_usd": None,
               "run_compute_hours": None},
    "from": {"run": "/runs/a", "branch": "iv/r0-x"}, "created": 1700000000.0,
}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "meta_agent", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def old_run(path: Path, data: dict | str = OLD_RUN_JSON) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(data if isinstance(data, str) else json.dumps(data))
    return path / "run.json"


# -- registry ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, name, text, offered", [
    ("domain", "chess", "unknown domain 'chess'", "available: math, code, swe"),
    ("backend", "jax", "unknown backend 'jax'", "available: local, verl, endpoint"),
    ("agent", "gpt", "unknown agent 'gpt'", "available: recipe, llm"),
])
def test_an_unknown_or_unbuilt_name_is_refused_listing_the_available_ones(tmp_path, kind, name, text, offered):
    with pytest.raises(UnknownName) as caught:
        registry.check(kind, name)
    assert text in str(caught.value) and offered in str(caught.value)
    assert isinstance(caught.value, UserError), "a user error: one line, no traceback"
    proc = cli(f"--{kind}", name, "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stderr
    assert text in proc.stderr and offered in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()


def test_registry_imports_nothing_heavy_and_every_entry_resolves():
    code = ("import sys; from meta_agent import registry, run_config, run_cli; "
            "registry.check('backend', 'local'); print(sorted({'torch', 'trl', 'litellm'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr
    for kind, table in registry.KINDS.items():
        for name, target in table.items():
            if target is not None:
                assert callable(registry.load(kind, name)), f"{kind} {name}: {target}"
    assert registry.make_domain("math").name == "math"


def test_agents_get_the_options_they_take_and_share_budget_and_sandbox():
    from meta_agent.agents.llm import LLMAgent
    from meta_agent.agents.recipe import RecipeAgent

    budget = Budget(BudgetCaps(run_tokens=10))
    config = RunConfig(run_id="r", agent="llm", model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9",
                       max_agent_steps=7)
    agent = registry.make_agent("llm", config, budget, sandbox=None)
    assert isinstance(agent, LLMAgent) and agent.budget is budget
    assert (agent.model, agent.api_base, agent.max_steps) == ("openai/gpt-4o-mini", "http://127.0.0.1:9", 7)
    assert isinstance(registry.make_agent("recipe", RunConfig(run_id="r"), budget, None), RecipeAgent)
    assert registry.agent_options("llm") == {"model": True, "api_base": False, "max_agent_steps": False}
    assert registry.agent_options("recipe") == {}


# -- RunConfig and run.json ----------------------------------------------------------------


def test_an_old_run_json_loads_with_the_defaults_it_ran_with(tmp_path):
    path = old_run(tmp_path / "run")
    config = load_run_config(path)
    assert (config.rounds, config.candidates, config.backtest.sample_groups) == (4, 1, 32)
    assert config.budget.run_cost_usd == 2.5 and config.created == 1700000000.0
    assert config.from_ == LineSource(run="/runs/a", branch="iv/r0-x")
    assert config.gate == GateThresholds() and config.tripwire == TripwireThresholds()
    assert config.evaluation == EvaluationSettings()
    # and a minimal one, as tests and older tools write it
    minimal = load_run_config(old_run(tmp_path / "min", {"run_id": "m", "domain": "math", "agent": "recipe"}))
    assert minimal.budget == BudgetCaps() and minimal.from_ is None and minimal.rounds == 3
    # what is saved loads back the same, with "from" spelled as in the file
    save_run_config(path, config)
    assert json.loads(path.read_text())["from"] == {"run": "/runs/a", "branch": "iv/r0-x"}
    assert load_run_config(path) == config
    with pytest.raises(ValidationError):
        config.rounds = 9  # frozen: a change goes through updated(), which validates
    assert config.updated({"budget": {"round_tokens": 5}}).budget == BudgetCaps(run_cost_usd=2.5, round_tokens=5)


@pytest.mark.parametrize("content, names", [
    ('{"run_id": "x", "rounds": ', ["not valid JSON", "line 1"]),
    (json.dumps(OLD_RUN_JSON | {"rounds": "three"}), ["rounds", "valid integer"]),
    (json.dumps(OLD_RUN_JSON | {"backtest": {"sample_groups": 1}}), ["backtest.sample_groups", "greater than"]),
    (json.dumps(OLD_RUN_JSON | {"gate_margin": 0.5}), ["gate_margin", "not permitted"]),
    (json.dumps(OLD_RUN_JSON | {"domain": "chess"}),
     ["domain", "unknown domain 'chess'", "available: math, code, swe"]),
    ("[1, 2]", ["whole file", "dictionary"]),
])
def test_an_unusable_run_json_is_a_clear_error_naming_file_and_field(tmp_path, content, names):
    path = old_run(tmp_path / "run", content)
    with pytest.raises(RunConfigError) as caught:
        load_run_config(path)
    assert str(path) in str(caught.value)
    proc = cli("--resume", "--run-dir", str(path.parent))
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and str(path) in proc.stderr and "--run-dir" in proc.stderr
    for name in names:
        assert name in proc.stderr
    assert path.read_text() == content


def test_resume_refuses_options_it_would_ignore_and_leaves_run_json_as_it_was(tmp_path):
    path = old_run(tmp_path / "run")
    before = path.read_bytes()
    for args, named in [
        (["--domain", "code", "--backend", "verl", "--sample-groups", "8", "--rounds", "9", "--from-branch", "main",
          "--from-run", str(tmp_path)],
         ["--domain (run.json has domain: math)", "--backend (run.json has backend: local)",
          "--sample-groups (run.json has sample_groups: 32)",
          "--from-branch", "--from-run", "only --rounds, --candidates, --max-agent-steps, --budget-tokens"]),
        (["--agent", "llm", "--model", "openai/gpt-4o-mini"],
         ["--agent (run.json has agent: recipe)", "--model (run.json has model: none)"]),
        (["--max-agent-steps", "5"], ["--agent recipe takes no --max-agent-steps"]),
        (["--no-rollback"], ["--no-rollback (run.json has rollback: on)"]),
        (["--rounds", "-1"], ["--rounds: Input should be greater than or equal to 0"]),
    ]:
        proc = cli("--resume", "--run-dir", str(path.parent), *args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Traceback" not in proc.stderr
        for text in named:
            assert text in proc.stderr, (args, proc.stderr)
        assert path.read_bytes() == before, args


@pytest.mark.parametrize("args, said", [
    (["--backtest-workers", "2"], "workers and ray_address shard a backtest of every group: set all_groups "
                                  "(--sample-groups all)"),
    (["--backtest-ray-address", "auto", "--sample-groups", "64"], "shard a backtest of every group"),
    (["--sample-groups", "most"], "'most' is neither a number of groups nor 'all'"),
    (["--sample-groups", "1"], "a sample needs at least 2 groups, got 1"),
])
def test_backtest_sharding_of_a_run_is_refused_without_every_group(tmp_path, args, said):
    proc = cli("--rounds", "0", "--candidates", "0", *args, "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert said in " ".join(proc.stderr.split())
    assert not (tmp_path / "run" / "run.json").exists()


@pytest.mark.docker
def test_a_new_run_records_every_trusted_number_and_resume_changes_only_what_may(tmp_path, docker_sandbox):
    run_dir = tmp_path / "run"
    proc = cli("--rounds", "0", "--candidates", "0", "--sample-groups", "16", "--budget-round-tokens", "1000",
               "--run-dir", str(run_dir))
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((run_dir / "run.json").read_text())
    assert saved["candidates"] == 0, "--candidates 0 means none"
    assert saved["gate"] == GateThresholds().model_dump() and saved["tripwire"] == TripwireThresholds().model_dump()
    assert saved["backtest"] == BacktestSettings(sample_groups=16).model_dump()
    assert saved["evaluation"] == {"heldout_size": 128, "heldout_seed": 0,
                                   "heldout_max_tokens": registry.make_domain("math").exam_max_tokens}
    assert saved["budget"] == BudgetCaps(round_tokens=1000).model_dump()
    assert (saved["run_id"], saved["domain"], saved["backend"], saved["agent"]) == ("run", "math", "local", "recipe")
    assert saved["rollback"] is True  # after an exam that fell, the next round starts from the fallen one's start
    assert load_run_config(run_dir / "run.json").to_json() == saved
    every = tmp_path / "every"  # backtests of every archived group, sharded over a local Ray of 2
    proc = cli("--rounds", "0", "--candidates", "0", "--sample-groups", "all", "--backtest-workers", "2",
               "--no-rollback", "--run-dir", str(every))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((every / "run.json").read_text())["rollback"] is False
    assert json.loads((every / "run.json").read_text())["backtest"] == BacktestSettings(all_groups=True,
                                                                                        workers=2).model_dump()

    # an old-format run.json resumes: what may change does, the rest stays, and the file records every number
    (run_dir / "run.json").write_text(json.dumps(OLD_RUN_JSON | {"run_id": "run", "from": None}))
    proc = cli("--resume", "--run-dir", str(run_dir), "--rounds", "0", "--candidates", "3", "--budget-round-cost",
               "0.1", "--domain", "math")
    assert proc.returncode == 0, proc.stderr
    resumed = json.loads((run_dir / "run.json").read_text())
    assert (resumed["rounds"], resumed["candidates"], resumed["budget"]) == (
        0, 3, BudgetCaps(run_cost_usd=2.5, round_cost_usd=0.1).model_dump())
    assert resumed["created"] == OLD_RUN_JSON["created"] and resumed["backtest"]["sample_groups"] == 32
    assert resumed["gate"] == GateThresholds().model_dump()
    assert resumed["evaluation"] == EvaluationSettings().model_dump()

    # a state.json changed by hand is a clear error naming the file, and nothing is overwritten
    (run_dir / "state.json").write_text('{"round": 0, "phase"')
    proc = cli("--resume", "--run-dir", str(run_dir))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "state.json is unreadable" in " ".join(proc.stderr.split())
    assert (run_dir / "state.json").read_text() == '{"round": 0, "phase"'
