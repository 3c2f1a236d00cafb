"""verl's replay buffer that trains what the gate judged: whole GRPO groups through the harness, then the keep mask.

verl loads this file by path (``trainer.v1.sampler.custom_sampler.{path,name}``) in the
trainer process.  ``KeepMaskReplayBuffer`` is verl's own sync ``ReplayBuffer``; only
materialising a training batch changes.  verl scores one trajectory at a time (the reward
entry, ``rl_backend.verl.reward_entry``), so there a harness's ``keep_group`` sees groups of
one.  Here, once verl has picked the batch's complete groups, every group is sent whole to the
sandboxed harness runtime (``HarnessSession.score``, the request the backtest and the local
backend send for a generation batch: reward, ``keep_trajectory``, ``keep_group``,
``mask_truncated``, ``dynamic_sampling``, in the runtime's one order).  A trajectory trains
only when the reward entry kept it (``keep`` in its reward extra info), the group judgement kept
it, and the harness gave the same reward both times.  Nothing is graded here: each trajectory's verdict
(``verified``, ``verifier_info``) is the one the reward entry returned, which verl keeps in the row's
``extra_fields["reward_extra_info"]`` (a SWE episode's grade from its agent loop, a code program's one run).
Anything else -- a raising or junk ``keep_group``, a dead runtime, a reward that changed -- is an error
recorded in ``<group_records_dir>/<host>-<pid>-s<step>.jsonl`` and the trajectory is removed from the batch and from
TransferQueue, so it leaves the loss *and* the GRPO baseline (zeroing its response mask would
leave it in the baseline, reference §13).  A kept trajectory left alone in its group leaves the batch too
(``rl_backend.grpo_rule``: verl would give it its raw reward as advantage).  A batch in which nothing trains
fails the step.

verl dumps a step's rollouts after this sampler, so its dump holds only what trained.  The records
file therefore carries one line per session judged (``uid, session, key, keep, error, step, launch``)
and, for each trajectory dropped, a ``dropped`` object with what the archive row needs (``output``
index, prompt and response text as verl's dump decodes them, ``gts``, ``data_source``, ``task_id``,
``response_tokens``, ``truncated``, the harness's group reward and info, and ``reason``); the
importer (``dropped.iter_round_tables``) adds those rows beside the dump's, marked ``keep: false``.

The response text is decoded from verl's token ids with the policy's tokenizer, as verl's
reward manager does (``skip_special_tokens=True``, the final output of each session).
``truncated`` is verl's own notion (``response_length/clip_ratio``): the response reached
``data.max_response_length`` tokens.

Once a custom sampler is set, verl no longer hands it ``algorithm.filter_groups``; the
launcher passes the group filter through ``sampler_kwargs`` (``filter_groups_metric``,
``train_batch_size``, ``max_inflight_gen_batches``) and this class gives it to verl's own
filtering code, which then evicts zero-variance groups and refills as it would without us.
The harness settings come the same way (``rl_backend.verl.config.build_overrides``)::

    trainer.v1.sampler.sampler_kwargs.{harness_dir, domain_ref, tokenizer_path, max_response_length,
                                       dynamic_sampling, mask_truncated, group_records_dir}

The trainer's node needs what a reward worker's node needs: this project, Docker with the
sandbox image and the harness folder at the same path.
"""

from __future__ import annotations

import json
import os
import socket
from collections import defaultdict
from pathlib import Path
from typing import Any

import transfer_queue as tq
from transfer_queue import KVBatchMeta

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from rl_backend.grpo_rule import trains
from rl_backend.verl.config import HARNESS_FAILURE_MARK
from rl_backend.verl.metering import meter
from rl_backend.verl.packing import score_requests

KEEP_KEY = "keep"
KEPT_METRIC, JUDGED_METRIC = "harness/kept_trajectories", "harness/judged_trajectories"
"""Step metrics (verl logs what ``sample`` returns): the digest's ``kept_share`` is kept over judged; the archive
holds the same judged trajectories (the dump's kept ones and the dropped ones from the records)."""
JUDGE_FIELDS = ["prompts", "responses", "data_source", "reward_model", "extra_info", "extra_fields"]
REWARD_TOLERANCE = 1e-6
HARNESS_KWARGS = ("harness_dir", "domain_ref", "tokenizer_path", "max_response_length", "group_records_dir")


def keep_of(extra_fields: Any) -> bool:
    """A trajectory's keep decision from its stored ``extra_fields``; a missing ``keep`` is a fault, not a keep."""
    info = _reward_info(extra_fields)
    if KEEP_KEY not in info:
        raise RuntimeError(f"a trajectory has no {KEEP_KEY!r} in its reward extra info: is "
                           "reward.custom_reward_function.path rl_backend/verl/reward_entry.py?")
    return float(info[KEEP_KEY]) > 0.5


def verdict_of(info: dict) -> tuple[float, str | None]:
    """The trusted verifier's score and info (JSON text) the reward entry recorded for a trajectory."""
    if not isinstance(info.get("verified"), (int, float)) or isinstance(info.get("verified"), bool):
        raise RuntimeError("a trajectory has no 'verified' score in its reward extra info: is "
                           "reward.custom_reward_function.path rl_backend/verl/reward_entry.py?")
    text = info.get("verifier_info")
    return float(info["verified"]), None if text in (None, "null") else str(text)


def _reward_info(extra_fields: Any) -> dict:
    fields = getattr(extra_fields, "data", extra_fields)
    info = fields.get("reward_extra_info", {}) if isinstance(fields, dict) else {}
    return info if isinstance(info, dict) else {}


def _data(value: Any) -> Any:
    return getattr(value, "data", value)


def _rows(tensor: Any) -> list:
    """A (nested) token-id tensor's rows."""
    return tensor.unbind() if getattr(tensor, "is_nested", False) else list(tensor)


class GroupJudge:
    """Whole groups through the sandboxed harness runtime; one instance per trainer process."""

    def __init__(self, *, harness_dir: str, domain_ref: str, tokenizer_path: str, max_response_length: int,
                 group_records_dir: str, dynamic_sampling: bool = False, mask_truncated: bool = False,
                 launch: int = 0) -> None:
        from transformers import AutoTokenizer

        from rl_backend.base import load_domain

        self.harness_dir, self.domain_ref = str(harness_dir), str(domain_ref)
        self.domain = load_domain(self.domain_ref)
        self.reward_range = self.domain.reward_range
        self.tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_path))
        self.max_response_length = int(max_response_length)
        self.dynamic_sampling, self.mask_truncated = bool(dynamic_sampling), bool(mask_truncated)
        self.records = Path(group_records_dir)
        self.launch = int(launch)  # a resumed job re-runs steps after its checkpoint: the last launch's lines win

    @classmethod
    def from_kwargs(cls, sampler_kwargs: dict) -> GroupJudge:
        missing = [k for k in HARNESS_KWARGS if sampler_kwargs.get(k) in (None, "")]
        if missing:
            raise RuntimeError(f"trainer.v1.sampler.sampler_kwargs lacks {', '.join(missing)}: the sampler cannot "
                               "judge groups through the harness; build the overrides with "
                               "rl_backend.verl.config.build_overrides")
        known = (*HARNESS_KWARGS, "dynamic_sampling", "mask_truncated", "launch")
        return cls(**{k: sampler_kwargs[k] for k in known if k in sampler_kwargs})

    def judge(self, keys: list[str], fields: Any, entry_keep: list[bool] | None = None,
              step: int = 0) -> tuple[list[bool], list[str | None]]:
        """Per key (``{uid}_{session}_{output}``): the group judgement's keep and, when dropped for a fault, why.
        ``entry_keep`` (the reward entry's keep per key) and ``step`` go into the records of dropped trajectories."""
        from rl_backend.verl import reward_entry
        from sandboxes.harness_client import HarnessFailed

        ids_of, prompt_ids_of = _rows(fields["responses"]), _rows(fields["prompts"])
        final: dict[str, int] = {}  # session -> position of its highest output index (verl's own rule)
        for pos, key in enumerate(keys):
            uid, session, index = key.rsplit("_", 2)
            best = final.get(f"{uid}_{session}")
            if best is None or int(keys[best].rsplit("_", 1)[1]) < int(index):
                final[f"{uid}_{session}"] = pos
        views: dict[str, list[dict]] = defaultdict(list)  # uid -> views of its sessions
        session_of: dict[int, str] = {}  # id(view) -> session; two sessions may give the same text, so the same traj_id
        entry_reward: dict[str, float | None] = {}  # session -> the reward the entry recorded alone
        texts: dict[str, dict] = {}  # session -> what an archive row of it needs beyond the view
        for session_key, pos in final.items():
            uid, session = session_key.rsplit("_", 1)
            ids = [int(t) for t in ids_of[pos].tolist()]
            response = self.tokenizer.decode(ids, skip_special_tokens=True)
            ground_truth = _data(fields["reward_model"][pos])["ground_truth"]
            truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
            extra_info = dict(_data(fields["extra_info"][pos]) or {})
            data_source = str(_data(fields["data_source"][pos]))
            info = _reward_info(fields["extra_fields"][pos])
            # the one verdict, the reward entry's (verl keeps its dict per row); never graded again here
            verified, verifier_info = verdict_of(info)
            v = reward_entry.view(data_source, response, truth, extra_info,
                                  reward_entry.record_key(response, ground_truth), sample_idx=int(session),
                                  response_tokens=len(ids), truncated=len(ids) >= self.max_response_length,
                                  verifier_info=verifier_info)
            views[uid].append(v)
            session_of[id(v)] = session_key
            prompt_ids = [int(t) for t in prompt_ids_of[pos].tolist()]
            texts[session_key] = {"output": int(keys[pos].rsplit("_", 1)[1]), "gts": ground_truth,
                                  "prompt": self.tokenizer.decode(prompt_ids, skip_special_tokens=True),
                                  "entry_keep": True if entry_keep is None else entry_keep[pos],
                                  "verified": verified, "verifier_info": verifier_info}
            entry_reward[session_key] = float(info["score"]) if "score" in info else None
        verdict: dict[str, tuple[bool, str | None]] = {}  # session -> (keep, why dropped for a fault)
        group_scores: dict[str, tuple[float | None, dict]] = {}  # session -> the harness's reward and info in its group
        for request in score_requests(views):
            sessions = [session_of[id(v)] for v in request]
            try:
                with reward_entry._lock:
                    harness = reward_entry._session(self.harness_dir)
                    scored = harness.score(request, reward_range=self.reward_range,
                                           dynamic_sampling=self.dynamic_sampling, mask_truncated=self.mask_truncated)
                    meter(harness, scored, self.records)  # its group requests cost CPU too (issue 45)
            except (HarnessFailed, OSError) as exc:
                reward_entry._sessions.pop(self.harness_dir, None)
                verdict.update({s: (False, f"harness runtime: {exc}"[:2000]) for s in sessions})
                continue
            for session_key, s in zip(sessions, scored):
                group_scores[session_key] = (s.reward, dict(s.reward_info or {}))
                alone, error = entry_reward[session_key], s.error
                if error is None and (alone is None or s.reward is None or abs(alone - s.reward) > REWARD_TOLERANCE):
                    error = f"the harness scored this trajectory {alone!r} alone and {s.reward!r} in its group"
                verdict[session_key] = (s.keep and error is None, error)
        # rl_backend.grpo_rule: the only kept member of its group has no baseline, so it trains nothing
        kept = {sk: keep and texts[sk]["entry_keep"] for sk, (keep, _) in verdict.items()}
        sessions = list(kept)
        lone = {sk for sk, t in zip(sessions, trains([sk.rsplit("_", 1)[0] for sk in sessions],
                                                     [kept[sk] for sk in sessions])) if kept[sk] and not t}
        verdict.update({sk: (False, None) for sk in lone})
        self._record(views, session_of, verdict, texts, group_scores, step, lone)
        out = [verdict[key.rsplit("_", 1)[0]] for key in keys]
        return [k for k, _ in out], [e for _, e in out]

    def _record(self, views: dict[str, list[dict]], session_of: dict[int, str],
                verdict: dict[str, tuple[bool, str | None]], texts: dict[str, dict],
                group_scores: dict[str, tuple[float | None, dict]], step: int, lone: set[str]) -> None:
        """One line per session judged: ``{uid, session, key, keep, error, step, launch}`` (``key`` as the reward
        entry's records), ``keep`` the final decision, and a ``dropped`` object for a trajectory that does not train."""
        self.records.mkdir(parents=True, exist_ok=True)
        lines = []
        for uid, members in views.items():
            for v in members:
                session_key = session_of[id(v)]
                group_keep, error = verdict[session_key]
                text = texts[session_key]
                line = {"uid": uid, "session": v["sample_idx"], "key": v["traj_id"],
                        "keep": group_keep and text["entry_keep"], "error": error, "step": step,
                        "launch": self.launch}
                if not line["keep"]:
                    reward, reward_info = group_scores.get(session_key, (None, {}))
                    reason = error or ("the reward entry did not keep it (keep_trajectory, or the harness failed "
                                       "on it alone)" if not text["entry_keep"] else
                                       "the only kept member of its group: no baseline to compare it with, so it "
                                       "trains nothing (rl_backend.grpo_rule)" if session_key in lone else
                                       "the group judgement did not keep it (keep_group, dynamic_sampling, "
                                       "mask_truncated)")
                    line["dropped"] = {"output": text["output"], "prompt": text["prompt"], "response": v["response"],
                                       "gts": text["gts"], "data_source": v["data_source"], "task_id": v["task_id"],
                                       "response_tokens": v["response_tokens"], "truncated": v["truncated"],
                                       "reward": reward, "reward_info": reward_info, "reason": reason,
                                       "verified": text["verified"], "verifier_info": text["verifier_info"]}
                lines.append(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        # one file per process and step, replaced whole: a job killed mid-write leaves no torn line behind
        path = self.records / f"{socket.gethostname()}-{os.getpid()}-s{step}.jsonl"
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text((path.read_text(encoding="utf-8") if path.exists() else "") + "".join(lines), encoding="utf-8")
        tmp.replace(path)


class KeepMaskReplayBuffer(ReplayBuffer):
    """``ReplayBuffer`` whose training batches hold only the trajectories the harness kept, judged by group."""

    def __init__(self, **kwargs: Any) -> None:
        sampler_kwargs = dict(kwargs.get("sampler_kwargs") or {})
        metric = sampler_kwargs.get("filter_groups_metric")
        if metric is not None:
            kwargs.update(filter_groups_metric=metric, gen_batch_size=1,
                          train_batch_size=int(sampler_kwargs["train_batch_size"]),
                          max_inflight_gen_batches=int(sampler_kwargs.get("max_inflight_gen_batches", 1)))
        super().__init__(**kwargs)
        self.judge = GroupJudge.from_kwargs(sampler_kwargs)
        self.dropped_total = 0
        self._counts: tuple[int, int] | None = None  # (kept, judged) of the last training batch
        self._step = 0  # the step being sampled: verl dumps this batch as <step>.jsonl

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        self._counts, self._step = None, int(global_steps)
        batch, metrics = super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        if self._counts is not None:
            metrics = {**metrics, KEPT_METRIC: self._counts[0], JUDGED_METRIC: self._counts[1]}
        return batch, metrics

    def _materialize_batch(self, partition_id: str, selected_prompt_uids: list[str],
                           partition_snapshot: dict[str, dict]) -> KVBatchMeta:
        batch = super()._materialize_batch(partition_id, selected_prompt_uids, partition_snapshot)
        if partition_id == "val" or not batch.keys:
            return batch
        keys = list(batch.keys)
        fields = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=JUDGE_FIELDS)
        entry_keep = [keep_of(value) for value in fields["extra_fields"]]
        group_keep, errors = self.judge.judge(keys, fields, entry_keep, self._step)
        keep = [a and b for a, b in zip(entry_keep, group_keep)]
        dropped = [key for key, k in zip(keys, keep) if not k]
        if len(dropped) == len(keep):
            first = next((e for e in errors if e), "every keep is 0")
            raise RuntimeError(f"{HARNESS_FAILURE_MARK} it kept none of the {len(keep)} trajectories of this batch "
                               f"({first}; a lone kept member of a group trains nothing); see the round's "
                               "reward_records/ and group_records/")
        trained = trained_keys(keys, keep)  # the judgement dropped lone members already: this only guards the rule
        removed = [key for key, t in zip(keys, trained) if not t]
        if removed:  # out of the baseline and the loss
            tq.kv_clear(partition_id=partition_id, keys=removed)
            self.dropped_total += len(removed)
        self._counts = (len(keep) - len(removed), len(keep))
        tags = [tag for tag, t in zip(batch.tags, trained) if t]
        return KVBatchMeta(partition_id=partition_id, keys=[key for key, t in zip(keys, trained) if t], tags=tags)


def trained_keys(keys: list[str], keep: list[bool]) -> list[bool]:
    """Per batch key (``{uid}_{session}_{output}``): does it stay in the batch under ``rl_backend.grpo_rule``?
    Kept, and its prompt (``uid``, verl's GRPO group) has at least two kept sessions; the outputs of one session
    share its decision, as verl broadcasts a session's advantage to them."""
    session_keep = {key.rsplit("_", 1)[0]: k for key, k in zip(keys, keep)}
    sessions = list(session_keep)
    verdict = dict(zip(sessions, trains([s.rsplit("_", 1)[0] for s in sessions], [session_keep[s] for s in sessions])))
    return [verdict[key.rsplit("_", 1)[0]] for key in keys]
