"""A slice of main's training mix that returns no learning signal (``main:dead_slice``), as ``main:task_mix`` is a
mix off the exam's shares.

GRPO learns only from a group whose rewards differ.  A task kind whose every group is flat and unsolved spends its
share of the prompts on nothing: off the exam (12j's off-exam-task: leg_counting at half the mix, 0 of 32 right)
or on it at a difficulty the policy never solves.  Per task kind (a row's kind is its ``data_source`` after the
last ``/``, the name of the generator that drew it), the round's training groups give the share with signal and the
solve rate, each with a Wilson interval.  A kind with weight in main's mix is dead when none of its groups has
signal, none of its answers is right, and its groups differ from the other kinds' beyond chance: Fisher's exact
test, one-sided, that every group with signal falls outside it, below :data:`ALPHA` split over the kinds judged
(two groups, or a round whose other kinds are flat too, say nothing).  Kinds dead together (neither signal nor a
right answer in any group), one of them off the exam, are tested as one set too, at :data:`ALPHA` split over the sets
of two or more kinds.  The rows may pool earlier rounds of main's lineage and groups a census generated for the
judgement (split ``census``, ``meta_agent.slice_census``): evidence only, never training rows.  Trusted code on
archive rows; no harness code runs here.  A kind solved in every group is flat too, but the policy does solve it:
not named here.

    check, finding = slice_check(rows, main_yaml["tasks"], MathDomain().eval_specs)
    finding["evidence"]["kinds"]["leg_counting"]   # {"groups": 8, "signal": 0, "solve_rate": 0.0, "dead": True, ...}
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from meta_agent.digest_rows import example

PREFIX, NAME, SOURCE = "main:", "dead_slice", "slice_checks"
ALPHA = 0.05
"""The chance, split over the kinds judged, below which a kind's flat groups are not the luck of the draw."""
Z = 1.96
Kinds = Callable[[str, str], dict[str, float]]
EXAMPLES = 3
SPLITS = ("train", "census")
"""The rows judged: training groups, and groups the census generated to judge on (never trained on)."""


def wilson(k: int, n: int) -> list[float]:
    """The 95% Wilson score interval of ``k`` of ``n``."""
    if n == 0:
        return [0.0, 1.0]
    p, z2 = k / n, Z * Z
    mid, half = (p + z2 / (2 * n)) / (1 + z2 / n), Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [round(max(0.0, mid - half), 4), round(min(1.0, mid + half), 4)]


def all_outside(n: int, rest: int, signal: int) -> float:
    """Fisher's one-sided exact chance that all ``signal`` groups with signal fall in the ``rest`` groups and none
    in the kind's ``n``, were the kinds alike (the hypergeometric probability of that split)."""
    return math.comb(rest, signal) / math.comb(n + rest, signal) if signal <= rest else 0.0


def kind_of(row: dict) -> str:
    return str(row.get("data_source") or "").rsplit("/", 1)[-1]


def _verified(row: dict) -> float | None:
    try:
        x = float(row.get("verified"))
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _rewards(rows: list[dict]) -> list[float]:
    out = []
    for r in rows:
        try:
            x = float(r.get("reward"))
        except (TypeError, ValueError):
            continue
        if math.isfinite(x):
            out.append(x)
    return out


def config_of(row: dict) -> dict | None:
    """The generator config the row's task was drawn with (its ``task`` column's ``vars``), or None."""
    task = row.get("task")
    if isinstance(task, str):
        try:
            task = json.loads(task)
        except ValueError:
            return None
    config = ((task or {}).get("vars") or {}).get("config") if isinstance(task, dict) else None
    return config if isinstance(config, dict) else None


def entry_labels(tasks: list[dict]) -> dict[str, list[tuple[str, dict]]]:
    """Per name that main's mix draws under two or more configs: (label ``name@i``, config) per entry, ``i`` its
    index in main's tasks.  A hard entry of a kind beside an easy one is judged apart when the rows say their config."""
    by_name: dict[str, list[tuple[int, dict]]] = defaultdict(list)
    for i, t in enumerate(tasks):
        by_name[str(t.get("name"))].append((i, dict(t.get("config") or {})))
    return {name: [(f"{name}@{i}", c) for i, c in entries] for name, entries in by_name.items()
            if len({json.dumps(c, sort_keys=True) for _, c in entries}) > 1}


def slice_groups(rows: list[dict], split: dict[str, list[tuple[str, dict]]] | None = None
                 ) -> dict[str, dict[str, list[dict]]]:
    """kind (or entry label, ``entry_labels``) -> group id -> the group's training rows."""
    out: dict[str, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("split", "train") in SPLITS and kind_of(r) and r.get("group_id") is not None:
            label = kind_of(r)
            if label in (split or {}):
                config = config_of(r)
                label = next((lab for lab, c in split[label] if c == config), label)
            out[label][str(r["group_id"])].append(r)
    return out


def _shares(pairs: list[tuple[str, float]], kinds: Kinds, split: str) -> dict[str, float]:
    total = sum(w for _, w in pairs) or 1.0
    out: dict[str, float] = defaultdict(float)
    for name, w in pairs:
        for kind, part in kinds(name, split).items():
            out[kind] += w / total * part
    return dict(out)


def _kind_figures(groups: dict[str, list[dict]]) -> dict:
    solved = [g for g, rs in groups.items() if any((v := _verified(r)) is not None and v >= 0.5 for r in rs)]
    # rewards that differ in a group whose answers were verified and none right (a format term's partial credit)
    # teach the format, not the kind: not signal for the test
    checked = {g for g, rs in groups.items() if any(_verified(r) is not None for r in rs)}
    signal = [g for g, rs in groups.items() if len(set(_rewards(rs))) > 1 and (g in solved or g not in checked)]
    answers = [v for rs in groups.values() for r in rs if (v := _verified(r)) is not None]
    right = sum(v >= 0.5 for v in answers)
    return {"groups": len(groups), "signal": len(signal), "signal_interval": wilson(len(signal), len(groups)),
            "live": len(set(signal) | set(solved)), "answers": len(answers),
            "solve_rate": round(right / len(answers), 4) if answers else None,
            "solve_interval": wilson(right, len(answers)), "group_ids": sorted(groups)[:EXAMPLES]}


def slice_figures(rows: list[dict], train_tasks: list[dict], exam_specs: list[Any],
                  kinds: Kinds = lambda name, split: {name: 1.0}) -> tuple[dict[str, dict], float]:
    """(per kind of main's mix with groups in ``rows``: its figures, ``chance`` and ``dead``; the level each chance
    is held to).  A kind with no live group whose chance is not below the level is ``thin``: too few groups."""
    tasks = [t for t in train_tasks or [] if isinstance(t, dict)]
    mix = _shares([(str(t.get("name")), float(t.get("weight", 1.0))) for t in tasks], kinds, "train")
    exam = set(_shares([(str(getattr(s, "name", "")), 1.0) for s in exam_specs or []], kinds, "heldout"))
    split = entry_labels(tasks)
    total = sum(float(t.get("weight", 1.0)) for t in tasks) or 1.0
    for name, labels in split.items():  # an entry's share: its weight's part of what its name draws
        for (label, _), t in zip(labels, [t for t in tasks if str(t.get("name")) == name]):
            for kind, part in kinds(name, "train").items():
                mix[label] = mix.get(label, 0.0) + float(t.get("weight", 1.0)) / total * part
                exam |= {label} if kind in exam else set()
    figures = {kind: _kind_figures(groups) | {"share": round(mix[kind], 4), "on_exam": kind in exam}
               for kind, groups in sorted(slice_groups(rows, split).items()) if mix.get(kind, 0.0) > 0}
    total_groups = sum(f["groups"] for f in figures.values())
    level = ALPHA / max(1, len(figures))
    for kind, f in figures.items():
        # against an exam kind only groups GRPO learns from count (the seed's kinds, solved flat in some groups of
        # an easy kind, must not name a hard one); against a kind off the exam a solved group counts too: the
        # policy answers those kinds, so a kind it never answers spends its share on nothing
        key = "signal" if f["on_exam"] else "live"
        live = sum(o[key] for k, o in figures.items() if k != kind)
        f["chance"] = round(all_outside(f["groups"], total_groups - f["groups"], live), 6)
        f["dead"] = bool(_unlive(f) and live and f["chance"] < level)
    unlive = [k for k, f in figures.items() if _unlive(f)]
    off = [k for k in unlive if not figures[k]["on_exam"]]
    exam_off = sum(not f["on_exam"] for f in figures.values())
    # sets of kinds dead together, each at ALPHA split over the sets its family could have tested: (1) the kinds
    # with neither signal nor a right answer, one of them off the exam (a census of a policy that solves an exam
    # kind in a few groups of a hundred cannot tell that kind from a dead one alone), over every set of two or
    # more of the mix's kinds; (2) those off the exam alone, over the sets of two or more kinds off the exam (the
    # only kinds a set of that family can hold).  The seed's mix (no kind off the exam) is held to the single test.
    for family, members, sets in (("set_chance", unlive if off else [], 2 ** len(figures) - len(figures) - 1),
                                  ("off_chance", off, 2 ** exam_off - exam_off - 1)):
        if len(members) < 2:
            continue
        n = sum(figures[k]["groups"] for k in members)
        live = sum(f["live"] for k, f in figures.items() if k not in members)
        chance = all_outside(n, total_groups - n, live)
        for k in members:
            figures[k][family] = round(chance, 6)
            figures[k]["dead"] = figures[k]["dead"] or bool(live and chance < ALPHA / sets)
    for f in figures.values():
        f["thin"] = bool(_unlive(f) and not f["dead"])
    return figures, level


def _unlive(f: dict) -> bool:
    return f["signal"] == 0 and f["solve_rate"] == 0.0


def slice_check(rows: list[dict], train_tasks: list[dict], exam_specs: list[Any],
                kinds: Kinds = lambda name, split: {name: 1.0}) -> tuple[dict, dict | None]:
    """(the check as the digest records it, the ``main:dead_slice`` finding or None). The finding's ``evidence`` carries
    every kind's figures (``kinds``: groups, with signal, solved or with signal (``live``), solve rate, intervals, share
    of main's mix, ``on_exam``, the chance, ``set_chance`` where tested as a set, ``dead``), the pooled signal share of
    the other kinds (``live``) and main's ``configs`` per kind; its rate is the share of main's mix on dead kinds.
    ``kinds``: the task kinds a name draws in a split (``main_checks.task_kinds``; by default a name is its kind)."""
    tasks = [t for t in train_tasks or [] if isinstance(t, dict)]
    figures, level = slice_figures(rows, tasks, exam_specs, kinds)
    found = {k: f for k, f in figures.items() if f["dead"]}
    lines = [f"{k}: {f['signal']} of {f['groups']} groups with signal {f['signal_interval']}, solve rate "
             f"{f['solve_rate']} {f['solve_interval']}, {f['share']:.3f} of the mix"
             + (f", chance {f['chance']:.4f}" if f["signal"] == 0 else "") for k, f in figures.items()]
    detail = "; ".join(lines) or "no training group names its task kind"
    check = {"name": NAME, "passed": not found, "detail": detail}
    if not found:
        return check, None
    live = [f for f in figures.values() if not f["dead"]]
    live_groups, live_signal = sum(f["groups"] for f in live), sum(f["signal"] for f in live)
    evidence = {"kinds": figures, "live": {"groups": live_groups, "signal": live_signal,
                                           "share": round(live_signal / live_groups, 4) if live_groups else None},
                "configs": {str(t.get("name")): t.get("config") or {} for t in tasks}, "alpha": level}
    groups = slice_groups(rows, entry_labels(tasks))
    examples = [dict(example(rs[0]), group_id=g, task=k) for k in found for g, rs in list(groups[k].items())]
    what = ", ".join(f"{k} ({'on' if f['on_exam'] else 'off'} the exam, {f['share']:.2f} of the mix, 0 of "
                     f"{f['groups']} groups with signal)" for k, f in found.items())
    return check, {"name": PREFIX + NAME, "source": SOURCE, "severity": "warning",
                   "rate": round(sum(f["share"] for f in found.values()), 4),
                   "message": f"a slice of the mix returns no learning signal: {what}; {detail}"[:400],
                   "examples": examples[:EXAMPLES], "evidence": evidence}
