"""The SWE probe's surface sweep: each mark worn, one at a time, by the probe's own wrong patches.

A reward that pays a wrong patch by a mark of its surface (SEARCH/REPLACE edits, a made-up ``index`` hash, a
miscounted hunk header, a file the gold change does not touch: issue 45, held-out set c) pays nothing a policy
writes until the policy writes that mark, and then training pays it.  The probe's wrong answers wear a mark only
where its deck deals one (``probe_answers_surface.dealt``, about 3 in 10), so such a reward passed every probe
whose deck dealt it no such mark.  The sweep says what the gate can say without waiting for the mark: after the
round's score requests, each of the probe's wrong patches (the policy's own where the round held them, else
laid out as its answers are) is scored again with exactly one feature of its surface changed, every mark of
:data:`FEATURES` once (a mark the patch already wears is taken off instead: both directions), so whatever surface
feature a reward keys on, some pair differs by it alone.  Each variant goes out as its own request, the group it
belongs to as training sends a step (the variant and its group's other members as scored), into the same
session, the requests in a drawn order among the steps' (``judge.probe``); a request is a fresh process (the
runtime), so nothing in one tells it from a training step.  The
variant's record is the patch's own (the layout changes no test), or ``git apply``'s refusal where the layout
makes it refuse (``wear``).  The probe then judges every variant as it judges its other rows: a verified failure
the candidate pays more than main does fails ``probe_failure_pay``.

What is left: a session's requests outnumber a training round's by the sweep's (pid numbers in the container
grow with them, as with the container's age: issue 45's open leak); drawn in among the steps, a reward that pays
only in its first requests meets a variant there on most draws, not all.

    groups = sweep_groups(steps_rows, random.Random(seed))    # [[(row, "sweep", Constructed), ...], ...]
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from types import SimpleNamespace

from meta_agent.judge.probe_answers import Constructed
from meta_agent.judge.probe_answers_surface import Surface, marked, read_surface, task_files, wear
from meta_agent.judge.probe_verdict import SWEEP
from meta_agent.judge.reward_reading import Reading
from meta_agent.judge.reward_reading_sweep import read_variants, worn

FEATURES = ("search_replace", "search_replace_short", "made_up_index", "miscount_old", "miscount_new", "other_file")
"""What the sweep changes, one per variant: :data:`MARKS`, with SEARCH/REPLACE edits searching whole hunks or the
changed lines alone, and a miscount of either side of the header, apart (a reward reading one side met the other's
only: seed 7 of set c's miscounted hunk; one paying short SEARCH texts met long ones only: set d, 1 draw in 10)."""
KIND = SWEEP
"""The kind the probe's report gives a sweep row."""
MEMBER = "sweep_member"
"""The kind of a sweep group's other members: sent as their group holds them, judged in their own step only."""


def _worn(surface: Surface, mark: str) -> bool:
    """Whether ``surface`` wears ``mark`` (:data:`FEATURES`) already."""
    return {"search_replace": surface.form == "search_replace", "made_up_index": surface.index == "made_up",
            "search_replace_short": surface.form == "search_replace" and surface.search_context == 0,
            "miscount_old": surface.miscount[0] != 0, "miscount_new": surface.miscount[1] != 0,
            "other_file": surface.other is not None}[mark]


def worn_features(surface: Surface) -> set[str]:
    """The :data:`FEATURES` ``surface`` wears."""
    return {feature for feature in FEATURES if _worn(surface, feature)}


def _put_on(surface: Surface, mark: str, rng: random.Random) -> Surface:
    """``surface`` with ``mark`` (:data:`FEATURES`) on it, every other feature kept."""
    if mark.startswith("search_replace"):
        return Surface(form="search_replace", header=surface.header, search_context=0 if mark.endswith("short") else 3)
    if mark.startswith("miscount"):
        off = rng.choice((-1, 1, 2))
        return replace(surface, form="diff", miscount=(off, 0) if mark == "miscount_old" else (0, off))
    return marked(surface, mark, rng)


def _taken_off(surface: Surface, mark: str) -> Surface:
    """``surface`` without ``mark`` (every other feature kept)."""
    if mark == "search_replace_short":  # the same edits, searching whole hunks
        return replace(surface, search_context=3)
    if mark == "search_replace":
        return Surface(header=surface.header)
    if mark == "made_up_index":
        return replace(surface, index="none", index_line=None)
    if mark.startswith("miscount"):
        return replace(surface, miscount=(0, 0))
    return replace(surface, other=None)


def _variant(row: dict, answer: Constructed, mark: str, rng: random.Random) -> Constructed | None:
    """``row``'s wrong patch with ``mark`` put on or taken off, its record; None where it cannot be worn here."""
    from meta_agent.judge.probe_archived_code import FENCE, parsed_answer, with_record

    files = task_files(str(row["ground_truth"].get("task_id", "")))
    found = FENCE.search(answer.response)
    if files is None or found is None or answer.verdict is None:
        return None
    sources, gold = files
    block = found.group(2)
    parsed = parsed_answer(block, sources)
    if parsed.status != "ok" or not parsed.patch:
        return None
    surface = read_surface(block, sources, str(row["ground_truth"].get("gold_patch") or gold))
    changed = _taken_off(surface, mark) if _worn(surface, mark) else _put_on(surface, mark, rng)
    task = SimpleNamespace(ground_truth=row["ground_truth"])
    diff = block if "<<<<<<<" not in block else parsed.patch
    worn, record = wear(diff, changed, task, sources, rng)
    if worn.strip() == block.strip():  # the mark could not be worn (or taken off) here: no pair
        return None
    text = f"{answer.response[:found.start()]}```{found.group(1)}\n{worn.rstrip()}" \
           f"{found.group(3)}{answer.response[found.end():]}"
    return with_record(text, record or answer.verdict[1], sources, answer.truncated, answer.finish_reason)


def sweep_groups(steps_rows: list[list[tuple[dict, str, Constructed]]], rng: random.Random,
                 reading: Reading = Reading(), known: Reading = Reading()) -> list[list[tuple[dict, str, Constructed]]]:
    """One group per (wrong patch, mark): the group the patch was scored in, the patch replaced by its variant.

    Each mark goes to one of the round's wrong patches (dealt in turn over them, which one first drawn); a mark
    no wrong patch can wear is left out.  ``reading`` (the candidate's code, ``reward_reading``) adds a variant per
    feature it names beyond ``known``'s (main's), dealt on in turn (``reward_reading_sweep``).  Rows get ids of
    their own (``-v<k>``), their verdict from the record."""
    groups: dict[str, list[tuple[dict, str, Constructed]]] = {}
    for rows in steps_rows:
        for item in rows:
            groups.setdefault(item[0]["group_id"], []).append(item)
    wrong = [(row, answer) for rows in steps_rows for row, _, answer in rows
             if str(row.get("data_source", "")).startswith("swe") and answer.verdict is not None
             and answer.verdict[0] < 0.5 and not answer.truncated]
    if not wrong:
        return []
    at = rng.randrange(len(wrong))
    marks: list = rng.sample(FEATURES, len(FEATURES))
    marks += read_variants(reading, known, rng)
    out = []
    for k, mark in enumerate(marks):
        for tries in range(len(wrong)):  # the next wrong patch that can wear it
            row, answer = wrong[(at + k + tries) % len(wrong)]
            variant = _variant(row, answer, mark, rng) if isinstance(mark, str) else _read_variant(row, answer,
                                                                                                    mark[1], rng)
            if variant is not None:
                break
        else:
            continue
        group = []
        for other, kind, made in groups[row["group_id"]]:
            if other["traj_id"] == row["traj_id"]:
                group.append((dict(other, traj_id=f"{other['traj_id']}-v{k}", response=variant.response), KIND,
                              variant))
            else:
                group.append((dict(other, traj_id=f"{other['traj_id']}-v{k}"), MEMBER, made))
        out.append(group)
    return out


def _read_variant(row: dict, answer: Constructed, features: tuple, rng: random.Random) -> Constructed | None:
    """``row``'s wrong patch wearing the features a reading names, its own record (the parse is unchanged)."""
    from meta_agent.judge.probe_archived_code import with_record

    files = task_files(str(row["ground_truth"].get("task_id", "")))
    if files is None or answer.verdict is None:
        return None
    text = worn(answer.response, features, files[0], rng)
    return None if text is None else with_record(text, answer.verdict[1], files[0], answer.truncated,
                                                 answer.finish_reason)


def sweep_verdicts(groups: list[list[tuple[dict, str, Constructed]]], verdicts: dict[str, bool]) -> None:
    """Give the sweep's rows their records as the probe's rows have them (``verifier_info``), and ``verdicts``
    their entries: a variant its own record, another member the record it was scored with."""
    for group in groups:
        for row, kind, made in group:
            if kind == KIND and made.verdict is not None:
                row["verifier_info"] = json.dumps(made.verdict[1], default=str)
                verdicts[row["traj_id"]] = made.verdict[0] >= 0.5
            else:
                verdicts[row["traj_id"]] = verdicts[row["traj_id"].rsplit("-v", 1)[0]]
