"""The probe session in verl's call shape: what a harness sees when a run trains on verl.

On verl, harness code is called twice per trajectory, by two processes that never share a runtime:

1. the reward entry (``rl_backend.verl.reward_entry``, in verl's reward workers): every trajectory
   alone, a batch of its own, as ``reward_entry.view`` builds it (``traj_id`` the record key,
   ``group_id`` ``verl/<run>/<round>/<task>``, ``sample_idx`` 0, no length or truncation yet, and
   ``extra_info`` from the verl dataset row ``round_data.data_row`` writes);
2. the sampler (``rl_backend.verl.sampler``, in the trainer): whole groups, with ``sample_idx`` the
   session, the length and the truncation, packed by ``rl_backend.verl.packing.score_requests`` so that no request holds
   two groups of one task.

SWE on verl runs the agent loop (``rl_backend.verl.agent_loop``): its episodes reach the reward in
that same shape, with the trusted grading in ``extra_info`` (never shown to harness code).  The
local probe's names (``s<step>-g<group>``) are not what a verl run's harness sees, so a reward that
pays on ``verl/`` group ids alone would pass it.  Here the probe's constructed rows are scored in
both verl calls, each in a session of its own (as the two processes have), and a verified failure
paid in either counts.  The rows the diagnostics see are named as the importer names a verl
round (``rl_backend.verl.ingest``: ``<run>-r<round>-s<step>-<16 hex>``, groups ``s<step>-<uid>``).

A run is taken to train on verl when its latest round's archived ids are the importer's.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from rl_backend.verl import reward_entry
from rl_backend.verl.packing import score_requests
from sandboxes.harness_client import HarnessSession, Scored

VERL_ID = re.compile(r"-r\d+-s\d+-[0-9a-f]{16}$")
"""How ``rl_backend.verl.ingest`` (and ``dropped``) name an archived verl trajectory."""


def trained_on_verl(rows: list[dict]) -> bool:
    """Whether every one of ``rows`` (a run's latest round) carries the verl importer's trajectory id."""
    return bool(rows) and all(VERL_ID.search(str(r.get("traj_id", ""))) for r in rows)


def _paid(s: Scored) -> float:
    reward = s.invalid_reward if s.invalid_reward is not None else s.reward
    return float("-inf") if reward is None else reward


def _worse(alone: Scored, grouped: Scored) -> Scored:
    """Of the two calls on one trajectory, the one to judge: an error first, else the higher pay."""
    if alone.error is not None or grouped.error is not None:
        return alone if alone.error is not None else grouped
    return grouped if _paid(grouped) > _paid(alone) else alone


def score_like_verl(rows: list[tuple[dict, str, object]], user_prompts: list[str],
                    open_session: Callable[[], HarnessSession], domain, knobs) -> list[Scored]:
    """Rename ``rows`` (the probe's, group by group, ``verifier_info`` attached) as a verl round is archived and
    score them in verl's two calls; per row, the result to judge.  ``user_prompts``: per row, the last message
    of its prompt (what ``round_data.data_row`` puts in ``extra_info``).  Raises ``HarnessFailed`` as a
    session does."""
    uids: dict[str, str] = {}
    alone, grouped = [], {}
    for index, (row, _, _) in enumerate(rows):
        uid = uids.setdefault(row["group_id"], secrets.token_hex(16))  # verl's GRPO group: a fresh uuid per prompt
        step = (len(uids) - 1) // knobs.prompts_per_step
        digest = hashlib.sha256(f"{row['run_id']}\x1f{row['round']}\x1f{step}\x1f{uid}\x1f{row['sample_idx']}"
                                .encode()).hexdigest()[:16]
        row.update(traj_id=f"{row['run_id']}-r{row['round']}-s{step}-{digest}", group_id=f"s{step}-{uid}")
        truth_text = json.dumps(row["ground_truth"])
        extra_info = {"index": index, "task_id": row["task_id"], "split": "train", "run_id": row["run_id"],
                      "round": row["round"], "prompt": user_prompts[index]}
        key = reward_entry.record_key(row["response"], truth_text)
        verifier_info = json.loads(row["verifier_info"])
        alone.append(reward_entry.view(row["data_source"], row["response"], row["ground_truth"], extra_info, key,
                                       verifier_info=verifier_info))
        grouped.setdefault(uid, []).append(reward_entry.view(
            row["data_source"], row["response"], row["ground_truth"], extra_info, key, sample_idx=row["sample_idx"],
            response_tokens=row["response_tokens"], truncated=row["truncated"], verifier_info=verifier_info))

    def entry() -> list[Scored]:  # each trajectory a batch of its own, as the reward entry gathers them
        return _scored_in(open_session, lambda s: s.score_batches([[v] for v in alone],
                                                                  reward_range=domain.reward_range))

    def sampler() -> dict[int, Scored]:  # whole groups, packed as the sampler packs them; by view
        def requests(session: HarnessSession) -> dict[int, Scored]:
            out: dict[int, Scored] = {}
            for request in score_requests(grouped):
                results = session.score(request, reward_range=domain.reward_range,
                                        dynamic_sampling=knobs.dynamic_sampling, mask_truncated=knobs.mask_truncated)
                out.update({id(v): r for v, r in zip(request, results)})
            return out

        return _scored_in(open_session, requests)

    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="probe-verl") as pool:  # two processes, two sessions
        first, second = pool.submit(entry), pool.submit(sampler)
        by_entry, by_view = first.result(), second.result()
    # rows come group by group, so the groups' members in turn are the rows in order
    return [_worse(a, by_view[id(v)]) for a, v in zip(by_entry, (v for members in grouped.values() for v in members))]


def _scored_in(open_session: Callable[[], HarnessSession], call: Callable[[HarnessSession], object]):
    session = open_session()
    try:
        session.start()
        return call(session)
    finally:
        session.close()
