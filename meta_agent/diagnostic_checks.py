"""Main's diagnostics judged by the rates they report: a diagnostic that reports a mode the trusted digest also
measures must report, on the same batch, the rate the digest measures there.

A harness diagnostic can be wrong without going silent or crashing: it groups rollouts by a key they lack (the whole
batch one group), counts cut-off answers by a length field of its own, divides by the wrong count, or reports a share
as a percentage.  Its finding then says something false about the round, and every reader of the digest (the LLM
agent, the recipes) reads it.  The trusted digest computes the same quantities on the host from the archive's rows
(``meta_agent.digest``: flat groups, truncation, answers without a final line), so each pair is compared:

- on the round's own batch (the digest's trusted fields against the diagnostics' findings in it), and
- on each constructed batch (``meta_agent.constructed_checks``: the trusted rate computed here on the batch's rows),

and a rate that differs by more than :data:`TOLERANCE` (what two sound definitions of one mode may differ by: the
verifier also accepts a ``\\boxed{}`` answer) names ``main:diagnostic_disagrees`` (error where the two figures fall
on either side of the trusted warning line, else warning).  A finding is matched to the mode it reports by its name
or its file's (:data:`MODES`' words), never by the seed's file list.

    items = disagreements("all_truncated", findings, trusted_rates(rows, reasons))
    finding = disagree_finding(items, compared=7)   # None when every compared rate agrees
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from typing import Any, NamedTuple

from meta_agent.digest_rows import finite_or_none, has_no_final_answer, is_zero_variance

PREFIX, NAME = "main:", "diagnostic_disagrees"
TOLERANCE = 0.1
"""Largest gap between a diagnostic's rate and the trusted one that is not a disagreement: rates on one batch carry no
sampling noise, only the difference of two sound definitions (the seed's Answer:-line check and the verifier's,
which also reads ``\\boxed{}``)."""
EXAMPLES = 4


class Mode(NamedTuple):
    """A failure mode both sides measure: the digest's field, the words a diagnostic's name uses for it, and the
    trusted warning line (``meta_agent.digest.TRUSTED_MODES``)."""
    field: str
    words: tuple[str, ...]
    warn_above: float


MODES = {
    "zero_variance_groups": Mode("zero_variance_share", ("zero_variance", "variance", "flat", "identical"), 0.5),
    "truncation": Mode("truncation_rate", ("trunc", "cut_off", "cutoff"), 0.25),
    "no_final_answer": Mode("no_final_answer_rate", ("format", "final_answer", "no_answer", "unparsed"), 0.3),
}


def watched_mode(name: str) -> str | None:
    """The trusted mode a diagnostic's finding (or file stem) ``name`` reports, by its words; None for any other
    (a crash report, a guard's ``<stem>_unmeasured`` or a mode the digest does not measure)."""
    name = name.lower()
    if name.endswith((":crashed", "_unmeasured")) or name.startswith("diagnostics:"):
        return None
    words = re.sub(r"[^a-z0-9]+", "_", name)
    return next((mode for mode, m in MODES.items() if any(w in words for w in m.words)), None)


Band = tuple[float | None, float | None, int]
"""(lowest, highest, units): the rates sound definitions of a mode give on one batch, over its groups or rows."""
ANSWER_LINE = re.compile(r"^[ \t*]*answer[ \t*]*:[ \t*]*[^\s*]", re.IGNORECASE | re.MULTILINE)
"""The final line the prompts ask for: a stricter definition of a final answer than the verifier's, which also
reads ``\\boxed{}`` (a sound format diagnostic may count a boxed-only answer as a failure)."""


def trusted_rates(rows: list[dict], reasons: list[str | None] | None = None) -> dict[str, Band]:
    """Each mode's band on ``rows`` as the digest measures it: flat groups by ``group_id`` over the harness's reward;
    rows ``truncated`` (to those whose ``finish_reason`` is ``length`` too); rows whose verifier found no final
    answer (``reasons``, the verifier's per row, else the rows' ``verifier_info``), to those without an
    ``Answer:`` line as well."""
    groups: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        if (value := finite_or_none(r.get("reward"))) is not None:
            groups[str(r.get("group_id"))].append(value)
    flat = sum(is_zero_variance(v) for v in groups.values())
    flags = ([None if why is None else why.strip().lower() in ("no final answer", "no_final_answer", "no answer")
              for why in reasons] if reasons is not None else [has_no_final_answer(r) for r in rows])
    judged = [(f, r) for f, r in zip(flags, rows) if f is not None]
    strict = sum(f or not ANSWER_LINE.search(str(r.get("response") or "")) for f, r in judged)
    cut = sum(bool(r.get("truncated")) for r in rows)
    cut_or_length = sum(bool(r.get("truncated")) or r.get("finish_reason") == "length" for r in rows)

    def share(k: int, n: int) -> float | None:
        return k / n if n else None

    return {"zero_variance_groups": (share(flat, len(groups)), share(flat, len(groups)), len(groups)),
            "truncation": (share(cut, len(rows)), share(cut_or_length, len(rows)), len(rows)),
            "no_final_answer": (share(sum(f for f, _ in judged), len(judged)), share(strict, len(judged)),
                                len(judged))}


def disagreements(where: str, findings: list[dict], trusted: dict[str, Band]) -> list[dict]:
    """Each finding of ``findings`` (one diagnose call's, on batch ``where``) whose mode the trusted side measured
    there and whose rate lies more than :data:`TOLERANCE` outside the trusted band (a rate that is no number lies
    outside every one)."""
    out = []
    for f in findings:
        mode = watched_mode(str(f.get("name"))) if isinstance(f, dict) else None
        low, high, n = trusted.get(mode, (None, None, 0)) if mode else (None, None, 0)
        if low is None or high is None:
            continue
        said = f.get("rate")
        said = float(said) if isinstance(said, int | float) and not isinstance(said, bool) else None
        if said is not None and math.isfinite(said) and low - TOLERANCE <= said <= high + TOLERANCE:
            continue
        warn = MODES[mode].warn_above
        out.append({"batch": where, "finding": str(f.get("name")), "diagnostic": f.get("diagnostic"), "mode": mode,
                    "reported": said, "trusted": round(low, 4) if high == low else [round(low, 4), round(high, 4)],
                    "units": n, "split": said is None or (said > warn) not in (low > warn, high > warn)})
    return out


def compared_count(findings: list[dict], trusted: dict[str, Band]) -> int:
    """How many of ``findings`` report a mode the trusted side measured on their batch (the rate's denominator)."""
    return sum(1 for f in findings if isinstance(f, dict) and (mode := watched_mode(str(f.get("name"))))
               and trusted.get(mode, (None, None, 0))[0] is not None)


def round_bands(rows: list[dict]) -> dict[str, Band]:
    """:func:`trusted_rates` on a round's training rows (what its diagnose phase handed the diagnostics)."""
    return trusted_rates([r for r in rows if r.get("split", "train") == "train"])


def round_disagreements(digest: dict, bands: dict[str, Band] | None = None) -> tuple[list[dict], int]:
    """(the disagreements on the round's own batch, the findings compared): the diagnostics' findings in the digest
    (their rates as the runtime clamped them to [0, 1]) against the round's trusted ``bands`` (:func:`round_bands`);
    without them, against the digest's fields (flat groups and truncation only: the digest keeps no band for a
    final answer)."""
    findings = [{"name": m.get("name"), "rate": m.get("rate")} for m in digest.get("failure_modes") or []
                if m.get("source") == "diagnostics"]
    if bands is not None:
        trusted = bands
    else:
        n = int(digest.get("n_trajectories") or 0)
        trusted = {mode: (rate, rate, n) for mode in ("zero_variance_groups", "truncation")
                   if (rate := finite_or_none(digest.get(MODES[mode].field))) is not None}
    return disagreements("round", findings, trusted), compared_count(findings, trusted)


def disagree_finding(items: list[dict], compared: int, source: str) -> dict | None:
    """``main:diagnostic_disagrees`` over ``items`` (from :func:`disagreements`) of ``compared`` comparisons; None
    when there are none.  Its evidence names each disagreeing finding with its mode and batches, for the recipe."""
    if not items:
        return None
    by_finding: dict[str, dict[str, Any]] = {}
    for it in items:
        entry = by_finding.setdefault(it["finding"], {"mode": it["mode"], "diagnostic": it.get("diagnostic"),
                                                      "batches": [], "figures": []})
        entry["batches"].append(it["batch"])
        entry["figures"].append([it["reported"], it["trusted"]])
    said = "; ".join(f"{name} ({e['mode']}) on {', '.join(e['batches'][:3])}: reported "
                     + ", ".join(f"{r} vs trusted {t}" for r, t in e["figures"][:2]) for name, e in by_finding.items())
    split = any(it["split"] for it in items)
    return {"name": PREFIX + NAME, "source": source, "severity": "error" if split else "warning",
            "rate": min(1.0, len(items) / max(compared, len(items))),
            "message": (f"main's diagnostics report a rate the trusted digest does not measure on the same batch "
                        f"({len(items)} of {max(compared, len(items))} compared findings, beyond {TOLERANCE}): "
                        f"{said}")[:400],
            "examples": [{k: it[k] for k in ("batch", "finding", "mode", "reported", "trusted")}
                         for it in items[:EXAMPLES]],
            "evidence": {"disagrees": by_finding, "compared": max(compared, len(items))}}


CALIBRATE = """

# Calibrated by the repair loop: {why}. The code above still runs; its finding {name!r} now carries the rate
# measured as the trusted digest measures {mode} (added where the code above reports none), warning above {warn}.
_uncalibrated_diagnose = diagnose


def _calibrated_rate(rollouts):
{measure}


def diagnose(*args, **kwargs):
    found = _uncalibrated_diagnose(*args, **kwargs)
    found = list(found) if isinstance(found, list) else []
    rollouts = args[0] if args else kwargs.get("rollouts")
    measured = _calibrated_rate(list(rollouts or []))
    if measured is None:
        return found
    rate, count, total = measured
    fixed = {{"name": {name!r}, "severity": "warning" if rate > {warn} else "info", "rate": rate,
             "message": f"{{count}}/{{total}} ({{rate:.0%}}) {mode} (measured as the trusted digest does)"}}
    mine = [k for k, f in enumerate(found) if isinstance(f, dict) and f.get("name") == {name!r}]
    if not mine:
        return found + [dict(fixed, example_ids=[])]
    return [dict(f, **fixed) if k in mine else f for k, f in enumerate(found)]
"""
"""Appended to main's own diagnostic whose rate disagreed with the trusted digest's, or that went silent where the
digest saw its mode: its finding's rate becomes the trusted definition's (:data:`MEASURES`, harness-side text of
:func:`trusted_rates`), computed from the fields rows carry; its other findings and example ids are kept."""
MEASURES = {
    "zero_variance_groups": """    groups = {}
    for r in rollouts:
        value = r.get("reward")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            groups.setdefault(str(r.get("group_id")), []).append(float(value))
    flat = sum(max(v) - min(v) < 1e-9 for v in groups.values())
    return (flat / len(groups), flat, len(groups)) if groups else None""",
    "truncation": """    cut = sum(bool(r.get("truncated")) or r.get("finish_reason") == "length" for r in rollouts)
    return (cut / len(rollouts), cut, len(rollouts)) if rollouts else None""",
    # the verifier's final answer in math: an Answer: line with something on it, or a \\boxed{} answer
    "no_final_answer": """    import re
    final = re.compile(r"^[ \\t*]*answer[ \\t*]*:[ \\t*]*[^\\s*]|\\\\boxed\\{", re.IGNORECASE | re.MULTILINE)
    missing = sum(not final.search(r.get("response") or "") for r in rollouts)
    return (missing / len(rollouts), missing, len(rollouts)) if rollouts else None""",
}
