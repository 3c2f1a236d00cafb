"""Enough groups to judge a dead slice (``main:dead_slice``, ``meta_agent.slice_checks``): the archive's earlier
rounds of main's lineage, then, where those are still too few, a census the current policy generates.

One round at the bench's small size holds one group of a kind; Fisher's test cannot tell a dead kind from the luck
of the draw on so few.  Two sources, in order:

- **the lineage** (``lineage_rows``): the training rows of the rounds whose policy this round's descends from, back
  to the first whose harness drew another mix (``tasks``: names, weights, configs), rendered its prompts otherwise
  (``templates``: the files under :data:`RENDERS`, ``templates_of``) or generated otherwise
  (``grpo``'s ``temperature``, ``max_completion_length``, ``group_size``); an edit to either changes what a kind's
  groups can show.  Group ids are per round, so each row's group is prefixed with its round.
- **the census** (``census``): where a kind off the exam still has neither signal nor a right answer but too few
  groups for the test (``slice_figures``' ``thin``), the current policy answers fresh tasks of every entry of main's
  mix, from the domain's ``val`` split (which neither training nor the exam draws from), rendered by main's templates
  in the sandboxed harness runtime and generated as the generation preview generates (``generation_preview``: its
  export, task draw, render and ``_generate``), rewarded by main's harness in the same session and verified by the
  domain. Its size comes from the Fisher bound (``census_size``); its rows carry split ``census``: the check's
  evidence, never archived, never shown to harness code as training (their views say ``split: census``).

The census runs in the digest phase, before the recipe and search agents read the digest: both act on the
finding, and a finding the digest lacks is a flaw no agent is asked to repair.

    pooled, rounds = lineage_rows(rows, history, main_yaml)   # history: [(round, harness.yaml, rows), ...] newest first
    more, record = census(preview, "main", thin_figures, level, seed=n)
"""

from __future__ import annotations

import logging
import shutil
import time
from typing import Any

from meta_agent.digest import HIGH
from meta_agent.slice_checks import all_outside, kind_of
from rl_backend.base import parse_harness_yaml
from sandboxes.harness_client import HarnessSession, trajectory_view

LOG = logging.getLogger(__name__)
SAME = ("temperature", "max_completion_length", "group_size")
"""The knobs that must match for an earlier round's groups to count beside this round's."""
LINEAGE = 4
"""At most this many earlier rounds pooled: the policy moves, and old groups say less of it."""
MAX_GROUPS = 30
"""The census's most groups in all (120 completions at the seed's 4, about 2 minutes on 2 shared cores at load 6): fewer
cannot decide a kind beside others live in a third of their groups at the 0.05/3 a three-kind mix is held to."""
PRIOR_LIVE = 0.5
"""The other kinds' live share assumed when the rows hold none of theirs to measure it by."""


RENDERS = ("prompts",)
"""The harness folders whose files render a task's prompt (the runtime's templates); an edit to any of them ends the
pool as an edit to the mix does."""


def templates_of(repo: Any, ref: str) -> dict[str, str]:
    """The text of every file under :data:`RENDERS` at ``ref`` of ``repo`` (a ``HarnessRepo``), by path: what a
    lineage round's config carries as ``templates`` so that ``lineage_rows`` stops at a prompt edit."""
    return {path: repo.read_file(ref, path) for folder in RENDERS for path in repo.files_in(ref, folder)}


def _same_mix(earlier: dict, now: dict) -> bool:
    knobs = (earlier.get("grpo") or {}), (now.get("grpo") or {})
    return all(earlier.get(k) == now.get(k) for k in ("tasks", "templates")) and \
        all(knobs[0].get(k) == knobs[1].get(k) for k in SAME)


def lineage_rows(rows: list[dict], history: list[tuple[int, dict, list[dict]]],
                 main_yaml: dict) -> tuple[list[dict], list[int]]:
    """(``rows`` and the training rows of ``history`` (the lineage's earlier rounds, newest first: round, its
    harness.yaml with its ``templates``, its rows) up to the first round main's mix, templates or generation knobs
    differ from (``main_yaml`` carries main's ``templates`` too), at most
    :data:`LINEAGE`, an earlier row's group prefixed ``r<round>/``; the earlier rounds pooled)."""
    out, pooled = list(rows), []
    for n, config, earlier in history[:LINEAGE]:
        if not _same_mix(config or {}, main_yaml):
            break
        pooled.append(n)
        out += [dict(r, group_id=f"r{n}/{r.get('group_id')}") for r in earlier if r.get("split", "train") == "train"]
    return out, pooled


def census_size(figures: dict[str, dict], level: float) -> int:
    """Groups per kind for the census: the fewest that would bring each thin kind off the exam under ``level``
    were the other kinds' groups with signal at their measured share (``PRIOR_LIVE`` where none is measured); at
    most :data:`MAX_GROUPS` over all kinds.  0 when no kind off the exam is thin (an exam kind is the seed's: a
    census never judges one alone)."""
    thin = [k for k, f in figures.items() if f.get("thin") and not f.get("on_exam")]  # the seed's kinds: no census
    if not thin:
        return 0
    most = max(1, MAX_GROUPS // max(1, len(figures)))
    for m in range(1, most + 1):
        worst = 0.0
        for kind in thin:
            rest = [f for k, f in figures.items() if k != kind]
            groups, live = sum(f["groups"] for f in rest), sum(f["signal"] for f in rest)
            share = live / groups if live else PRIOR_LIVE  # none live yet: too few to measure the others by
            rest_groups = groups + m * len(rest)
            live = int(round(share * rest_groups))
            worst = max(worst, all_outside(figures[kind]["groups"] + m, rest_groups, live) if live else 1.0)
        if worst < level:
            return m
    return most


def census(preview: Any, ref: str, figures: dict[str, dict], level: float, seed: int,
           max_groups: int = MAX_GROUPS) -> tuple[list[dict], dict]:
    """(census rows, the record the digest keeps: groups per kind, completions, seconds, ``phases`` (seconds per
    step: export, draw, sandbox_start, render, model_load, generate, score, sandbox_stop, verify), why).  ``preview``: a
    ``GenerationPreview`` on the current policy (its repo, domain, sandbox, workdir and generator are used)."""
    per_kind = min(census_size(figures, level), max(1, max_groups // max(1, len(figures))))
    if not per_kind:
        return [], {"groups": 0, "why": "no kind of the mix is too thin to judge"}
    started = time.monotonic()
    phases: dict[str, float] = {}
    mark = [started]

    def lap(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(phases.get(name, 0.0) + now - mark[0], 2)
        mark[0] = now

    dest = preview.workdir / "slice_census" / ref.replace("/", "_")
    shutil.rmtree(dest, ignore_errors=True)
    harness = preview.repo.export(ref, dest)
    config = parse_harness_yaml(harness)
    per_kind = min(per_kind, max(1, max_groups // max(1, len(config.tasks))))  # every entry of the mix is drawn
    lap("export")
    tasks = [t for spec in config.tasks for t in preview.domain.tasks("val", [spec], per_kind, seed)]
    lap("draw")
    k = config.grpo
    with HarnessSession(preview.sandbox, harness) as session:
        lap("sandbox_start")
        chats = session.render([{"question": t.question, "task": t.template_vars()} for t in tasks])
        keep = [i for i, c in enumerate(chats) if not isinstance(c, str)]  # a prompt that failed is not judged
        tasks, chats = [tasks[i] for i in keep], [chats[i] for i in keep]
        lap("render")
        preview._load()
        lap("model_load")
        outputs = []  # one batch per entry of the mix: its prompts share a longer opening (computed once) and pad
        for start in range(0, len(chats), per_kind):  # to their own longest, not the mix's (23% less CPU, x1)
            outputs += preview._generate(chats[start:start + per_kind], k.group_size, k.temperature,
                                         min(k.max_completion_length, 256))
        lap("generate")
        rows = [_row(task, chat, g, i, text, cut, seed) for g, (task, chat, group) in
                enumerate(zip(tasks, chats, outputs)) for i, (text, cut) in enumerate(group)]
        scored = session.score([trajectory_view(r) for r in rows], reward_range=preview.domain.reward_range)
        lap("score")
    lap("sandbox_stop")
    for row, s in zip(rows, scored):
        row["reward"] = s.reward
        score, _ = preview.domain.verify(row["data_source"], row["response"], tasks[row["_task"]].ground_truth)
        row["verified"] = float(float(score) >= HIGH)
        del row["_task"]
    lap("verify")
    seconds = round(time.monotonic() - started, 1)
    record = {"groups": len(tasks), "per_kind": per_kind, "completions": len(rows), "seconds": seconds,
              "phases": phases, "kinds": sorted({kind_of(r) for r in rows}), "seed": seed,
              "why": "too few groups to judge " + ", ".join(k for k, f in figures.items()
                                                            if f.get("thin") and not f.get("on_exam"))}
    LOG.warning("slice census: %d groups (%d completions) in %.1f s", len(tasks), len(rows), seconds)
    print(f"slice census: {len(tasks)} groups, {len(rows)} completions, {seconds} s", flush=True)
    return rows, record


def _row(task: Any, chat: list[dict], g: int, i: int, text: str, cut: bool, seed: int) -> dict:
    prompt = "\n".join(str(m.get("content", "")) for m in chat)
    return {"run_id": "census", "round": seed, "group_id": f"census/{g}", "traj_id": f"census-{g}-{i}",
            "sample_idx": i, "task_id": task.task_id, "data_source": task.data_source, "prompt": prompt,
            "response": text, "ground_truth": task.ground_truth, "response_tokens": None, "truncated": cut,
            "task": {"question": task.question, "vars": task.template_vars()},  # its entry's config (slice_checks)
            "finish_reason": "length" if cut else "stop", "split": "census", "_task": g}
