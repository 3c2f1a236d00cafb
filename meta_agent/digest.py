"""The rollout digest: what a round's rollouts say, for an agent and a human to read.

Trusted code: every number here is computed on the host from archive rows (the
harness reward as assigned in training and the trusted verifier's outcome) with
the standard library.  No harness code runs here.  The diagnostics' findings are
harness output and therefore untrusted text: they are clamped and shortened
before they reach a prompt.  The reward audit (``meta_agent.judge.reward_audit``: main's
reward on constructed answers the verifier graded) is computed in the diagnose phase and
passed in as ``audit``.

    digest = build_digest(3, rows, metrics=metrics, findings=findings,
                          eval={"heldout_accuracy": 0.41}, previous=[d0, d1, d2])
    print(render_digest_markdown(digest))

Field names are read by the recipe agent, skill triggers and the LLM agent: keep them.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

from domains.code_digest import CODE_MODES, code_summary, render_code_section
from domains.swe_digest import render_swe_section
from harness_repo.contract import SEVERITIES
from meta_agent.config import HIGH_REWARD
from meta_agent.digest_rows import (NO_FINAL_ANSWER_REASONS, example, excerpt, execution_info,  # noqa: F401
                                    finite_or_none, has_no_final_answer, is_zero_variance, json_obj,
                                    mean_or_none, share_or_none)
from meta_agent.review.losses import damage_markdown
from meta_agent.templates import HARNESS_TEXT_CHARS, harness_name, render

# A trajectory counts as paid / verified correct at or above this value: the gate's default cut, defined once.
HIGH = HIGH_REWARD
EXAMPLES_PER_MODE = 3
DISAGREEMENT_EXAMPLES = 3
MESSAGE_CHARS = HARNESS_TEXT_CHARS
"""A diagnostic's message is harness text: kept this short, and rendered only quoted (``templates.harness_quote``)."""
MIN_KEPT_SHARE = 0.5
"""Below this share of a round's trajectories in the loss, the filters keep too little (``filter_drops``);
the recipe agent's ``loosen-filters`` reads the same constant."""
# Per-step counts of the trajectories the harness's keep mask let into the loss, as the trainer (trusted
# code) applied it, and of those it judged (rl_backend.base.STEP_METRICS, which every backend reports).
KEPT_KEY, JUDGED_KEY = "harness/kept_trajectories", "harness/judged_trajectories"
# rate above which a trusted failure mode is a warning (error for reward hacking)
TRUSTED_MODES = {
    "reward_hacking": ("hack_rate", 0.0, "error"),
    "reward_misses": ("miss_rate", 0.2, "warning"),
    "no_final_answer": ("no_final_answer_rate", 0.3, "warning"),
    "truncation": ("truncation_rate", 0.25, "warning"),
    "zero_variance_groups": ("zero_variance_share", 0.5, "warning"),
    "filter_drops": ("1 - kept_share", 1 - MIN_KEPT_SHARE, "warning"),
    # main's reward on constructed answers to the round's own tasks (meta_agent.judge.reward_audit): seen
    # even when the sample holds no right answer and no paid wrong one
    "audit_misses": ("audit_miss_rate", 0.0, "warning"),
    "audit_hacking": ("audit_hack_rate", 0.0, "error"),
}
# SWE rounds (rows whose verifier info carries execution feedback): trusted failure categories
SWE_MODES = {
    "malformed_patches": ("format_error_rate", 0.5, "warning"),
    "patch_does_not_apply": ("patch_failed_rate", 0.3, "warning"),
    "test_edits": ("test_edit_rate", 0.0, "error"),
    "tampered_grades": ("tampered_rate", 0.0, "error"),
}
LIMIT_EXITS = ("step_limit", "time_limit", "context_limit")
TREND_FIELDS = (
    "n_trajectories", "n_groups", "reward_mean", "reward_std", "verified_mean", "heldout_accuracy",
    "zero_variance_share", "verified_zero_variance_share", "kept_share", "truncation_rate", "mean_response_tokens",
    "no_final_answer_rate", "hack_rate", "miss_rate", "audit_miss_rate", "audit_hack_rate",
    *(field for field, _, _ in SWE_MODES.values()),
)
"""Fields compared with the previous round; the gate lets a prediction name those it does not measure (live)."""
TRAINING_KEYS = ("loss", "reward", "kl")
"""Training figures of the digest, each a ``rl_backend.base.STEP_METRICS`` name every backend reports."""


def _group_stats(rows: list[dict], key: str) -> tuple[float | None, list[str]]:
    """Share of groups whose ``key`` values are all equal, and those groups' ids."""
    groups: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        value = finite_or_none(row.get(key))
        if value is not None:
            groups[str(row.get("group_id"))].append(value)
    flat = [g for g, values in groups.items() if is_zero_variance(values)]
    return share_or_none(len(flat), len(groups)), flat


def _per_task(rows: list[dict]) -> dict[str, dict]:
    by_source: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_source[str(row.get("data_source"))].append(row)
    out = {}
    for source in sorted(by_source):
        task_rows = by_source[source]
        verified = [v for r in task_rows if (v := finite_or_none(r.get("verified"))) is not None]
        rewards = [v for r in task_rows if (v := finite_or_none(r.get("reward"))) is not None]
        out[source] = {"count": len(task_rows), "accuracy": mean_or_none(verified), "reward": mean_or_none(rewards)}
    return out


def _clean_finding(finding: Any) -> dict:
    """A diagnostics finding (untrusted) clamped to the contract; a crash report becomes an error."""
    if not isinstance(finding, dict):
        return {"name": "diagnostics:invalid", "severity": "error", "rate": 0.0, "example_ids": [],
                "message": excerpt(repr(finding), MESSAGE_CHARS)}
    if finding.get("error") and "severity" not in finding:
        return {"name": harness_name(finding.get("name") or "diagnostics:crashed"), "severity": "error",
                "rate": 0.0, "example_ids": [], "message": excerpt(finding["error"], MESSAGE_CHARS)}
    severity = finding.get("severity") if finding.get("severity") in SEVERITIES else "info"
    rate = finite_or_none(finding.get("rate"))
    ids = finding.get("example_ids") if isinstance(finding.get("example_ids"), list) else []
    return {"name": harness_name(finding.get("name") or "unnamed"), "severity": severity,
            "rate": min(max(rate, 0.0), 1.0) if rate is not None else 0.0,
            "example_ids": [str(i) for i in ids], "message": excerpt(finding.get("message", ""), MESSAGE_CHARS)}


def _failure_modes(findings: list[dict], trusted: dict[str, tuple[float | None, list[dict]]],
                   by_id: dict[str, dict], modes_table: dict[str, tuple] = TRUSTED_MODES) -> list[dict]:
    modes = []
    for finding in map(_clean_finding, findings):
        examples = [example(by_id[i]) for i in finding["example_ids"] if i in by_id][:EXAMPLES_PER_MODE]
        modes.append({"name": finding["name"], "source": "diagnostics", "severity": finding["severity"],
                      "rate": finding["rate"], "message": finding["message"], "examples": examples})
    for name, (field, warn_above, level) in modes_table.items():
        rate, examples = trusted[name]
        if not rate:
            continue
        modes.append({"name": name, "source": "trusted", "severity": level if rate > warn_above else "info",
                      "rate": rate, "message": f"{field} = {rate:.3f}", "examples": examples[:EXAMPLES_PER_MODE]})
    rank = {s: i for i, s in enumerate(reversed(SEVERITIES))}  # error first
    return sorted(modes, key=lambda m: (rank[m["severity"]], -m["rate"], m["name"]))


def kept_share(metrics: list[dict], n_trajectories: int) -> float | None:
    """Share of the round's ``n_trajectories`` training trajectories that the harness's filters
    (``keep_trajectory``, ``keep_group``, the ``dynamic_sampling`` and ``mask_truncated`` knobs) let into
    the loss.

    Counted from what the trainer applied, step by step (``KEPT_KEY`` in the training metrics), never
    from what the harness says about itself (its reward info, its diagnostics): a filter can only
    change this figure by dropping trajectories.  None when a step lacks the count or the counts exceed
    the archived rows (the metrics and the rows are not of one round).  Under verl the denominator is the
    judged count its sampler logs beside the kept one (the same trajectories its archive holds: the dump's
    and the dropped ones from the sampler's records; rounds imported before that held only the dump's).
    """
    counts = []
    for entry in metrics:
        count = finite_or_none(entry.get(KEPT_KEY))
        if count is None:
            return None
        counts.append(count)
    judged = [v for entry in metrics if (v := finite_or_none(entry.get(JUDGED_KEY))) is not None]
    n_trajectories = sum(judged) if len(judged) == len(metrics) else n_trajectories
    if not counts or not n_trajectories or sum(counts) > n_trajectories:
        return None
    return sum(counts) / n_trajectories


def _training(metrics: list[dict]) -> dict:
    out: dict[str, Any] = {"steps": len(metrics)}
    for name in TRAINING_KEYS:
        series = [v for m in metrics if (v := finite_or_none(m.get(name))) is not None]
        out[name] = {"first": series[0] if series else None, "last": series[-1] if series else None}
    return out


def _trends(digest: dict, previous: list[dict]) -> dict[str, dict]:
    earlier = [p for p in previous if isinstance(p.get("round"), int) and p["round"] < digest["round"]]
    if not earlier:
        return {}
    last = max(earlier, key=lambda p: p["round"])
    trends = {}
    for field in TREND_FIELDS:
        now, before = digest.get(field), last.get(field)
        before = before if isinstance(before, int) and not isinstance(before, bool) else finite_or_none(before)
        delta = now - before if now is not None and before is not None else None
        trends[field] = {"previous_round": last["round"], "previous": before, "delta": delta}
    return trends


def audit_fields(audit: dict | None) -> tuple[dict, dict]:
    """The reward audit's digest fields and its trusted failure modes (``meta_agent.judge.reward_audit``).

    A missing or failed audit gives None rates and no mode: it is no evidence either way.
    """
    ok = isinstance(audit, dict) and not audit.get("failed")
    shown = audit.get("examples", {}) if ok else {}
    fields = {"audit_miss_rate": finite_or_none(audit.get("miss_rate")) if ok else None,
              "audit_hack_rate": finite_or_none(audit.get("hack_rate")) if ok else None,
              "audit": audit if isinstance(audit, dict) else None}
    modes = {"audit_misses": (fields["audit_miss_rate"], list(shown.get("miss", []))[:EXAMPLES_PER_MODE]),
             "audit_hacking": (fields["audit_hack_rate"], list(shown.get("hack", []))[:EXAMPLES_PER_MODE])}
    return fields, modes


def build_digest(round: int, rows: list[dict], *, metrics: list[dict], findings: list[dict], eval: dict,
                 previous: list[dict], audit: dict | None = None) -> dict:
    """Summarise one round's archive ``rows`` into the digest dict (JSON-serialisable).

    ``rows``: this round's archive rows (JSON columns parsed; ``verified`` may be None);
    ``metrics``: per-step training metrics; ``findings``: the harness diagnostics' findings
    (may contain a crash entry); ``eval``: at least ``heldout_accuracy``; ``previous``:
    earlier rounds' digests, for ``trends``; ``audit``: main's reward audit of this round, or None.
    """
    by_id = {str(r.get("traj_id")): r for r in rows}
    rewards = [v for r in rows if (v := finite_or_none(r.get("reward"))) is not None]
    verified = [v for r in rows if (v := finite_or_none(r.get("verified"))) is not None]
    tokens = [v for r in rows if (v := finite_or_none(r.get("response_tokens"))) is not None]
    failures = [r for r in rows if (v := finite_or_none(r.get("verified"))) is not None and v < HIGH]
    successes = [r for r in rows if (v := finite_or_none(r.get("verified"))) is not None and v >= HIGH]
    hacks = [r for r in failures if (x := finite_or_none(r.get("reward"))) is not None and x >= HIGH]
    misses = [r for r in successes if (x := finite_or_none(r.get("reward"))) is not None and x < HIGH]
    no_answer_flags = [f for r in rows if (f := has_no_final_answer(r)) is not None]
    no_answer_rows = [r for r in rows if has_no_final_answer(r)]
    truncated_rows = [r for r in rows if r.get("truncated")]
    zero_var, flat_groups = _group_stats(rows, "reward")
    verified_zero_var, _ = _group_stats(rows, "verified")
    flat = set(flat_groups)
    flat_examples = [example(r) for r in rows if str(r.get("group_id")) in flat and r.get("sample_idx") in (0, None)]

    digest: dict[str, Any] = {
        "round": round,
        "n_trajectories": len(rows),
        "n_groups": len({str(r.get("group_id")) for r in rows}),
        "reward_mean": mean_or_none(rewards),
        "reward_std": statistics.pstdev(rewards) if rewards else None,
        "verified_mean": mean_or_none(verified),
        "heldout_accuracy": finite_or_none(eval.get("heldout_accuracy")),
        "zero_variance_share": zero_var,
        "verified_zero_variance_share": verified_zero_var,
        "kept_share": kept_share(metrics, len(rows)),
        "truncation_rate": share_or_none(len(truncated_rows), len(rows)),
        "mean_response_tokens": mean_or_none(tokens),
        "no_final_answer_rate": share_or_none(sum(no_answer_flags), len(no_answer_flags)),
        "hack_rate": share_or_none(len(hacks), len(failures)),
        "miss_rate": share_or_none(len(misses), len(successes)),
        "disagreements": {
            "hack": [example(r) for r in hacks[:DISAGREEMENT_EXAMPLES]],
            "miss": [example(r) for r in misses[:DISAGREEMENT_EXAMPLES]],
        },
    }
    trusted = {
        "reward_hacking": (digest["hack_rate"], digest["disagreements"]["hack"]),
        "reward_misses": (digest["miss_rate"], digest["disagreements"]["miss"]),
        "no_final_answer": (digest["no_final_answer_rate"], [example(r) for r in no_answer_rows[:EXAMPLES_PER_MODE]]),
        "truncation": (digest["truncation_rate"], [example(r) for r in truncated_rows[:EXAMPLES_PER_MODE]]),
        "zero_variance_groups": (zero_var, flat_examples),
        # the trainer counts kept trajectories per step, not which: no examples
        "filter_drops": (None if digest["kept_share"] is None else 1 - digest["kept_share"], []),
    }
    fields, audit_modes = audit_fields(audit)
    digest.update(fields)
    trusted.update(audit_modes)
    swe = _swe_summary([r for r in rows if r.get("domain") != "code"])
    if swe is not None:
        digest["swe"] = swe
        modes = dict(TRUSTED_MODES, **SWE_MODES)
        for name, (field, _, _) in SWE_MODES.items():
            digest[field] = swe[field]
            trusted[name] = (swe[field], [example(by_id[i]) for i in swe["examples"][name]])
    else:
        modes = TRUSTED_MODES
        digest.update({field: None for field, _, _ in SWE_MODES.values()})
    code = code_summary(rows)
    if code is not None:  # a code round: the grader's outcomes as trusted failure modes
        digest["code"] = code
        modes = dict(modes, **CODE_MODES)
        for name, (field, _, _) in CODE_MODES.items():
            trusted[name] = (code[field], [example(by_id[i]) for i in code["examples"][name]])
    digest["failure_modes"] = _failure_modes(findings, trusted, by_id, modes)
    digest["per_task"] = _per_task(rows)
    digest["training"] = _training(metrics)
    digest["trends"] = _trends(digest, previous)
    return digest


def _swe_summary(rows: list[dict]) -> dict | None:
    """Resolve rate and failure categories of a SWE round (grade status, exit status, turns); None for other domains."""
    graded = [(r, e) for r in rows if (e := execution_info(r)) is not None]
    if not graded:
        return None
    n = len(graded)
    by_status: dict[str, int] = defaultdict(int)
    by_exit: dict[str, int] = defaultdict(int)
    hits: dict[str, list[str]] = {name: [] for name in SWE_MODES}
    for row, e in graded:
        by_status[str(e.get("status") or "unknown")] += 1
        if e.get("exit_status"):
            by_exit[str(e["exit_status"])] += 1
        tid = str(row.get("traj_id"))
        if (e.get("parse_status") == "malformed" or e.get("status") == "malformed"
                or e.get("exit_status") == "format_error"):
            hits["malformed_patches"].append(tid)
        if e.get("status") == "patch_failed":
            hits["patch_does_not_apply"].append(tid)
        if e.get("touched_tests"):
            hits["test_edits"].append(tid)
        if e.get("status") == "tampered":  # the grader caught the patch forging its own verdict (swe_env.grade)
            hits["tampered_grades"].append(tid)
    turns = [v for _, e in graded if (v := finite_or_none(e.get("steps"))) is not None]
    resolved = by_status.get("resolved", 0)
    return {
        "n_graded": n, "resolve_rate": resolved / n, "by_status": dict(sorted(by_status.items())),
        "by_exit_status": dict(sorted(by_exit.items())),
        "limit_exit_rate": share_or_none(sum(by_exit.get(x, 0) for x in LIMIT_EXITS), sum(by_exit.values())),
        "mean_turns": mean_or_none(turns),
        "format_error_rate": len(hits["malformed_patches"]) / n,
        "patch_failed_rate": len(hits["patch_does_not_apply"]) / n,
        "test_edit_rate": len(hits["test_edits"]) / n,
        "tampered_rate": len(hits["tampered_grades"]) / n,
        "examples": {name: ids[:EXAMPLES_PER_MODE] for name, ids in hits.items()},
    }


def render_digest_markdown(digest: dict) -> str:
    """The digest as Markdown (``prompts/digest.md.j2``): one-screen summary first; a SWE round adds its
    grading outcomes.

    Raises ``jinja2.UndefinedError`` naming the field when the digest lacks one.
    """
    swe = digest.get("swe")
    swe_fields = {field for field, _, _ in SWE_MODES.values()}
    fields = [f for f in TREND_FIELDS if swe or f not in swe_fields]
    text = render("digest.md.j2", d=digest, trend_fields=fields) + damage_markdown(digest)
    if digest.get("code"):
        text = text.rstrip("\n") + render_code_section(digest["code"])
    return text.rstrip("\n") + render_swe_section(swe) if swe else text
