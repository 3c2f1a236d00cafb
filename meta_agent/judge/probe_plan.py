"""What the probe constructs: the round training would run next, on fresh tasks, with answers to score.

A probe session is shaped exactly like training (``judge.probe`` drives it; ``judge.probe_verdict`` judges what it
paid).  This module builds what it sends: the context training would go on in (:class:`ProbeContext`: the run, the
next round, how prompts are wrapped, the latest round's groups), the task seed (:func:`probe_seed`), and the rows of
each optimizer step (:func:`step_rows`) or of an agent-mode round (:func:`agent_rows`), named as training names
them.  About :data:`ARCHIVED_SHARE` of the tasks are answered by an archived group of the latest round
(:func:`with_archived`: math re-targeted, ``judge.probe_archived``; code and SWE, ``judge.probe_archived_code``);
the others by constructed answers of the four :data:`KINDS` (``judge.probe_answers``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import secrets
from collections import Counter
from dataclasses import dataclass, field

from meta_agent.judge.probe_answers import Constructed
from meta_agent.judge.probe_archived import RETARGETED_DOMAINS, ArchivedGroup, archived_groups, retarget
from meta_agent.judge.probe_archived_code import (CODE_DOMAINS, ArchivedAnswers, RealPatch, archived_answer_groups,
                                                  archived_surfaces, real_wrong_patches, retarget_code,
                                                  swe_wrong_member)
from meta_agent.judge.probe_answers_surface import Surface
from meta_agent.judge.probe_verl import trained_on_verl
from meta_agent.prompt_checks import TOKEN, prompt_text

KINDS = ("right", "formatted_wrong", "unformatted", "truncated")
ARCHIVED_SHARE = 0.75
"""About this share of a probe's groups are archived groups re-targeted to its fresh tasks (where the domain's
answers can be re-targeted, ``probe_archived.RETARGETED_DOMAINS``); the rest are constructed, an extra check."""
ARCHIVED_ROWS = 20_000
"""The latest round's first rows the probe draws its archived groups from (a bound on the probe's memory)."""
AGENT_GROUP = "train-agent-g"
"""How ``swe_env.agent_loop.collect`` names a training group: the mark of an agent-mode round."""



def probe_seed(secret: bytes | None, round: int) -> int:
    """The probe's task seed: HMAC-SHA256 of ``probe/<round>/<nonce>`` under the run's draw secret, keyed apart
    from training's ``train-draw/<n>`` (``loop.round_seed``), with a fresh nonce for every probe, so neither a
    resume nor a second backtest of the round replays a draw, and no probe seed tells a training one."""
    if secret is None:
        return secrets.randbits(63)
    nonce = secrets.token_hex(16)
    digest = hmac.new(secret, f"probe/{round}/{nonce}".encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # 63 bits, as the probe's own draw


@dataclass
class ProbeContext:
    """Where training would go next: the run it extends, the round it would be, how prompts are wrapped."""

    run_id: str
    round: int
    wrappers: dict[tuple, list[str]] = field(default_factory=dict)
    """Per tuple of chat roles, the text around each message in an archived chat-templated prompt."""
    agent: bool = False
    """The latest round was collected in agent mode (``--backend endpoint``: multi-turn episodes)."""
    verl: bool = False
    """The latest round was trained on verl (``judge.probe_verl``: the probe scores in verl's two calls)."""
    archived: dict[str, list[ArchivedGroup]] = field(default_factory=dict)
    """Real groups of the latest round, by data source: most of the probe's groups are these, re-targeted to
    fresh tasks (``judge.probe_archived``)."""
    answers: list[ArchivedAnswers] = field(default_factory=list)
    """Code and SWE: the latest round's groups, their answers put around the fresh tasks' code
    (``judge.probe_archived_code``)."""
    wrong_patches: dict[str, list[RealPatch]] = field(default_factory=dict)
    """SWE: the latest round's rejected patches with their records, per task (``real_wrong_patches``)."""
    surfaces: list[Surface] = field(default_factory=list)
    """SWE: how the latest round's rejected answers are laid out, any task (``archived_surfaces``): constructed
    wrong answers wear them."""

    @classmethod
    def of(cls, rows: list[dict]) -> ProbeContext:
        """The latest run in ``rows`` and the round after its latest; prompt wrappers learnt from the rows."""
        latest = max(rows, key=lambda r: r["round"]) if rows else {"run_id": "run", "round": -1}
        runs = Counter(r["run_id"] for r in rows if r["round"] == latest["round"])
        run_id = runs.most_common(1)[0][0] if runs else latest["run_id"]
        last = [r for r in rows if r["round"] == latest["round"] and r["run_id"] == run_id]
        agent = any(str(r.get("group_id")).startswith(AGENT_GROUP) for r in last)
        return cls(run_id, int(latest["round"]) + 1, _wrappers(rows), agent, trained_on_verl(last),
                   archived_groups(last[:ARCHIVED_ROWS]), archived_answer_groups(last[:ARCHIVED_ROWS]),
                   real_wrong_patches(last[:ARCHIVED_ROWS]),
                   archived_surfaces(last[:ARCHIVED_ROWS]) if any(str(r.get("data_source") or "").startswith("swe")
                                                                  for r in last[:8]) else [])

    def prompt(self, messages: list[dict]) -> str:
        """The chat-templated text training would archive for ``messages``."""
        pieces = self.wrappers.get(tuple(m["role"] for m in messages))
        if pieces is None:
            return prompt_text(messages)
        return pieces[0] + "".join(m["content"] + p for m, p in zip(messages, pieces[1:]))


def _wrappers(rows: list[dict]) -> dict[tuple, list[str]]:
    found: dict[tuple, list[str]] = {}
    for r in rows:
        try:
            messages = json.loads(r["messages"])[:-1] if isinstance(r.get("messages"), str) else None
        except ValueError:
            continue
        prompt = r.get("prompt")
        if not messages or not isinstance(prompt, str):
            continue
        roles = tuple(m.get("role") for m in messages)
        if roles in found:
            continue
        pieces, pos = [], 0
        for m in messages:
            at = prompt.find(str(m.get("content")), pos)
            if at < 0:
                break
            pieces.append(prompt[pos:at])
            pos = at + len(str(m.get("content")))
        else:
            found[roles] = pieces + [prompt[pos:]]
    return found


def with_archived(answers: list[dict], tasks: list, context: ProbeContext, domain, group_size: int,
                   rng: random.Random) -> list[dict]:
    """``answers`` (constructed, one dict per task), with about ``ARCHIVED_SHARE`` of the tasks answered by an
    archived group of the task's generator instead (``{"archived": [answer per member]}``)."""
    code = domain.name in CODE_DOMAINS
    if not (context.answers if code else domain.name in RETARGETED_DOMAINS and context.archived):
        return answers
    out = list(answers)
    for t, task in enumerate(tasks):
        groups = context.answers if code else context.archived.get(task.data_source) or []
        if not groups or rng.random() >= ARCHIVED_SHARE:
            if domain.name == "swe" and "formatted_wrong" in out[t]:  # the policy's own, or laid out as its are
                out[t] = out[t] | {"formatted_wrong": swe_wrong_member(
                    task, ("", "diff", "\n```"), False, None, context.wrong_patches.get(str(task.task_id), []),
                    context.surfaces, rng)}
            continue
        if code:  # the policy's answers around the fresh task's code (any archived group of the domain fits)
            moved = retarget_code(rng.choice(groups), task, rng, group_size, domain.name,
                                  context.wrong_patches.get(str(task.task_id), []))
            out[t] = {"archived": moved} if moved is not None else out[t]
            continue
        for group in rng.sample(groups, min(len(groups), 8)):  # one whose question holds as many numbers
            moved = retarget(group, task, rng, group_size)
            if moved is not None:
                out[t] = {"archived": moved}
                break
    return out


def step_rows(context: ProbeContext, step: int, tasks: list, rendered: list, answers: list[dict], knobs,
               start: int) -> list[tuple[dict, str, Constructed]]:
    """One optimizer step's trajectory rows, named as the local backend names them."""
    rows = []
    for group, (task, messages, constructed) in enumerate(zip(tasks, rendered, answers)):
        for idx in range(knobs.group_size):
            # kinds follow one another across the session from a secret start: every kind on every task when
            # group_size >= 4, and every kind in the session when the session holds at least four trajectories;
            # an archived group (``with_archived``) keeps its own members, in order
            kind = KINDS[(start + (step * knobs.prompts_per_step + group) * knobs.group_size + idx) % len(KINDS)]
            answer = constructed[kind] if "archived" not in constructed else constructed["archived"][idx]
            kind = kind if "archived" not in constructed else "archived"
            tokens = knobs.max_completion_length if answer.truncated else min(len(TOKEN.findall(answer.response)) + 1,
                                                                               knobs.max_completion_length)
            rows.append(({
                "traj_id": f"{context.run_id}-r{context.round}-s{step}-g{group}-{idx}", "run_id": context.run_id,
                "round": context.round, "group_id": f"s{step}-g{group}", "sample_idx": idx, "task_id": task.task_id,
                "data_source": task.data_source, "prompt": context.prompt(messages), "response": answer.response,
                "ground_truth": task.ground_truth, "response_tokens": tokens, "truncated": answer.truncated,
                "finish_reason": "length" if answer.truncated else "stop", "split": "train",
            }, kind, answer))
    return rows




def agent_rows(make, domain, config, context: ProbeContext,
               seed: int) -> tuple[list, list[tuple[dict, str, Constructed]]]:
    """An agent-mode round's tasks and rows as ``--backend endpoint`` collects it: no render (episodes start from
    the environment's task statement), rows named as ``swe_env.agent_loop.collect`` names them."""
    knobs = config.grpo
    n_tasks = knobs.steps_per_round * knobs.prompts_per_step  # the whole round, as for single turns
    tasks = domain.tasks("train", config.tasks, n_tasks, seed)
    rng = random.Random(seed)
    start = rng.randrange(len(KINDS))
    answers = make(tasks, rng, knobs.max_completion_length, domain)
    rows = []
    for t, (task, made) in enumerate(zip(tasks, answers)):
        for k in range(knobs.group_size):
            index = t * knobs.group_size + k
            kind = KINDS[(start + index) % len(KINDS)]
            answer = made[kind]
            rows.append(({
                "traj_id": f"{context.run_id}-r{context.round}-train-agent-{index}", "run_id": context.run_id,
                "round": context.round, "group_id": f"{AGENT_GROUP}{t}", "sample_idx": k, "task_id": task.task_id,
                "data_source": task.data_source, "prompt": answer.prompt, "response": answer.response,
                "ground_truth": task.ground_truth, "response_tokens": 2 * len(TOKEN.findall(answer.response)) + 16,
                "truncated": answer.truncated, "finish_reason": answer.finish_reason, "split": "train",
            }, kind, answer))
    return tasks, rows
