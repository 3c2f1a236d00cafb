"""SWE on verl: one agent loop per trajectory driving the domain's bash-tool environment in its own container.

verl 0.9.1 instantiates one ``SweAgentLoop`` per trajectory (``agent_loop_config_path`` YAML entry
``{name: swe_agent, _target_: rl_backend.verl.agent_loop.SweAgentLoop, domain_ref: ...}``; extra keys
are constructor arguments) and awaits ``run``.  ``run``:

1. waits for a container slot (at most ``max_containers`` per worker process, on top of the
   domain's own process-wide cap) and starts the task's container (``domain.environment(task).start()``);
2. alternates policy turns (``server_manager.generate`` on the token ids so far, mask 1) with the
   command's output (encoded, mask 0) until the environment says the episode is done or the
   response budget (``data.max_response_length``) is spent; a reply without exactly one ```` ```bash ````
   block gets the format reminder instead of a command;
3. takes the trusted grading (``env.result()``: exit status, patch, verified, verifier info) and
   returns it through ``extra_fields`` (results, never handles), merged with the LLM output's own
   ``extra_fields`` (``min_global_steps``/``max_global_steps``, which verl's metrics need);
4. removes the container in ``finally``, whatever happened.

The reward entry then sees those fields in ``extra_info``; the verifier's verdict stays trusted.
"""

from __future__ import annotations

import asyncio
import json
import re
from types import SimpleNamespace
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from rl_backend.base import load_domain

ACTION = re.compile(r"```(?:bash|sh)?[ \t]*\n(.*?)\n?```", re.DOTALL)
FORMAT_REMINDER = "Format error: reply with exactly one ```bash block holding one command (or `submit` when done)."
_slots: dict[int, asyncio.Semaphore] = {}


def parse_action(text: str) -> str | None:
    """The one command of a reply, or None when it holds no fenced block or several."""
    blocks = ACTION.findall(text or "")
    return blocks[0].strip() if len(blocks) == 1 and blocks[0].strip() else None


def _slot(limit: int) -> asyncio.Semaphore:
    """This process's container cap (one semaphore per limit, made in the worker's event loop)."""
    if limit not in _slots:
        _slots[limit] = asyncio.Semaphore(limit)
    return _slots[limit]


class SweAgentLoop(AgentLoopBase):
    """A bash agent on one SWE task; see the module docstring."""

    def __init__(self, *args: Any, domain_ref: str = "meta_agent.domains.swe:SweDomain", max_containers: int = 4,
                 name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.domain_ref, self.max_containers = domain_ref, max_containers
        self.response_length = self.config.data.max_response_length

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = dict(kwargs.get("extra_info") or {})
        truth = json.loads(kwargs["reward_model"]["ground_truth"])
        env = load_domain(self.domain_ref).environment(SimpleNamespace(task_id=extra_info.get("task_id"),
                                                                       ground_truth=truth), None)
        async with _slot(self.max_containers):
            try:
                first = await asyncio.to_thread(env.start)
                messages = [*kwargs["raw_prompt"], {"role": "user", "content": first}]
                prompt_ids = await self.ct_build_initial_tokens(messages)
                response, mask, fields, turns = await self._episode(env, prompt_ids, sampling_params,
                                                                    f"{kwargs.get('uid')}_{kwargs.get('session_id')}")
                outcome = await asyncio.to_thread(env.result)
            finally:
                await asyncio.to_thread(env.close)
        fields.update(swe_verified=float(outcome["verified"]), swe_exit_status=str(outcome["exit_status"]),
                      swe_patch=str(outcome["patch"]),
                      swe_verifier_info=json.dumps(outcome.get("verifier_info"), default=str))
        return AgentLoopOutput(prompt_ids=prompt_ids, response_ids=response[:self.response_length],
                               response_mask=mask[:self.response_length], num_turns=turns,
                               metrics=AgentLoopMetrics(), extra_fields=fields)

    async def _episode(self, env: Any, prompt_ids: list[int], sampling_params: dict,
                       request_id: str) -> tuple[list[int], list[int], dict, int]:
        """Policy turns and command outputs until the episode ends or the response budget is spent."""
        response: list[int] = []
        mask: list[int] = []
        fields: dict = {}
        turns = 0
        while len(response) < self.response_length:
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=prompt_ids + response,
                                                        sampling_params=sampling_params)
            fields.update(output.extra_fields or {})
            response += output.token_ids
            mask += [1] * len(output.token_ids)
            turns += 1
            action = parse_action(self.tokenizer.decode(output.token_ids, skip_special_tokens=True))
            if action is None:
                text, done = FORMAT_REMINDER, False
            else:
                observation = await asyncio.to_thread(env.step, action)
                text, done = observation.output, observation.done
            if done:
                return response, mask, fields, turns
            shown = self.tokenizer.encode(f"\n<output>\n{text}\n</output>\n", add_special_tokens=False)
            response += shown
            mask += [0] * len(shown)
        await asyncio.to_thread(env.end, "response_budget")  # graded all the same, like any other end
        return response, mask, fields, turns
