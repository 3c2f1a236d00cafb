"""Main's diagnostics judged by the examples they show: each row a finding names as an example of a mode the trusted
digest judges per row must be a row of that mode, and a count its message states must be the mode's count.

A diagnostic can report the right rate and still show the reader the wrong rows: the batch's first five rollouts, the
answers that passed, the group after each flat one.  The digest shows those rows as the mode's examples, and the LLM
agent reads them as what the failure looks like.  The trusted side knows, row by row, which rows are of each mode it
measures (``diagnostic_checks.MODES``): a member of a group whose rewards are all equal, a row cut off
(``truncated`` or ``finish_reason`` length), a row without a final answer (no ``Answer:`` line, or a final line the
verifier could not read as a value).  So on the round's own batch and on each constructed batch
(``meta_agent.constructed_checks``) every example id of a finding whose mode it measures is looked up, and the first
``k/n`` of its message, where ``n`` is the batch's count of the mode's units, is held to the mode's band of counts.
An example that is no row of the batch, or a row not of the mode, or a count outside the band, names
``main:diagnostic_examples`` (error where a warning's examples on one batch are none of them of its mode, else
warning).

    items, judged = wrong_examples("all_right", findings, rows, reasons)
    finding = examples_finding(items, judged, "constructed_checks")   # None when every example is of its mode
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, NamedTuple

from meta_agent.diagnostic_checks import ANSWER_LINE, TOLERANCE, trusted_rates, watched_mode
from meta_agent.digest_rows import finite_or_none, is_zero_variance, json_obj

PREFIX, NAME = "main:", "diagnostic_examples"
EXAMPLES = 4
READ = ("equal", "different value")
"""The verifier's reasons for a final line it read as a value (right or wrong); any other reason is a format failure
a sound diagnostic may name."""
COUNT = re.compile(r"(?<![\d.])(\d+)\s*(?:/|\bof\b)\s*(\d+)(?![\d.])")
"""A count a message states, ``k/n`` or ``k of n``."""


class Instances(NamedTuple):
    """Which rows of one batch are of a mode, by traj_id: ``of`` the rows of the mode, ``judged`` those the trusted
    side can judge for it, ``units`` how many units its rate counts (groups or rows)."""
    of: frozenset[str]
    judged: frozenset[str]
    units: int


def instances(rows: list[dict], reasons: list[str | None] | None = None) -> dict[str, Instances]:
    """Each mode's rows on ``rows``, judged as :func:`diagnostic_checks.trusted_rates` measures the mode: members of
    groups (by ``group_id``) whose numeric rewards are all equal; rows cut off; rows without a final answer (no
    ``Answer:`` line, or a final line the verifier did not read as a value: ``reasons``, the verifier's per row,
    else each row's ``verifier_info``; a row with no verdict is not judged)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        if finite_or_none(r.get("reward")) is not None:
            groups[str(r.get("group_id"))].append(r)
    flat = {str(m.get("traj_id")) for members in groups.values()
            if is_zero_variance([float(m["reward"]) for m in members]) for m in members}
    scored = {str(m.get("traj_id")) for members in groups.values() for m in members}
    ids = [str(r.get("traj_id")) for r in rows]
    cut = {i for i, r in zip(ids, rows) if r.get("truncated") or r.get("finish_reason") == "length"}
    if reasons is None:
        reasons = [_reason(r) for r in rows]
    judged = {i for i, why in zip(ids, reasons) if why is not None}
    missing = {i for i, why, r in zip(ids, reasons, rows) if why is not None and (
        why.strip().lower() not in READ or not ANSWER_LINE.search(str(r.get("response") or "")))}
    return {"zero_variance_groups": Instances(frozenset(flat), frozenset(scored), len(groups)),
            "truncation": Instances(frozenset(cut), frozenset(ids), len(rows)),
            "no_final_answer": Instances(frozenset(missing), frozenset(judged), len(judged))}


def _reason(row: dict) -> str | None:
    """The verifier's reason archived with ``row`` (None where it has no verdict)."""
    info = json_obj(row.get("verifier_info"))
    return str(info.get("reason") or "") if isinstance(info, dict) else None


def _stated(message: str, units: int) -> int | None:
    """The ``k`` of the first ``k/n`` in ``message`` whose ``n`` is ``units`` (None where it states none)."""
    return next((int(m.group(1)) for m in COUNT.finditer(message) if int(m.group(2)) == units), None)


def wrong_examples(where: str, findings: list[dict], rows: list[dict],
                   reasons: list[str | None] | None = None) -> tuple[list[dict], int]:
    """(what is wrong, findings judged) on batch ``where``: each finding of ``findings`` (one diagnose call's on
    ``rows``) whose mode the trusted side judges per row, its example ids against the mode's rows and its stated
    count against the mode's band (:func:`diagnostic_checks.trusted_rates`, :data:`TOLERANCE` of the units)."""
    of, bands = instances(rows, reasons), trusted_rates(rows, reasons)
    present = {str(r.get("traj_id")) for r in rows}
    items, judged = [], 0
    for f in findings:
        mode = watched_mode(str(f.get("name"))) if isinstance(f, dict) else None
        if mode is None:
            continue
        rows_of, (low, high, units) = of[mode], bands[mode]
        named = [str(i) for i in f.get("example_ids") or []]
        ids = [i for i in named if i not in present or i in rows_of.judged]
        said = _stated(str(f.get("message") or ""), units) if units and low is not None else None
        # a warning that shows no row at all where the batch has rows of its mode hides what the failure looks like
        blank = not named and f.get("severity") in ("warning", "error") and bool(rows_of.of)
        if not ids and said is None and not blank:
            continue
        judged += 1
        base = {"batch": where, "finding": str(f.get("name")), "diagnostic": f.get("diagnostic"), "mode": mode,
                "severity": f.get("severity"), "shown": len(ids)}
        items += [dict(base, kind="example", id=i, why="no row of the batch" if i not in present else
                       f"not a row of {mode}") for i in ids if i not in rows_of.of]
        if blank:
            items.append(dict(base, kind="none", why=f"names no example of its {len(rows_of.of)} rows"))
        if said is not None and not (low - TOLERANCE) * units <= said <= (high + TOLERANCE) * units:
            items.append(dict(base, kind="count", said=f"{said}/{units}",
                              trusted=f"{round(low * units)}/{units}" if low == high else
                              f"{round(low * units)}-{round(high * units)}/{units}"))
    return items, judged


def examples_finding(items: list[dict], judged: int, source: str) -> dict | None:
    """``main:diagnostic_examples`` over ``items`` (from :func:`wrong_examples`) of ``judged`` judged findings; None
    when there are none.  Its evidence names each finding with its mode, batches, wrong ids and counts, for the
    recipe (``agents.recipe_diagnostics``)."""
    if not items:
        return None
    by_finding: dict[str, dict[str, Any]] = {}
    wrong_on: dict[tuple[str, str], int] = defaultdict(int)
    for it in items:
        e = by_finding.setdefault(it["finding"], {"mode": it["mode"], "diagnostic": it.get("diagnostic"),
                                                  "batches": [], "wrong": [], "counts": []})
        if it["batch"] not in e["batches"]:
            e["batches"].append(it["batch"])
        if it["kind"] == "example":
            e["wrong"].append(it["id"])
            wrong_on[(it["batch"], it["finding"])] += 1
        elif it["kind"] == "none":
            e.setdefault("blank", []).append(it["batch"])
        else:
            e["counts"].append([it["batch"], it["said"], it["trusted"]])
    # a warning (or error) whose every example on a batch is not of its mode shows the reader no instance at all
    blind = any(it["kind"] == "none" or it["kind"] == "example" and it["severity"] in ("warning", "error")
                and wrong_on[(it["batch"], it["finding"])] == it["shown"] for it in items)
    findings = {(it["batch"], it["finding"]) for it in items}
    said = "; ".join(f"{name} ({e['mode']}) on {', '.join(e['batches'][:3])}: "
                     + ", ".join(([f"examples {', '.join(e['wrong'][:3])} are not of it"] if e["wrong"] else [])
                                 + (["a warning naming no example"] if e.get("blank") else [])
                                 + [f"count {s} vs trusted {t}" for _, s, t in e["counts"][:1]])
                     for name, e in by_finding.items())
    return {"name": PREFIX + NAME, "source": source, "severity": "error" if blind else "warning",
            "rate": min(1.0, len(findings) / max(judged, len(findings))),
            "message": (f"main's diagnostics show examples (or counts) that are not of the mode they report "
                        f"({len(findings)} of {max(judged, len(findings))} judged findings): {said}")[:400],
            "examples": [{k: it[k] for k in ("batch", "finding", "mode", "kind", "id", "why", "said", "trusted")
                          if k in it} for it in items[:EXAMPLES]],
            "evidence": {"findings": {n: dict(e, wrong=e["wrong"][:8], counts=e["counts"][:4])
                                      for n, e in by_finding.items()},
                         "judged": max(judged, len(findings))}}


def round_examples(digest: dict, of: dict[str, Instances] | None) -> tuple[list[dict], int]:
    """(what is wrong, findings judged) on the round's own batch: the diagnostics' findings in the digest (their
    examples, the rows the digest found by id) against the round's rows of each mode (``of``, :func:`instances` of
    its training rows); nothing without them."""
    if of is None:
        return [], 0
    findings = [{"name": m.get("name"), "severity": m.get("severity"), "message": m.get("message"),
                 "example_ids": [e.get("traj_id") for e in m.get("examples") or [] if isinstance(e, dict)]}
                for m in digest.get("failure_modes") or [] if m.get("source") == "diagnostics"]
    items, judged = [], 0
    for f in findings:
        mode = watched_mode(str(f.get("name")))
        if mode is None or not f["example_ids"]:
            continue  # a count in a round's message is held by the rate check there (diagnostic_checks)
        ids = [str(i) for i in f["example_ids"] if str(i) in of[mode].judged]
        judged += bool(ids)
        items += [{"batch": "round", "finding": str(f["name"]), "diagnostic": None, "mode": mode,
                   "severity": f["severity"], "shown": len(ids), "kind": "example", "id": i,
                   "why": f"not a row of {mode}"} for i in ids if i not in of[mode].of]
    return items, judged


def with_round(digest: dict, findings: list[dict], record: dict, source: str) -> list[dict]:
    """``findings`` with the round's own wrong examples (:func:`round_examples` on ``record["round_instances"]``)
    joined to the constructed batches' (``record["example_items"]``, of ``record["example_judged"]`` judged) as one
    ``main:diagnostic_examples``; the digest's ``main_checks`` entry says so."""
    items, judged = round_examples(digest, record.get("round_instances"))
    if not items:
        return findings
    merged = examples_finding(items + list(record.get("example_items") or []),
                              judged + int(record.get("example_judged") or 0), source)
    if merged is None:
        return findings
    digest.setdefault("main_checks", {})[NAME] = {"passed": False, "detail": merged["message"]}
    return [f for f in findings if f["name"] != PREFIX + NAME] + [merged]


CHOOSE = """

# Examples chosen by the repair loop: {why}. The code above still runs; its finding {name!r} keeps its rate and
# severity, and names as its examples the rows of {mode} as the trusted digest judges them{recounted}.
_unexampled_diagnose = diagnose


def _rows_of_mode(rollouts):
{select}


def diagnose(*args, **kwargs):
    found = _unexampled_diagnose(*args, **kwargs)
    if not isinstance(found, list):
        return found
    rollouts = list((args[0] if args else kwargs.get("rollouts")) or [])
    ids, total = _rows_of_mode(rollouts)
    out = []
    for f in found:
        if isinstance(f, dict) and f.get("name") == {name!r}:
            f = dict(f, example_ids=[str(i) for i in ids[:5]])
{recount}
        out.append(f)
    return out
"""
"""Appended to main's own diagnostic whose examples (or stated count) were not of the mode it reports: the named
finding's ``example_ids`` become the first rows of the mode (:data:`SELECT`, harness-side text of :func:`instances`),
and where its count was wrong, the message's ``k/n`` over the mode's units states the rows' count; its rate and
severity are the code's own (the ratchet compares those)."""
RECOUNT = """            import re
            f["message"] = re.sub(r"(?<![\\d.])\\d+(\\s*(?:/|\\bof\\b)\\s*" + str(total) + r")(?![\\d.])",
                                  lambda m: str(len(ids)) + m.group(1), str(f.get("message") or ""), count=1)"""
SELECT = {
    "zero_variance_groups": """    groups = {}
    for r in rollouts:
        value = r.get("reward")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
            groups.setdefault(str(r.get("group_id")), []).append((float(value), r.get("traj_id")))
    flat = [m[0][1] for m in groups.values() if max(v for v, _ in m) - min(v for v, _ in m) < 1e-9]
    return flat, len(groups)""",
    "truncation": """    cut = [r.get("traj_id") for r in rollouts
           if r.get("truncated") or r.get("finish_reason") == "length"]
    return cut, len(rollouts)""",
    # no final answer in math: neither an Answer: line with something on it nor a \\boxed{} answer
    "no_final_answer": """    import re
    final = re.compile(r"^[ \\t*]*answer[ \\t*]*:[ \\t*]*[^\\s*]|\\\\boxed\\{", re.IGNORECASE | re.MULTILINE)
    return [r.get("traj_id") for r in rollouts if not final.search(r.get("response") or "")], len(rollouts)""",
}
"""Per mode, harness-side: (the ids of the rows of the mode, one per flat group; the units its rate counts)."""


def chosen(text: str, name: str, mode: str, why: str, recount: bool) -> str:
    """``text`` (a diagnostic of main's) with :data:`CHOOSE` appended for its finding ``name`` of ``mode``."""
    return text.rstrip("\n") + "\n" + CHOOSE.format(
        name=name, mode=mode, why=why.replace("\n", " ")[:200], select=SELECT[mode],
        recounted=", and the count its message states over them" if recount else "",
        recount=RECOUNT if recount else "")
