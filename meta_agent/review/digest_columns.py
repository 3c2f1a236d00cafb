"""The round digest from Arrow columns: ``build_digest`` at the size of a real round (1M rows).

``meta_agent.digest.build_digest`` walks a list of row dicts: fine for a test round, but at a
million rows reading every column into dicts (five JSON columns parsed per row) and a dozen
passes over them take minutes and gigabytes.  This builds the same digest from one Arrow table
of the columns it needs (``DIGEST_COLUMNS``): figures with numpy over whole columns, the verifier's
JSON parsed once per distinct value, and row dicts made only for the examples it shows and the
rows that carry execution feedback (SWE and code rounds, which the domain summaries read).

    table = read_round(archive, "math-1", 3)
    digest = build_digest_from_table(3, table, metrics=metrics, findings=findings, eval=eval, previous=previous)

The figures equal ``build_digest``'s on the same rows (``tests/test_digest.py`` checks both ways agree).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from domains.code_digest import CODE_MODES, code_summary
from meta_agent import digest as d
from rl_backend.archive import Archive

DIGEST_COLUMNS = ("traj_id", "group_id", "sample_idx", "domain", "data_source", "prompt", "response", "reward",
                  "verified", "response_tokens", "truncated", "verifier_info")


def read_round(archive: Archive, run_id: str, round: int, split: str = "train") -> pa.Table:
    """The columns of one round the digest reads (no JSON parsed, no row dicts)."""
    return archive.read(run_id=run_id, round=round, split=split, columns=list(DIGEST_COLUMNS))


def _floats(column: pa.ChunkedArray) -> np.ndarray:
    """float64 with NaN for null and for any non-finite value (``finite_or_none`` says None to both)."""
    x = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False).astype(float)
    x[~np.isfinite(x)] = np.nan
    return x


def _codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Integer codes of ``str(value)`` per row, numbered by first appearance; and how many there are.

    One array, then Arrow's hash encoding: it numbers values as it meets them (dict insertion order)."""
    encoded = pc.dictionary_encode(pc.cast(column, pa.string()).fill_null("None").combine_chunks())
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(encoded.dictionary)


class _Infos:
    """The parsed verifier info per row, each distinct JSON text parsed once; per-row flags as numpy masks."""

    def __init__(self, column: pa.ChunkedArray) -> None:
        encoded = pc.dictionary_encode(column).combine_chunks()
        self.parsed = [d.json_obj(text) for text in encoded.dictionary.to_pylist()]
        self.index = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)

    def at(self, row: int) -> Any:
        i = int(self.index[row])
        return None if i < 0 else self.parsed[i]

    def mask(self, test) -> np.ndarray:
        """Rows whose info passes ``test`` (decided once per distinct info)."""
        per_value = np.array([bool(test(p)) for p in self.parsed] + [False], bool)  # index -1: a null info
        return per_value[self.index]


def _flat_groups(values: np.ndarray, group: np.ndarray, n_groups: int) -> tuple[float | None, np.ndarray]:
    """``_group_stats``: share of groups (with a finite value) whose values are all equal, and a mask of those."""
    ok = ~np.isnan(values)
    hi = np.full(n_groups, -np.inf)
    lo = np.full(n_groups, np.inf)
    np.maximum.at(hi, group[ok], values[ok])
    np.minimum.at(lo, group[ok], values[ok])
    present = np.isfinite(hi)
    flat = present & (hi - lo < 1e-9)
    return d.share_or_none(int(flat.sum()), int(present.sum())), flat


def _fmean(x: np.ndarray) -> float | None:
    return math.fsum(x.tolist()) / len(x) if len(x) else None


def build_digest_from_table(round: int, table: pa.Table, *, metrics: list[dict], findings: list[dict], eval: dict,
                            previous: list[dict], audit: dict | None = None) -> dict:
    """``meta_agent.digest.build_digest`` over a table of ``DIGEST_COLUMNS`` (module docstring)."""
    n = table.num_rows
    reward, verified = _floats(table.column("reward")), _floats(table.column("verified"))
    tokens = _floats(table.column("response_tokens"))
    truncated = table.column("truncated").fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    group, n_groups = _codes(table.column("group_id"))
    infos = _Infos(table.column("verifier_info"))
    has_info = infos.mask(lambda i: isinstance(i, dict))
    no_answer = infos.mask(lambda i: isinstance(i, dict) and str(i.get("reason") or "").strip().lower()
                           in d.NO_FINAL_ANSWER_REASONS)
    known = ~np.isnan(verified)
    failure, success = known & (verified < d.HIGH), known & (verified >= d.HIGH)
    paid = ~np.isnan(reward) & (reward >= d.HIGH)
    unpaid = ~np.isnan(reward) & (reward < d.HIGH)
    hacks, misses = np.flatnonzero(failure & paid), np.flatnonzero(success & unpaid)
    zero_var, flat = _flat_groups(reward, group, n_groups)
    verified_zero_var, _ = _flat_groups(verified, group, n_groups)
    sample_idx = table.column("sample_idx").to_numpy(zero_copy_only=False)
    flat_rows = np.flatnonzero(flat[group] & (sample_idx == 0))[:d.EXAMPLES_PER_MODE]

    def rows_at(index: np.ndarray | list[int]) -> list[dict]:
        if len(index) <= 64:  # a few examples: a slice each is cheap, a take over many chunks is not
            picked = [table.slice(int(i), 1).to_pylist()[0] for i in index]
        else:
            picked = table.take(pa.array(np.asarray(index, dtype=np.int64))).to_pylist()
        for i, row in zip(index, picked):
            row["verifier_info"] = infos.at(int(i))
        return picked

    def examples(index: np.ndarray, k: int) -> list[dict]:
        return [d.example(r) for r in rows_at(index[:k])]

    rewards = reward[~np.isnan(reward)]
    kept = d.kept_share(metrics, n)
    digest: dict[str, Any] = {
        "round": round, "n_trajectories": n, "n_groups": n_groups, "reward_mean": _fmean(rewards),
        "reward_std": float(np.sqrt(np.mean((rewards - rewards.mean()) ** 2))) if len(rewards) else None,
        "verified_mean": _fmean(verified[known]), "heldout_accuracy": d.finite_or_none(eval.get("heldout_accuracy")),
        "zero_variance_share": zero_var, "verified_zero_variance_share": verified_zero_var, "kept_share": kept,
        "truncation_rate": d.share_or_none(int(truncated.sum()), n),
        "mean_response_tokens": _fmean(tokens[~np.isnan(tokens)]),
        "no_final_answer_rate": d.share_or_none(int(no_answer.sum()), int(has_info.sum())),
        "hack_rate": d.share_or_none(len(hacks), int(failure.sum())),
        "miss_rate": d.share_or_none(len(misses), int(success.sum())),
        "disagreements": {"hack": examples(hacks, d.DISAGREEMENT_EXAMPLES),
                          "miss": examples(misses, d.DISAGREEMENT_EXAMPLES)},
    }
    trusted = {
        "reward_hacking": (digest["hack_rate"], digest["disagreements"]["hack"]),
        "reward_misses": (digest["miss_rate"], digest["disagreements"]["miss"]),
        "no_final_answer": (digest["no_final_answer_rate"], examples(np.flatnonzero(no_answer), d.EXAMPLES_PER_MODE)),
        "truncation": (digest["truncation_rate"], examples(np.flatnonzero(truncated), d.EXAMPLES_PER_MODE)),
        "zero_variance_groups": (zero_var, [d.example(r) for r in rows_at(flat_rows)]),
        "filter_drops": (None if kept is None else 1 - kept, []),
    }
    fields, audit_modes = d.audit_fields(audit)
    digest.update(fields)
    trusted.update(audit_modes)
    # rows with execution feedback (SWE, code) are few or the whole of a small round: the domain summaries read dicts
    graded = rows_at(np.flatnonzero(infos.mask(lambda i: isinstance(i, dict)
                                               and isinstance(i.get("execution"), dict))))
    wanted = {str(i) for f in findings if isinstance(f, dict) and isinstance(f.get("example_ids"), list)
              for i in f["example_ids"]}
    by_id = {r["traj_id"]: r for r in graded}
    if wanted:
        hits = np.flatnonzero(pc.is_in(table.column("traj_id"), value_set=pa.array(sorted(wanted))).to_numpy(
            zero_copy_only=False))
        by_id |= {r["traj_id"]: r for r in rows_at(hits)}
    modes = d.TRUSTED_MODES
    swe = d._swe_summary([r for r in graded if r.get("domain") != "code"])
    if swe is not None:
        digest["swe"] = swe
        modes = dict(d.TRUSTED_MODES, **d.SWE_MODES)
        for name, (field, _, _) in d.SWE_MODES.items():
            digest[field] = swe[field]
            trusted[name] = (swe[field], [d.example(by_id[i]) for i in swe["examples"][name]])
    else:
        digest.update({field: None for field, _, _ in d.SWE_MODES.values()})
    code = code_summary(graded)
    if code is not None:
        digest["code"] = code
        modes = dict(modes, **CODE_MODES)
        for name, (field, _, _) in CODE_MODES.items():
            trusted[name] = (code[field], [d.example(by_id[i]) for i in code["examples"][name]])
    digest["failure_modes"] = d._failure_modes(findings, trusted, by_id, modes)
    digest["per_task"] = _per_task(table, verified, reward)
    digest["training"] = d._training(metrics)
    digest["trends"] = d._trends(digest, previous)
    return digest


def _per_task(table: pa.Table, verified: np.ndarray, reward: np.ndarray) -> dict[str, dict]:
    """Per ``data_source``: rows, accuracy and mean reward, as ``digest._per_task``."""
    encoded = pc.dictionary_encode(pc.cast(table.column("data_source"), pa.string()).fill_null("None")).combine_chunks()
    source = encoded.indices.to_numpy(zero_copy_only=False)
    out = {}
    for code, name in sorted(enumerate(encoded.dictionary.to_pylist()), key=lambda item: item[1]):
        rows = source == code
        v, r = verified[rows], reward[rows]
        out[name] = {"count": int(rows.sum()), "accuracy": _fmean(v[~np.isnan(v)]), "reward": _fmean(r[~np.isnan(r)])}
    return out
