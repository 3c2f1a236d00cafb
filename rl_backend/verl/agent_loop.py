"""SWE on verl: one agent loop per trajectory driving the domain's bash-tool environment in its own container.

verl 0.9.1 instantiates one ``SweAgentLoop`` per trajectory (``agent_loop_config_path`` YAML entry
``{name: swe_agent, _target_: rl_backend.verl.agent_loop.SweAgentLoop, domain_ref: ...}``; extra keys
are constructor arguments) and awaits ``run``.  ``run``:

1. waits for a container slot (at most ``max_containers`` per worker process, on top of the
   domain's own process-wide cap) and starts the task's container (``domain.environment(task).start()``);
2. holds the conversation as chat messages, exactly as agent mode does (``swe_env.agent_loop``: the row
   opens it with the agent system prompt and the task statement, ``agent_messages``; each reply an
   assistant turn, the command's result as a user turn
   ``exit code N\n<output>``, the same format reminder for a reply without exactly one ```` ```bash ````
   block, the episode ended after ``MAX_FORMAT_ERRORS`` of them), and turns it into tokens with the
   model's chat template through verl's Continuous Token builder (``ct_build_initial_tokens``,
   ``ct_merge_assistant_token``, ``ct_merge_context_msg``): the policy's tokens train (mask 1), the
   template's and the user turns' do not (mask 0), and each turn's prompt is the tokens the endpoint's
   chat template gives the same messages in agent mode, until the environment says the episode is done
   or the response budget (``data.max_response_length``) is spent;
3. takes the trusted grading (``env.result()``: exit status, patch, verified, verifier info) and
   returns it through ``extra_fields`` (results, never handles), merged with the LLM output's own
   ``extra_fields`` (``min_global_steps``/``max_global_steps``, which verl's metrics need);
4. removes the container in ``finally``, whatever happened.

The reward entry then sees those fields in ``extra_info``; the verifier's verdict stays trusted.
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from rl_backend.base import load_domain
# agent mode's own parsing and wording: the policy trains on what it is shown when it runs as an agent
from swe_env.agent_loop import FORMAT_REMINDER, MAX_FORMAT_ERRORS, observation_text, parse_action

_slots: dict[int, asyncio.Semaphore] = {}


def _slot(limit: int) -> asyncio.Semaphore:
    """This process's container cap (one semaphore per limit, made in the worker's event loop)."""
    if limit not in _slots:
        _slots[limit] = asyncio.Semaphore(limit)
    return _slots[limit]


def chatml_boundaries(builder: Any, tokenizer: Any, chat_template_kwargs: dict | None) -> Any:
    """verl's token builder, with ChatML's turn boundary when the model's template has one.

    verl 0.9.1 picks a boundary-aware builder by ``config.json``'s ``model_type`` (``qwen2``, ``qwen3``, ...); a
    ChatML model of another type (SmolLM2 is ``llama``) gets the generic builder, which appends the next user
    turn right after the generated ``<|im_end|>`` while the template, as an endpoint renders it in agent
    mode, puts a newline there.  The policy would train on one format and run on another, so such a model gets
    verl's ChatML builder (``QwenContinuousTokenBuilder``: inserts that newline, masked out)."""
    from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder, QwenContinuousTokenBuilder

    if type(builder) is not ContinuousTokenBuilder or "<|im_end|>" not in tokenizer.get_vocab():
        return builder
    probe = [{"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}, {"role": "user", "content": "v"}]
    rendered = tokenizer.apply_chat_template(probe, tokenize=False, **(chat_template_kwargs or {}))
    if "a<|im_end|>\n<|im_start|>user" not in rendered:
        return builder
    return QwenContinuousTokenBuilder(tokenizer, chat_template_kwargs=chat_template_kwargs)


def opening(raw_prompt: Any, first: str) -> list[dict]:
    """The episode's opening conversation: the row's (``round_data``: the domain's agent-mode opening), which must
    end with this episode's task statement; a row that does not is refused, never patched into two instructions."""
    messages = [dict(m) for m in list(raw_prompt)]
    if not messages or messages[-1].get("role") != "user" or messages[-1].get("content") != first:
        raise ValueError("the verl row's prompt is not this episode's agent-mode opening (it must end with the task "
                         "statement env.start() gives): write the round's data with rl_backend.verl.round_data")
    return messages


class SweAgentLoop(AgentLoopBase):
    """A bash agent on one SWE task; see the module docstring."""

    def __init__(self, *args: Any, domain_ref: str = "domains.swe:SweDomain", max_containers: int = 4,
                 max_turn_tokens: int | None = None, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_turn_tokens = max_turn_tokens  # one turn's cap (gpu_profile.SWE_TURN_TOKENS); None: the budget left
        self.continuous_token_builder = chatml_boundaries(self.continuous_token_builder, self.tokenizer,
                                                          self.apply_chat_template_kwargs)
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
                messages = opening(kwargs["raw_prompt"], first)
                prompt_ids = await self.ct_build_initial_tokens(messages)
                ids, mask, fields, turns = await self._episode(env, messages, prompt_ids, sampling_params,
                                                               f"{kwargs.get('uid')}_{kwargs.get('session_id')}")
                outcome = await asyncio.to_thread(env.result)
            finally:
                await asyncio.to_thread(env.close)
        fields.update(swe_verified=float(outcome["verified"]), swe_exit_status=str(outcome["exit_status"]),
                      swe_patch=str(outcome["patch"]),
                      swe_verifier_info=json.dumps(outcome.get("verifier_info"), default=str))
        # verl's split: everything after the first turn's prompt is the response (the builder may rewrite the
        # boundary tokens, so the mask's length says where it starts)
        response, prompt = ids[len(ids) - len(mask):], ids[:len(ids) - len(mask)]
        return AgentLoopOutput(prompt_ids=prompt, response_ids=response[:self.response_length],
                               response_mask=mask[:self.response_length], num_turns=turns,
                               metrics=AgentLoopMetrics(), extra_fields=fields)

    async def _episode(self, env: Any, messages: list[dict], prompt_ids: list[int], sampling_params: dict,
                       request_id: str) -> tuple[list[int], list[int], dict, int]:
        """Policy turns and command results until the episode ends or the response budget is spent; the token ids
        of the whole conversation, the response mask, the LLM outputs' extra fields and the policy's turns."""
        ids, mask = list(prompt_ids), []
        fields: dict = {}
        turns = format_errors = 0
        while len(mask) < self.response_length:
            left = self.response_length - len(mask)
            turn = left if self.max_turn_tokens is None else min(self.max_turn_tokens, left)
            output = await self.server_manager.generate(request_id=request_id, prompt_ids=ids,
                                                        sampling_params=dict(sampling_params, max_tokens=turn))
            # the first output's fields; later ones may only raise max_global_steps (verl's tool agent loop's rule)
            fields = dict(output.extra_fields or {}) if not fields else fields | {
                k: v for k, v in (output.extra_fields or {}).items() if k == "max_global_steps" and v}
            turns += 1
            merged, mask, _ = await self.ct_merge_assistant_token(ids, list(output.token_ids), mask)
            ids = merged.token_ids
            reply = self.tokenizer.decode(output.token_ids, skip_special_tokens=True)
            messages.append({"role": "assistant", "content": reply})
            if len(mask) >= self.response_length:
                break
            action = parse_action(reply)
            if action is None:
                format_errors += 1
                if format_errors >= MAX_FORMAT_ERRORS:
                    await asyncio.to_thread(env.end, "format_error")
                    return ids, mask, fields, turns
                shown = FORMAT_REMINDER
            else:
                observation = await asyncio.to_thread(env.step, action)
                if observation.done:
                    return ids, mask, fields, turns
                shown = observation_text(observation)
            before = list(messages)
            messages.append({"role": "user", "content": shown})
            merged, mask, _ = await self.ct_merge_context_msg(before, messages, ids, mask)
            ids = merged.token_ids
        await asyncio.to_thread(env.end, "response_budget")  # graded all the same, like any other end
        return ids, mask, fields, turns
