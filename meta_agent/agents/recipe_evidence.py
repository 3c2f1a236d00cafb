"""What the archive says a knob should be: the evidence the knob and budget recipes aim at.

The recipes once moved a knob back to the domain seed's value, the one value a benchmark's known-good repair
also holds; a harness wrong on the other side of the seed, or a seed wrong for its task mix, had no repair.
Here the target comes from the round's own rollouts and exam (trusted archive rows: the verifier's outcome,
token counts, the responses as generated):

- ``answer_tokens``: lengths of the answers the verifier accepted that finished within their budget, from
  training and from the exam (whose budget is the domain's, not the harness's: it sees past a short cut);
- ``finished_tokens``: the same for every finished answer the verifier could read (right or wrong);
- ``identical_share``: the share of training group members that repeat an earlier member of their group
  word for word (a sampler too cold to give GRPO different answers to contrast);
- ``solve``: per ``data_source``, [verified successes, rollouts] in training (the harness's own task mix and
  difficulty; the exam's are the domain's);
- ``verified_rate``: the pooled share of verified successes in training;
- ``spread``: over the round's training groups (``groups``), how many carry each disagreement of the reward with the
  verifier (``hack``: a verified failure paid at the high cut; ``failure_pay``: one paid anything; ``miss``: a
  verified success left under it; ``error``: a reward that erred; ``failure_spread``: failures paid differently in a
  group without a kept success) and each outcome (``success``, ``failure``), and ``sampled``, the groups of the run
  so far the gate may sample (``gather`` only): how a prediction on the gate's sample rates is read
  (``recipe_predict``).

    evidence = gather(ctx.archive, ctx.round)        # a dict, also shown in the agent's transcript
    digest = {**ctx.digest, "evidence": evidence}     # what every rule reads
    needed_budget(evidence)                          # 25 (tokens) or None without any finished answer
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from meta_agent.digest import HIGH, finite_or_none, has_no_final_answer

if TYPE_CHECKING:
    from rl_backend.archive import Archive

COLUMNS = ("split", "group_id", "response", "response_tokens", "truncated", "verified", "verifier_info",
           "data_source", "reward", "kept")
HEADROOM = 1.25
"""A budget is the 90th percentile of what accepted answers took, plus a quarter: room for the longer ones."""
BUDGET_QUANTILE = 0.9


def from_rows(rows: list[dict]) -> dict[str, Any]:
    """The evidence of a round's archive rows (training and exam)."""
    answers, finished = [], []
    solve: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    groups: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        verified = finite_or_none(row.get("verified"))
        tokens = finite_or_none(row.get("response_tokens"))
        if verified is not None and row.get("split") == "train":
            counts = solve[str(row.get("data_source"))]
            counts[0] += verified >= HIGH
            counts[1] += 1
        if tokens is not None and not row.get("truncated") and has_no_final_answer(row) is False:
            finished.append(int(tokens))
            if verified is not None and verified >= HIGH:
                answers.append(int(tokens))
        if row.get("split") == "train":
            groups[str(row.get("group_id"))].append(" ".join(str(row.get("response") or "").split()))
    members = [g for g in groups.values() if len(g) > 1]
    total = sum(n for _, n in solve.values())
    return {"answer_tokens": sorted(answers), "finished_tokens": sorted(finished),
            "identical_share": sum(len(g) - len(set(g)) for g in members) / sum(map(len, members)) if members else None,
            "groups": len(members), "solve": dict(solve),
            "verified_rate": sum(s for s, _ in solve.values()) / total if total else None,
            "spread": spread(rows)}


def spread(rows: list[dict]) -> dict[str, int]:
    """How many of the training groups (``groups``) carry each disagreement and each outcome, as the gate's
    per-group rates count them: pay is the reward as assigned in training, a trajectory the filters dropped
    (``kept`` false) is paid nothing."""
    kinds: dict[str, set[str]] = defaultdict(set)
    failure_pay: dict[str, set[float]] = defaultdict(set)  # group -> the rewards its kept failures earned
    for row in rows:
        verified, reward = finite_or_none(row.get("verified")), finite_or_none(row.get("reward"))
        if row.get("split") != "train" or verified is None:
            continue
        group = str(row.get("group_id"))
        kinds["groups"].add(group)
        right, kept, pay = verified >= HIGH, row.get("kept") is not False, reward if reward is not None else 0.0
        if reward is None:  # the reward erred (or was not a finite number)
            kinds["error"].add(group)
        if kept:
            (kinds["kept_success"].add(group) if right else failure_pay[group].add(pay))
        kinds["success" if right else "failure"].add(group)
        if right and kept and pay < HIGH:  # an erring reward counts at the bottom, as the gate counts it
            kinds["miss"].add(group)
        if not right and kept and pay > 0:
            kinds["failure_pay"].add(group)
            if pay >= HIGH:
                kinds["hack"].add(group)
    # spread among failures: a group without a kept success whose kept failures earned different rewards
    kinds["failure_spread"] = {g for g, paid in failure_pay.items() if len(paid) > 1 and g not in kinds["kept_success"]}
    return {k: len(kinds[k]) for k in ("groups", "hack", "failure_pay", "miss", "success", "failure", "error",
                                       "failure_spread")}


def gather(archive: Archive | None, round: int) -> dict[str, Any] | None:
    """The evidence of ``round`` in a run's ``archive`` (None without an archive or rows)."""
    if archive is None:
        return None
    rows = archive.rows(round=round, columns=list(COLUMNS) + ["run_id"])
    if not rows:
        return None
    found = from_rows(rows)
    found["spread"]["sampled"] = sampled_groups(archive, round, {str(r.get("run_id")) for r in rows})
    return found


def sampled_groups(archive: Archive, round: int, runs: set[str]) -> int:
    """The groups the gate may draw its sample from (``judge.sample.draw_sample``: every round's groups with a
    verifier outcome outside the held-out split) in ``runs`` up to ``round``: the round's own, and earlier rounds',
    whose answers the gate scores again under main's reward."""
    rows = archive.rows(columns=["run_id", "round", "group_id", "split", "verified"])
    return len({(r["run_id"], r["round"], r["group_id"]) for r in rows if str(r.get("run_id")) in runs
                and r.get("round") is not None and r["round"] <= round and r.get("split") != "heldout"
                and finite_or_none(r.get("verified")) is not None})


def evidence(digest: dict) -> dict[str, Any]:
    """The digest's evidence ({} when the agent had no archive)."""
    found = digest.get("evidence")
    return found if isinstance(found, dict) else {}


def quantile(values: list[int], q: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))])


def needed_budget(ev: dict) -> tuple[int, str] | None:
    """Tokens the accepted answers need (90th percentile plus headroom), from right answers, else from every
    finished answer; with the evidence it rests on.  None when nothing finished."""
    for key, what in (("answer_tokens", "verified answers"), ("finished_tokens", "finished answers")):
        values = [int(v) for v in ev.get(key) or [] if isinstance(v, int | float)]
        if values:
            q = quantile(values, BUDGET_QUANTILE)
            return math.ceil(q * HEADROOM), f"90th percentile {q:g} tokens of {len(values)} {what}"
    return None
