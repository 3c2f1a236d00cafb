"""The SWE agent loop on verl 0.9.1's ``AgentLoopBase``: a scripted policy drives a real task container.

The policy is a stand-in for verl's LLM server client (``generate`` returns verl's ``TokenOutput`` with
the SmolLM2 tokenizer's ids of scripted replies); the container, the commands and the grading are real.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("verl", reason="verl 0.9.1 is installed by `pip install .[verl]` (scripts/setup.sh: .venv-verl)")

from harness_repo.contract import GRPOKnobs  # noqa: E402
from rl_backend.verl.config import LaunchOptions, RoundPlan, build_overrides  # noqa: E402

pytestmark = [pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[1]
TASK = "sqlparse-0.5.5-begin-transaction"


class ScriptedPolicy:
    """verl's ``server_manager.generate``, answering from a script; ``fail_at`` raises on that turn."""

    def __init__(self, tokenizer, replies: list[str], fail_at: int | None = None, eos: bool = False) -> None:
        self.tokenizer, self.replies, self.fail_at, self.turn, self.eos = tokenizer, replies, fail_at, 0, eos
        self.prompts: list[list[int]] = []
        self.caps: list[int | None] = []  # each turn's max_tokens

    async def generate(self, *, request_id, prompt_ids, sampling_params, **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.turn += 1
        self.prompts.append(list(prompt_ids))
        self.caps.append(sampling_params.get("max_tokens"))
        if self.turn == self.fail_at:
            raise ConnectionError("the rollout server went away")
        ids = self.tokenizer.encode(self.replies[self.turn - 1], add_special_tokens=False)
        # a served model stops at its end-of-turn token and returns it with the reply
        ids += [self.tokenizer.eos_token_id] if self.eos else []
        return TokenOutput(token_ids=ids, extra_fields={"min_global_steps": 3, "max_global_steps": 3})


@pytest.fixture(scope="module")
def checked(docker_sandbox):
    """The task built and checked once (cached by swe_env.build), as the SWE agent tests do."""
    from swe_env.build import check_spec
    from swe_env.tasks import find_spec

    record = check_spec(find_spec(TASK), log=lambda _: None)
    assert record.checked, record.reason


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from rl_backend.model import resolve_model

    return AutoTokenizer.from_pretrained(resolve_model(None))


def agent_loop(tmp_path: Path, tokenizer, policy):
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from rl_backend.verl.agent_loop import SweAgentLoop
    from rl_backend.verl.round_data import agent_turn_tokens
    from rl_backend.verl.validate import compose

    plan = RoundPlan.for_round(tmp_path, 1)
    cfg = compose(build_overrides(GRPOKnobs(max_completion_length=4096, max_prompt_length=2048), LaunchOptions(), plan,
                                  model_path="/m",
                                  harness_dir=tmp_path, domain_ref="domains.swe:SweDomain", run_id="s1",
                                  round=0))
    asyncio.set_event_loop(asyncio.new_event_loop())  # verl's agent loop keeps the loop current when it is made
    return SweAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=policy, tokenizer=tokenizer,
                        processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data),
                        domain_ref="domains.swe:SweDomain", max_containers=1,
                        max_turn_tokens=agent_turn_tokens())  # as verl passes agent_loops.yaml's keys


def containers() -> list:
    """This process's agent containers, running or not."""
    from sandboxes.docker import connect_engine

    return connect_engine().containers.list(all=True, filters={
        "label": ["meta_agent.swe_agent=1", f"meta_agent.owner_pid={os.getpid()}"]})


def opening() -> list[dict]:
    """The agent-mode opening of an episode of ``TASK``: what the pipeline's row for it carries."""
    from domains.swe import SweDomain

    return SweDomain().agent_messages(SimpleNamespace(ground_truth={"task_id": TASK}))


def run(loop, raw_prompt: list[dict] | None = None) -> object:
    return loop.loop.run_until_complete(loop.run(
        sampling_params={"temperature": 1.0}, raw_prompt=raw_prompt or opening(),
        uid="u1", session_id=0, extra_info={"task_id": TASK},
        reward_model={"ground_truth": json.dumps({"task_id": TASK})}))


def test_container_lifecycle_with_a_scripted_policy(tmp_path: Path, tokenizer, checked):
    replies = ["I will look first.\n```bash\nls\n```", "no command in this reply", "```bash\nsubmit\n```"]
    from rl_backend.gpu_profile import SWE_TURN_TOKENS

    policy = ScriptedPolicy(tokenizer, replies)
    out = run(agent_loop(tmp_path, tokenizer, policy))
    assert containers() == []  # removed in finally
    assert out.num_turns == 3
    # each turn capped at the registration's per-turn budget (gpu_profile.SWE_TURN_TOKENS), within what is left
    assert policy.caps == [SWE_TURN_TOKENS] * 3
    assert out.extra_fields["min_global_steps"] == 3 and out.extra_fields["max_global_steps"] == 3
    assert out.extra_fields["swe_exit_status"] == "submitted" and out.extra_fields["swe_patch"] == ""
    assert out.extra_fields["swe_verified"] == 0.0  # nothing changed: the bug is still there
    policy_tokens = sum(len(tokenizer.encode(r, add_special_tokens=False)) for r in replies)
    assert sum(out.response_mask) == policy_tokens  # every policy token trains, no command output does
    shown = tokenizer.decode([t for t, m in zip(out.response_ids, out.response_mask) if m == 0])
    assert "Format error" in shown and "exit code 0\n" in shown and "<|im_start|>user" in shown


def test_a_row_that_is_not_the_episodes_agent_opening_is_refused(tmp_path: Path, tokenizer, checked):
    """A patch-mode prompt (or any other) is never continued with the bash environment's instructions."""
    policy = ScriptedPolicy(tokenizer, ["```bash\nsubmit\n```"])
    with pytest.raises(ValueError, match="not this episode's agent-mode opening"):
        run(agent_loop(tmp_path, tokenizer, policy), raw_prompt=[{"role": "user", "content": "Fix the bug."}])
    assert containers() == [] and policy.turn == 0


def test_container_removed_when_the_policy_fails(tmp_path: Path, tokenizer, checked):
    policy = ScriptedPolicy(tokenizer, ["```bash\nls\n```", "unused"], fail_at=2)
    with pytest.raises(ConnectionError):
        run(agent_loop(tmp_path, tokenizer, policy))
    assert containers() == []


def pipeline_row(tmp_path: Path) -> dict:
    """The first training row the verl pipeline writes for a round of the seed SWE harness on ``TASK``
    (``round_data.write_round_data``: the harness's draw and rendering, in the Docker sandbox), as verl reads it."""
    import shutil

    import pyarrow.parquet as pq
    import yaml

    from rl_backend.base import RoundSpec, parse_harness_yaml
    from rl_backend.verl.round_data import write_round_data
    from sandboxes.docker import DockerSandbox

    harness = tmp_path / "harness"
    shutil.copytree(REPO / "harness_repo" / "seeds" / "swe", harness)
    config = yaml.safe_load((harness / "harness.yaml").read_text())
    config["tasks"] = [{"name": TASK}]
    config["grpo"].update(prompts_per_step=1, steps_per_round=1)
    (harness / "harness.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    spec = RoundSpec(run_id="s1", round=0, harness_dir=harness, harness_commit="c" * 40, policy_in=None,
                     out_dir=tmp_path / "round", domain="domains.swe:SweDomain", heldout_size=1)
    plan = RoundPlan.for_round(spec.out_dir, 1)
    write_round_data(spec, parse_harness_yaml(harness), plan, DockerSandbox())
    row = pq.read_table(plan.train_file).to_pylist()[0]
    assert json.loads(row["reward_model"]["ground_truth"])["task_id"] == TASK
    return row


def test_each_turn_is_the_prompt_agent_modes_endpoint_renders_from_the_same_conversation(tmp_path: Path, tokenizer,
                                                                                         checked):
    """Agent mode sends chat messages to an endpoint, which applies the model's chat template; the verl loop builds
    tokens itself.  The same replies on the same task, the verl loop fed the row the pipeline wrote: every turn's
    prompt must be the same tokens (one conversation per mode, not the patch-mode prompt before the bash one)."""
    from domains.swe import SweDomain
    from swe_env.agent_loop import run_episode
    from swe_env.policy_client import PolicyClient
    from llm_server import ScriptedLLMServer, text  # tests/ (a `tests` package in the verl venv shadows ours)

    replies = ["Let me look.\n```bash\nhead -3 sqlparse/__init__.py\n```", "Thinking, no command yet.",
               "```bash\nsubmit\n```"]
    task = SimpleNamespace(task_id=TASK, ground_truth={"task_id": TASK})  # as the verl loop hands it over
    with ScriptedLLMServer() as server:
        server.script(*(text(r) for r in replies))
        traj = run_episode(SweDomain().environment(task, None), PolicyClient(server.api_base, "scripted"))
        agent_turns = [request["messages"] for request in server.requests]
    assert traj.exit_status == "submitted" and len(agent_turns) == 3

    policy = ScriptedPolicy(tokenizer, replies, eos=True)
    out = run(agent_loop(tmp_path, tokenizer, policy), raw_prompt=pipeline_row(tmp_path)["prompt"])
    assert out.num_turns == 3 and len(policy.prompts) == 3
    for turn, (messages, prompt_ids) in enumerate(zip(agent_turns, policy.prompts)):
        # as a chat endpoint (vLLM) renders a request: the template's text, then its tokens without extra specials
        rendered = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
                                    add_special_tokens=False)
        assert prompt_ids == rendered, (turn, tokenizer.decode(prompt_ids)[-400:], tokenizer.decode(rendered)[-400:])
    # the policy's tokens train (its replies and their end-of-turn tokens), nothing the template or the user added
    trained = [t for t, m in zip(out.response_ids, out.response_mask) if m == 1]
    expected = [t for r in replies for t in tokenizer.encode(r, add_special_tokens=False) + [tokenizer.eos_token_id]]
    assert trained == expected
