"""The repair benchmark's tables (``bench/repair_bench.py table``): per configuration, per flaw and arm, recall
and live precision per arm, and each agent arm's last policy against the fixed arm and best-of-n, paired over
seeds and tasks.  Reads result records only; trains and judges nothing."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from repair_flaws import CONTROL, FLAWS

from meta_agent.heldout_stats import format_change, paired_difference

POOLED = "all flaws (pooled)"
RECIPE_RAN = ("search",)
"""Live arms whose records from before they named their agent were proposed by the recipe agent: compare_arms
knew only recipe and random-edit and fell back to the recipe agent for any other arm (found 2026-12-07; the live
best-of-n records are older than that arm's rename and were random edits, which compare_arms then ran)."""


def latest_records(results: Path, per_code: bool = False) -> list[dict]:
    """The newest record of each (tier, flaw, seed, arm, config, rounds) in the results file; ``per_code``: of each
    code version too (the docs' tables per code: a flaw measured held out and rerun in-sample at later code keeps
    both)."""
    latest: dict[tuple, dict] = {}
    if results.exists():
        for line in results.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                if r["tier"] == "live" and r["arm"] in RECIPE_RAN and "agent" not in r:
                    r |= {"arm": "recipe", "ran_as": r["arm"]}  # what proposed in it (see RECIPE_RAN)
                key = (r["tier"], r["flaw"], r["seed"], r["arm"], r.get("config"), r.get("rounds"))
                latest[key + ((r.get("code"),) if per_code else ())] = r
    return list(latest.values())


def _checked(record: dict) -> int:
    """A live cell's merges that a later round of its run could check: a merge of the last round has no next
    round (the first precision column counts it as unconfirmed; this one leaves it out)."""
    last = record.get("rounds", 0) - 1
    return sum(1 for b in record.get("branches", []) if b["decision"] == "merge" and b["round"] < last)


def _share(hits: int, n: int) -> str:
    return f"{hits}/{n} ({hits / n:.0%})" if n else "-"


def table(records: list[dict], incomplete: list[dict]) -> str:
    """The offline table (per flaw and arm), recall per arm, and the live table with precision."""
    lines = ["| tier | flaw | arm | cells | digest named it | addressed | gate (merge/probation/reject) | repaired |",
             "|---|---|---|---|---|---|---|---|"]
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in records + incomplete:
        cells[(r["tier"], r["flaw"], r["arm"])].append(r)
    order = {name: k for k, name in enumerate([*FLAWS, CONTROL])}
    recall: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    live: dict[str, dict] = defaultdict(lambda: {"merges": 0, "confirmed": 0, "checked": 0})
    for (tier, flaw, arm), rs in sorted(cells.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99), kv[0][2])):
        done = [r for r in rs if r.get("status") == "finished"]
        problems = sorted({r["status"] for r in rs if r.get("status") != "finished"})
        gate = defaultdict(int)
        for r in done:
            for b in r.get("branches", []):
                gate["probation" if b["decision"] == "merge" and b["probation"] else b["decision"]] += 1
        repaired = sum(bool(r.get("repaired")) for r in done)
        if flaw != CONTROL and arm != "fixed":
            recall[f"{tier} {arm}"][0] += repaired
            recall[f"{tier} {arm}"][1] += len(done)
        if tier == "live":
            live[arm]["merges"] += sum(r.get("merges", 0) for r in done)
            live[arm]["confirmed"] += sum(r.get("confirmed", 0) for r in done)
            live[arm]["checked"] += sum(_checked(r) for r in done)
        named = sum(bool(r.get("named")) for r in done) if tier == "offline" else None
        lines.append(f"| {tier} | {flaw} | {arm} | {len(done)}/{len(rs)}"
                     + (f" ({'; '.join(' '.join(p.split()).replace('|', '/') for p in problems)})" if problems else "")
                     + f" | {'-' if named is None else _share(named, len(done))}"
                     + " | " + (_share(sum(bool(r.get("addressed")) for r in done), len(done))
                                if tier == "offline" else "-")
                     + f" | {gate['merge']}/{gate['probation']}/{gate['reject'] + gate.get('undecided', 0)}"
                     + f" | {_share(repaired, len(done))} |")
    lines += ["", "| arm | recall (flaws repaired on main) | live precision (merges confirmed live) "
              "| of merges a later round checked |", "|---|---|---|---|"]
    for key in sorted(recall):
        tier, arm = key.split(" ", 1)
        prec = live.get(arm) if tier == "live" else None
        lines.append(f"| {key} | {_share(*recall[key])} | "
                     + (f"{_share(prec['confirmed'], prec['merges'])} | {_share(prec['confirmed'], prec['checked'])}"
                        if prec else "- | -") + " |")
    lines += ["", "AHE anchors: precision 33.7%, recall 51.4%.", "", _live_differences(records)]
    by_edit = _precision_by_edit(records)
    return "\n".join(lines + ([by_edit] if by_edit else []))


def _precision_by_edit(records: list[dict]) -> str:
    """Per agent arm and edit (a branch's slug): merges, those a later round checked, those it confirmed; over
    the live cells whose record keeps each merge's outcome (records before 2026-11-27 20:00 UTC did not)."""
    counts: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    cells = 0
    for r in records:
        merged = [b for b in r.get("branches", []) if b["decision"] == "merge"]
        if r["tier"] != "live" or r["arm"] == "fixed" or r.get("status") != "finished" or any(
                "live" not in b for b in merged):
            continue
        cells += 1
        for b in merged:
            row = counts[(r["arm"], b["branch"].rsplit("/", 1)[-1].partition("-")[2] or b["branch"])]
            row[0] += 1
            row[1] += b["live"] is not None
            row[2] += b["live"] == "confirmed"
    if not counts:
        return ""
    lines = ["", f"Live precision by edit ({cells} agent cells whose record keeps each merge's outcome):", "",
             "| arm | edit | merged | checked by a later round | confirmed |", "|---|---|---|---|---|"]
    for (arm, edit), (merged, checked, confirmed) in sorted(counts.items()):
        lines.append(f"| {arm} | {edit} | {merged} | {checked} | {_share(confirmed, checked)} |")
    return "\n".join(lines)


def tables_by_config(records: list[dict], by_code: bool = False) -> str:
    """One :func:`table` per configuration (knobs, candidates, held-out size, live rounds), headed by it; with
    ``by_code`` (the docs' tables: ``bench/tables.py``), one per configuration and code version (a record's
    ``code``), so that no figure pools cells that ran different code. Pooled, the "Code the cells ran at" line
    says what it pooled.

    Cells run at different sizes must never pool: a seed's held-out tasks are keyed ``seed/task``, so a
    tiny run's seed 0 and a full-size run's seed 0 would otherwise be paired as one."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in records:
        code = (r.get("code") or "") if by_code else ""
        groups[(r.get("config") or "", r["tier"] == "live" and r.get("rounds") or 0, code)].append(r)
    if not groups:
        return "(no cell in the results file yet)"
    by_setting: dict[tuple, list[tuple[str, list[dict]]]] = defaultdict(list)
    for (config, rounds, code), rs in groups.items():
        by_setting[(config, rounds)].append((code, rs))
    parts = []
    order = {id(r): k for k, r in enumerate(records)}  # records come in file order: time order
    for (config, rounds), versions in sorted(by_setting.items()):
        settings = json.loads(config) if config else {}
        heading = ", ".join(f"{k} {(' '.join(v) or 'as the seed') if isinstance(v, list) else v}"
                            for k, v in sorted(settings.items()))
        where = f"live, {rounds} rounds" if rounds else "offline"
        versions.sort(key=lambda cv: max((r.get("date") or "", order[id(r)]) for r in cv[1]), reverse=True)
        shown = []
        for code, rs in versions:  # the newest code first; older ones folded away in the docs
            version = "" if not by_code else f"; code {code[:10]}" if code else "; code not recorded"
            shown.append(f"### {where}; {heading or 'configuration not recorded'}{version} ({len(rs)} cells)\n\n"
                         f"{table(rs, [])}\n\n{code_mix(rs)}")
        if len(shown) > 1:
            shown[1] = f"<details><summary>{len(shown) - 1} older code versions</summary>\n\n{shown[1]}"
            shown[-1] += "\n\n</details>"
        parts += shown
    return "\n\n".join(parts)


def code_mix(records: list[dict]) -> str:
    """Which code the cells ran at (a record's ``code``: the commit, ``+changes`` when tracked files differed),
    newest first with their dates, then the cells whose record predates the stamp: a table that mixes cells of
    several sessions says so."""
    dates: dict[str | None, list[str]] = defaultdict(list)
    for r in records:
        dates[r.get("code")].append(r.get("date") or "")

    def part(code: str | None) -> str:
        known = sorted(d for d in dates[code] if d)
        when = "" if not known else f", {known[0]}" if known[0] == known[-1] else f", {known[0]} to {known[-1]}"
        name = "with no code recorded" if code is None else f"at {code[:10]}{code[40:]}"
        return f"{len(dates[code])} {name}{when}"

    stamped = sorted((c for c in dates if c is not None), key=lambda c: (max(dates[c]), c), reverse=True)
    return "Code the cells ran at: " + "; ".join(part(c) for c in stamped + ([None] if None in dates else [])) + "."


def _live_differences(records: list[dict]) -> str:
    """Per flaw, and pooled over the flaws: each agent arm's last-round held-out accuracy minus the fixed arm's
    and minus best-of-n's, paired over seeds and tasks (a task counts in a pair only where both arms ran it).
    A run whose last round fell and was rolled back is scored by the policy it keeps (``_kept_policy``)."""
    by: dict[tuple, dict] = defaultdict(dict)
    merged: dict[tuple, list] = defaultdict(list)
    for r in records:
        if r["tier"] == "live" and r.get("status") == "finished":
            scored = r.get("kept_policy") or r.get("last_round", {})  # what the run keeps after a final rollback
            by[(r["flaw"], r["arm"])] |= {f"{r['flaw']}/{k}": v for k, v in scored.items()}
            merged[(r["flaw"], r["arm"])].append(r.get("repair_merged_round"))
    for (flaw, arm), outcomes in list(by.items()):
        if flaw != CONTROL:  # the control has no flaw: its row stands alone, the goal's check that nothing breaks
            by[(POOLED, arm)] |= outcomes

    def minus(flaw: str, arm: str, baseline: str) -> str:
        base = by.get((flaw, baseline), {})
        d = paired_difference(base, by[(flaw, arm)]) if base and arm != baseline else None
        return format_change(d.value, d.low, d.high, d.excludes_zero) if d and d.n else "-"

    rows = ["| live flaw | arm | last policy - fixed (paired) | - best-of-n (paired) "
            "| repair merged in round (per seed) |",
            "|---|---|---|---|---|"]
    for flaw, arm in sorted(by, key=lambda k: (k[0] == POOLED, k)):
        if arm == "fixed":
            continue
        rounds = ", ".join("-" if m is None else str(m) for m in merged[(flaw, arm)]) if flaw != POOLED else ""
        rows.append(f"| {flaw} | {arm} | {minus(flaw, arm, 'fixed')} | {minus(flaw, arm, 'best-of-n')} | {rounds} |")
    note = ("\n\nLast policy: the last round's exam, or, when the last round's exam fell and the loop rolled back, "
            "the exam of the policy the run keeps.")
    return "\n".join(rows) + note if len(rows) > 2 else "(no finished live cell)"


def flaw_sets(bench: Path) -> dict[int, str]:
    """The held-out flaw modules in ``bench`` by the recipe set they were planted against (``PLANTED_AGAINST``):
    the name a held-out record's ``planted_against`` is shown under."""
    sets = {}
    for path in sorted(bench.glob("heldout_flaws_*.py")):
        found = re.search(r"^PLANTED_AGAINST = (\d+)", path.read_text(), re.M)
        if found:
            sets[int(found.group(1))] = path.stem.removeprefix("heldout_flaws_")
    return sets


def _newest(records: list[dict]) -> dict[tuple[str, str], dict]:
    """The newest finished record of each (flaw, arm) among ``records`` (file order is time order)."""
    return {(r["flaw"], r["arm"]): r for r in records if r.get("status") == "finished"}


def _first(records: list[dict]) -> dict[tuple[str, str], dict]:
    """The first finished record of each (flaw, arm): a held-out set is measured once; a later run at the same
    recipe set (a fix in progress, before the version was raised) is not its held-out figure."""
    return _newest(records[::-1])


def held_out_recall(records: list[dict], sets: dict[int, str]) -> str:
    """Per held-out flaw set, the offline recall of each agent arm when the set was still held out (its first
    record at the recipe set it was planted against: no recipe yet written for it), the live cells run held out,
    and the recipe arm's recall since, in-sample (the newest offline record at a later recipe set); then each arm
    pooled over every set. ``records``: every record of the results file in file order (not only the newest per
    code: a held-out cell rerun in-sample must not replace it here)."""
    held: dict[int, list[dict]] = defaultdict(list)
    later: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r.get("planted_against") is None or r["flaw"] == CONTROL:
            continue
        if r.get("sample") == "held-out":
            held[r["planted_against"]].append(r)
        elif r["tier"] == "offline" and r["arm"] == "recipe":
            later[r["flaw"]].append(r)
    if not held:
        return "(no held-out cell in the results file yet)"
    lines = ["| held-out set | planted against recipe set | offline, held out: recipe arm | search arm "
             "| random-edit arm | live cells held out (repaired) | recipe arm since, in-sample |",
             "|---|---|---|---|---|---|---|"]
    pooled: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for version in sorted(held):
        offline = _first([r for r in held[version] if r["tier"] == "offline"])
        live = [r for r in _newest([r for r in held[version] if r["tier"] == "live"]).values()
                if r["arm"] != "fixed"]
        cells = []
        for arm in ("recipe", "search", "random-edit"):
            mine = [r for (_, a), r in offline.items() if a == arm]
            hits = sum(bool(r.get("repaired")) for r in mine)
            pooled[arm][0] += hits
            pooled[arm][1] += len(mine)
            cells.append(_share(hits, len(mine)))
        flaws = sorted({flaw for flaw, _ in offline})
        since = [_newest(later[f]).get((f, "recipe")) for f in flaws]
        since = [r for r in since if r is not None]
        at = sorted({r.get("recipes_version") for r in since}, key=str)
        lines.append(f"| {sets.get(version, '?')} | {version} | " + " | ".join(cells)
                     + f" | {_share(sum(bool(r.get('repaired')) for r in live), len(live))}"
                     + f" | {_share(sum(bool(r.get('repaired')) for r in since), len(since))}"
                     + (f" (set {', '.join(map(str, at))})" if at else "") + " |")
    lines.append("| all sets | | " + " | ".join(_share(*pooled[a]) for a in ("recipe", "search", "random-edit"))
                 + " | | |")
    return "\n".join(lines)
